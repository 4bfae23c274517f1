"""MCP's `ElicitRequestParams` as typed values: a form (message + requestedSchema) or a URL (message,
url, elicitationId), told apart by `mode`, a missing mode being a form (as MCP says).

main reads a request's params once, where the request enters it (a server's elicitation, a relayed
one, a program's question, its own approval and sign-in cards: `read_params`), and its layers read the
typed value. The JSON itself travels to the windows unchanged (`ElicitationRequest.params`), other
keys (`_meta`, ...) included; a window may keep reading that JSON.
"""

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

import msgspec

from shared.errors import UndeliverableRequestError

Mode = Literal["form", "url"]


class FormParams(msgspec.Struct, frozen=True, tag="form", tag_field="mode", rename="camel"):
    mode: ClassVar[Literal["form"]] = "form"
    message: str
    requested_schema: dict[str, Any]  # checked against MCP's subset by shared/schema.py, not here


class UrlParams(msgspec.Struct, frozen=True, tag="url", tag_field="mode", rename="camel"):
    mode: ClassVar[Literal["url"]] = "url"
    message: str
    url: str
    elicitation_id: str | None = None  # a program's question has none: nothing reports it completed


ElicitParams = FormParams | UrlParams

# By mode rather than a tagged union: converting to one Struct is ~7x cheaper (relayed requests).
_BY_MODE: Final[dict[str, type[ElicitParams]]] = {"form": FormParams, "url": UrlParams}


def mode_of(params: Mapping[str, Any]) -> object:
    """The params JSON's `mode` (MCP: a missing one means form), whatever its type."""
    return params.get("mode", "form")


def read_params(params: Mapping[str, Any]) -> ElicitParams:
    """The typed params of a request's params JSON; UndeliverableRequestError (the caller answers
    -32602) when they are neither a form nor a URL request."""
    mode = mode_of(params)
    kind = _BY_MODE.get(mode) if isinstance(mode, str) else None
    if kind is None:
        raise UndeliverableRequestError(f"its mode {mode!r} is neither 'form' nor 'url'")
    try:
        return msgspec.convert({**params, "mode": mode}, kind)
    except msgspec.ValidationError as exc:
        raise UndeliverableRequestError(f"its params are not a {mode} request: {exc}") from None
