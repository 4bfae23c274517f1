"""The Cedar schema every policy file is validated against, and the request a call becomes.

A tool's arguments are whatever its inputSchema says, unknown when the files load: Cedar's schema
has no open records, so `arguments` is declared per policy set from how the policies use it
(arguments.py); everything else (`context.argumnets`, `resource.nmae`) is checked as written.
"""

import json
import time
from datetime import UTC, datetime
from typing import Any, Final

# ARGUMENTS: the record arguments.py declares for the policies being validated.
SCHEMA: Final = """
entity Host = { name: String };
entity Asker = { name: String };
entity Server = { name: String };
entity Tool in [Server] = { name: String, server: String };
type Annotations = {
  readOnlyHint: Bool, destructiveHint: Bool, idempotentHint: Bool, openWorldHint: Bool,
};
type CallContext = { arguments: ARGUMENTS, annotations: Annotations, time: datetime };
action callTool appliesTo { principal: [Host], resource: [Tool], context: CallContext };
action elicit appliesTo { principal: [Host, Asker], resource: [Server], context: CallContext };
"""

# MCP's defaults for a tool's hints (a server that says nothing may destroy and reach out).
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1  # Cedar's Long

_HINT_DEFAULTS: Final = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                         "openWorldHint": True}


def entities(host: str, server: str, tool: str) -> str:
    """The request's entities as Cedar JSON: the host, the server, the tool in the server."""
    return json.dumps([
        {"uid": {"type": "Host", "id": host}, "attrs": {"name": host}, "parents": []},
        {"uid": {"type": "Server", "id": server}, "attrs": {"name": server}, "parents": []},
        {"uid": {"type": "Tool", "id": f"{server}/{tool}"}, "attrs": {"name": tool, "server": server},
         "parents": [{"type": "Server", "id": server}]},
    ])


def call_request(host: str, server: str, tool: str, arguments: dict[str, Any],
                 annotations: dict[str, Any] | None, now: float | None = None) -> dict[str, Any]:
    hints = dict(_HINT_DEFAULTS)
    for name, value in (annotations or {}).items():
        if name in hints and isinstance(value, bool):
            hints[name] = value
    at = datetime.fromtimestamp(time.time() if now is None else now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    at = at[:-4] + "Z"  # Cedar's datetime takes milliseconds at most
    return {"principal": {"type": "Host", "id": host}, "action": {"type": "Action", "id": "callTool"},
            "resource": {"type": "Tool", "id": f"{server}/{tool}"},
            "context": {"arguments": cedar_value(arguments), "annotations": hints,
                        "time": {"__extn": {"fn": "datetime", "arg": at}}}}


def cedar_value(value: Any) -> Any:
    """JSON as Cedar reads it: no nulls (left out), no floats (Cedar has none: as text), and no object
    that Cedar's JSON would take for an entity or an extension value (its escape keys are dropped),
    so an agent's arguments can only ever be plain values."""
    if isinstance(value, dict):
        return {str(k): cedar_value(v) for k, v in value.items()
                if v is not None and k not in ("__entity", "__extn", "__expr")}
    if isinstance(value, list):
        return [cedar_value(v) for v in value if v is not None]
    if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)
                                     and not _LONG_MIN <= value <= _LONG_MAX):
        return repr(value)
    return value
