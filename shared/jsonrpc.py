"""A look at a JSON-RPC message without reading it: what a relay needs to decide, and nothing else.

Relayed MCP sessions (extension `msgMcpRelay`) pass the JSON text a host or a server wrote as it
is. The few messages where consent is decided (a `tools/call`, a server's `elicitation/create`,
the host's `initialize`) are recognised by `peek`, which decodes only the envelope: `method`, `id`,
and the raw bytes of `params`, `result` and `error` (skipped, not parsed). Helpers here also build
the few messages a relay writes itself (a response to a request it answered, a cancellation).
"""

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
