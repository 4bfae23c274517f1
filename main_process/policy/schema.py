"""The Cedar schema every policy file is validated against, and the request a call becomes.

A tool's arguments are whatever its inputSchema says, unknown when the files load: Cedar's schema
has no open records, so `arguments` is declared per policy set from how the policies use it
(arguments.py); everything else (`context.argumnets`, `resource.nmae`) is checked as written.
"""

import json
import math
import time
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
    return request_entities(("Host", host), server, tool)


def request_entities(principal: tuple[str, str], server: str, tool: str | None) -> str:
    """The entities of a request by `principal` (a Host or an Asker) about `server`, or about its
    `tool` (which is `in` the server), as Cedar JSON."""
    return json.dumps([
        {"uid": {"type": kind, "id": name}, "attrs": attrs,
         "parents": [{"type": "Server", "id": server}] if kind == "Tool" else []}
        for (kind, name), attrs in attributes(principal, server, tool).items()])


def attributes(principal: tuple[str, str], server: str, tool: str | None) -> dict[tuple[str, str], dict[str, str]]:
    """Each entity of such a request and its attributes."""
    found = {principal: {"name": principal[1]}, ("Server", server): {"name": server}}
    if tool is not None:
        found[("Tool", f"{server}/{tool}")] = {"name": tool, "server": server}
    return found


def hints(annotations: dict[str, Any] | None) -> dict[str, bool]:
    """A tool's four hints as the context has them: what it says, MCP's defaults elsewhere."""
    found = dict(_HINT_DEFAULTS)
    for name, value in (annotations or {}).items():
        if name in found and isinstance(value, bool):
            found[name] = value
    return found


def time_value(now: float | None) -> dict[str, Any]:
    """The context's `time`: `now` (else the clock) as a Cedar datetime."""
    return {"__extn": {"fn": "datetime", "arg": time_text(millis(now))}}


def millis(now: float | None) -> int:
    """`now` (else the clock) in whole milliseconds since the epoch."""
    return math.floor((time.time() if now is None else now) * 1000)


def time_text(ms: int) -> str:
    """A time in milliseconds since the epoch as Cedar's datetime reads it (milliseconds at most)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def call_request(host: str, server: str, tool: str, arguments: dict[str, Any],
                 annotations: dict[str, Any] | None, now: float | None = None) -> dict[str, Any]:
    """A call as one whole Cedar request (what `elicitron policy test` and the fast path's test
    ask cedarpy; main sends only what the policies read: engine.py)."""
    return {"principal": {"type": "Host", "id": host}, "action": {"type": "Action", "id": "callTool"},
            "resource": {"type": "Tool", "id": f"{server}/{tool}"},
            "context": {"arguments": cedar_value(arguments), "annotations": hints(annotations),
                        "time": time_value(now)}}


_ESCAPES: Final = ("__entity", "__extn", "__expr")  # keys Cedar's JSON reads as other than a record's


def sent(arguments: dict[str, Any], name: str) -> bool:
    """Whether `context.arguments has <name>` for these arguments (cedar_value leaves out the rest)."""
    return arguments.get(name) is not None and name not in _ESCAPES


def cedar_value(value: Any) -> Any:
    """JSON as Cedar reads it: no nulls (left out), no floats (Cedar has none: as text), and no object
    that Cedar's JSON would take for an entity or an extension value (its escape keys are dropped),
    so an agent's arguments can only ever be plain values."""
    if isinstance(value, dict):
        return {str(k): cedar_value(v) for k, v in value.items()
                if v is not None and k not in _ESCAPES}
    if isinstance(value, list):
        return [cedar_value(v) for v in value if v is not None]
    if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)
                                     and not _LONG_MIN <= value <= _LONG_MAX):
        return repr(value)
    return value
