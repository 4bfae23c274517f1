"""A look at a JSON-RPC message without reading it: what a relay needs to decide, and nothing else.

Relayed MCP sessions (extension `msgMcpRelay`) pass the JSON text a host or a server wrote as it
is. The few messages where consent is decided (a `tools/call`, a server's `elicitation/create`,
the host's `initialize`) are recognised by `peek`, which decodes only the envelope: `method`, `id`,
and the raw bytes of `params`, `result` and `error` (skipped, not parsed). Helpers here also build
the few messages a relay writes itself (a response to a request it answered, a cancellation).
"""

import json
from typing import Any, Final, Literal

import msgspec

Id = int | str
Kind = Literal["request", "notification", "response", "other"]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603


class Envelope(msgspec.Struct):
    """The top level of one JSON-RPC message; the payloads stay undecoded."""

    method: str | msgspec.UnsetType = msgspec.UNSET
    id: Id | None | msgspec.UnsetType = msgspec.UNSET
    params: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET

    @property
    def kind(self) -> Kind:
        if isinstance(self.method, str):
            return "notification" if self.id is msgspec.UNSET else "request"
        if self.result is not msgspec.UNSET or self.error is not msgspec.UNSET:
            return "response"
        return "other"

    def params_dict(self) -> dict[str, Any]:
        """The params as JSON values ({} when absent or not an object)."""
        return _object(self.params)

    def result_dict(self) -> dict[str, Any]:
        return _object(self.result)

    def error_dict(self) -> dict[str, Any]:
        return _object(self.error)


def _object(raw: msgspec.Raw | msgspec.UnsetType) -> dict[str, Any]:
    """Raises msgspec.DecodeError when the value is not strict JSON (`peek` skips it unread)."""
    if isinstance(raw, msgspec.Raw):
        value = msgspec.json.decode(raw)
        if isinstance(value, dict):
            return value
    return {}


_ENVELOPE = msgspec.json.Decoder(Envelope)
_BATCH = msgspec.json.Decoder(list[msgspec.Raw])
_encoder = msgspec.json.Encoder()
NOT_JSON_RPC: Final = Envelope()
_SPACE: Final = (b" ", b"\t", b"\r", b"\n")  # what `peek` says of bytes it cannot read as one message


def peek(raw: bytes) -> Envelope:
    """The envelope of one message; NOT_JSON_RPC (kind "other") for anything else, which a relay
    passes on for the other side to judge, as it would have without us in between."""
    try:
        return _ENVELOPE.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return NOT_JSON_RPC


def readable(envelope: Envelope) -> bool:
    """False for what `peek` could not read as one message: strict JSON (RFC 8259: no NaN or
    Infinity, UTF-8) whose `method` is a string and whose `id` is an integer or a string. Servers'
    own parsers are laxer (pydantic takes NaN, `JSON.parse` a float id), so such a message is
    never passed on where consent is decided: the other side could read a request we did not."""
    return envelope is not NOT_JSON_RPC


def unreadable_error(raw: bytes) -> tuple[Id | None, bool, int, str]:
    """For a message `peek` could not read: (the id a lax reader finds in it, whether it is a
    request, the JSON-RPC code, why). The id lets the sender match our error to what it sent."""
    try:
        msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        code, why = PARSE_ERROR, f"Parse error: not strict JSON ({exc})"
    else:
        code, why = INVALID_REQUEST, "Invalid Request: not a JSON-RPC message (the id must be an integer or a string, the method a string)"
    try:
        message = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None, False, code, why
    if not isinstance(message, dict):
        return None, False, code, why
    request_id = message.get("id")
    if isinstance(request_id, float) and request_id.is_integer():
        request_id = int(request_id)  # `7.0` is the host's 7 (JSON.parse reads both as one number)
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
        request_id = None
    return request_id, "method" in message and "id" in message, code, why


def strict_object(raw: bytes) -> dict[str, Any]:
    """A JSON object's values ({} when it is not an object). Raises msgspec.DecodeError (or
    RecursionError) for what is not strict JSON, such as a number out of range, which `peek`
    skips over unread."""
    value = msgspec.json.decode(raw)
    return value if isinstance(value, dict) else {}


def is_batch(raw: bytes) -> bool:
    first = raw[:1]
    if first in _SPACE:  # rare: only then look past leading whitespace (copying the message)
        first = raw.lstrip()[:1]
    return first == b"["


def split_batch(raw: bytes) -> list[bytes] | None:
    """The messages of a JSON array (a batch), each as its own bytes; None if it is not one."""
    try:
        return [bytes(item) for item in _BATCH.decode(raw)]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def with_id(raw: bytes, request_id: Id) -> bytes:
    """The same message under another id."""
    message = msgspec.json.decode(raw)
    message["id"] = request_id
    return _encoder.encode(message)


def one_line(raw: bytes) -> bytes:
    """`raw` without line breaks (stdio frames a message per line; JSON allows them between
    tokens, and inside strings they are always escaped)."""
    if b"\n" not in raw and b"\r" not in raw:
        return raw
    try:
        return _encoder.encode(msgspec.json.decode(raw))
    except (msgspec.DecodeError, RecursionError):
        return raw.replace(b"\r", b" ").replace(b"\n", b" ")  # not JSON: the reader will say so


def encode(message: dict[str, Any]) -> bytes:
    return _encoder.encode(message)


def response(request_id: Id | None, result: dict[str, Any]) -> bytes:
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_response(request_id: Id | None, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "error": error})


def notification(method: str, params: dict[str, Any]) -> bytes:
    return _encoder.encode({"jsonrpc": "2.0", "method": method, "params": params})


def request(request_id: Id, method: str, params: dict[str, Any]) -> bytes:
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
