"""The JSON-RPC pieces the merged session writes itself (pure): a cancellation, a request with
other params, the host's headers for one server, the shape of its own results, a server's error
passed on."""

from collections.abc import Iterable
from typing import Any, Final

import msgspec

from main_process.relay.merge.records import Headers, Id
from main_process.relay.merge.versions import server_info
from shared import jsonrpc
from shared.errors import RpcCode
from shared.merged_names import Exposure

SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"


def cancelled(request_id: Id, reason: object) -> bytes:
    params: dict[str, Any] = {"requestId": request_id}
    if isinstance(reason, str):
        params["reason"] = reason
    return jsonrpc.notification("notifications/cancelled", params)


def with_params(raw: bytes, params: dict[str, Any]) -> bytes:
    message = msgspec.json.decode(raw)
    message["params"] = params
    return jsonrpc.encode(message)


def unnamed(headers: Headers) -> Headers:
    """The host's HTTP routing headers without its `Mcp-Name` (the public name): a server over HTTP
    gets the one its own name makes (main_process/relay/upstream_http.py derives it from the message)."""
    if not headers:
        return headers
    return {key: value for key, value in headers.items() if key.lower() != "mcp-name"}


def hashable(value: object) -> object:
    return value if isinstance(value, (int, str)) else repr(value)


def shaped(result: dict[str, Any], modern: bool) -> dict[str, Any]:
    """A result the merger writes itself; 2026-07-28 results say `resultType` and who answers."""
    if not modern:
        return result
    meta = result.get("_meta")
    return {**result, "resultType": result.get("resultType", "complete"),
            "_meta": {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_KEY: server_info(Exposure())}}


def cache_fields(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A merged 2026-07-28 answer is cacheable as long as its least cacheable part."""
    ttls: list[int] = []
    public = True
    for result in results:
        ttl = result.get("ttlMs")
        ttls.append(ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl >= 0 else 0)
        public = public and result.get("cacheScope") == "public"
    return {"ttlMs": min(ttls, default=0), "cacheScope": "public" if public and ttls else "private"}


def error_answer(host_id: Id, error: dict[str, Any]) -> bytes:
    """A server's error, as the host gets it for its request."""
    code = error.get("code")
    message = error.get("message")
    return jsonrpc.error_response(host_id, code if isinstance(code, int) else RpcCode.INTERNAL_ERROR,
                                  message if isinstance(message, str) else "the server failed",
                                  error.get("data"))
