"""What a program may ask the windows (extension `msgAsk`): the checks main runs before any window
sees a question. An asker runs the same function first, so a bad question fails before it is sent.

The form schema goes through `shared.schema.check_schema`: the same subset and caps as a server's
request. Every refusal is a `QuestionRefusedError` with JSON-RPC code -32602 and a message naming
what is wrong (for a schema: the property).
"""

import math
from collections.abc import Mapping
from typing import Any

from shared.errors import QuestionRefusedError, RpcCode, UnsupportedSchemaError
from shared.messages import (
    DEFAULT_QUESTION_TIMEOUT_S,
    MAX_ID_CHARS,
    MAX_QUESTION_TIMEOUT_S,
    AskerInfo,
)
from shared.schema import check_schema

ACKNOWLEDGE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
"""The form of a question without a schema: the message and Accept / Decline / Cancel."""


def question_params(message: str, schema: Any = None, url: str | None = None) -> dict[str, Any]:
    """MCP `ElicitRequestParams` JSON for a question: url mode with `url`, else a form (`schema`
    as given: `check_question` judges it)."""
    if url is not None:
        if schema is not None:
            raise ValueError("a question is either a form (schema) or a link (url), not both")
        # No elicitationId: nothing ever reports a question's link as completed.
        return {"mode": "url", "message": message, "url": url}
    return {"mode": "form", "message": message,
            "requestedSchema": schema if schema is not None else ACKNOWLEDGE_SCHEMA}


def _refuse(message: str) -> QuestionRefusedError:
    return QuestionRefusedError(RpcCode.INVALID_PARAMS, message)


def check_question(params: Mapping[str, Any]) -> dict[str, Any]:
    """The params as the windows get them (`mode` filled in), or QuestionRefusedError."""
    mode = params.get("mode", "form")
    if mode not in ("form", "url"):
        raise _refuse(f"params.mode must be 'form' or 'url', not {mode!r}")
    if not isinstance(params.get("message"), str):
        raise _refuse("params.message must be a string")
    if mode == "form":
        try:
            check_schema(params.get("requestedSchema"))
        except UnsupportedSchemaError as exc:
            raise _refuse(f"unsupported requestedSchema: {exc}") from None
    else:
        url = params.get("url")
        if not isinstance(url, str) or not url:
            raise _refuse("params.url must be a non-empty string in url mode")
        if "elicitationId" in params and not isinstance(params["elicitationId"], str):
            raise _refuse("params.elicitationId must be a string")
    return {**params, "mode": mode}


def check_timeout(timeout_s: float | None) -> float:
    """Seconds a question may wait for an answer: the default when None, else 0 < t <= 7 days."""
    if timeout_s is None:
        return DEFAULT_QUESTION_TIMEOUT_S
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not math.isfinite(timeout_s) \
            or not 0 < timeout_s <= MAX_QUESTION_TIMEOUT_S:
        raise _refuse(f"timeoutSeconds must be a number of seconds above 0 and at most "
                      f"{MAX_QUESTION_TIMEOUT_S:.0f} (7 days), not {timeout_s!r}")
    return float(timeout_s)


def check_asker(asker: AskerInfo) -> None:
    """Who asks is shown on the card: a name of 1 to 200 characters, a machine name as long."""
    if not asker.name.strip() or len(asker.name) > MAX_ID_CHARS:
        raise _refuse(f"asker.name must be 1 to {MAX_ID_CHARS} characters")
    if asker.machine is not None and len(asker.machine) > MAX_ID_CHARS:
        raise _refuse(f"asker.machine must be at most {MAX_ID_CHARS} characters")
    if asker.pid is not None and asker.pid < 0:
        raise _refuse("asker.pid must not be negative")
