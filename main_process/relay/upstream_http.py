"""A relayed session's own connection to a `url` server: MCP streamable HTTP, as raw JSON-RPC.

`HttpUpstream` is `StdioUpstream`'s counterpart (upstream.py) for a server reached over HTTP. The
SDK's streamable-HTTP transport carries the messages (the session id, the SSE streams and their
resumption, redirects within the origin, the DELETE that ends a session) and nothing runs above it:
no ClientSession, no model layer. What the host writes is checked to be one JSON-RPC message and
posted as it is; what the server sends goes to `UpstreamEvents.on_message` as its JSON.

The HTTP headers an SDK session would set are derived from the messages themselves:

- once `initialize` is answered, `MCP-Protocol-Version` names the negotiated version on every
  later message (the spec's "subsequent requests"; the SDK's server decides SSE priming by it);
- a 2026-07-28 request (its `_meta` names the protocol version) carries `MCP-Protocol-Version`,
  `Mcp-Method`, `Mcp-Name` (params.name of tools/call and prompts/get, params.uri of
  resources/read) and, for a tools/call, the `Mcp-Param-*` headers its tool's `x-mcp-header`
  annotations ask for, as learned from this session's 2026-07-28 tools/list answers (as in the
  SDK's client: a tool never listed gets none).

A message that is not JSON-RPC never reaches the server: a request is answered with an error, a
response becomes an error for the server's request, anything else is dropped (logged). `on_closed`
comes once: on `close()`, or when the transport ends by itself (the server cannot be reached, it
answered HTTP 404 for the session, sign-in failed), with a sentence naming the cause.
"""

import asyncio
import logging
import re
from contextlib import AsyncExitStack
from typing import Any, Final
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
    find_invalid_x_mcp_header,
    mcp_param_headers,
    x_mcp_header_map,
)
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import (
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from pydantic import ValidationError

from main_process.config import HttpServerConfig
from main_process.relay.upstream import MAX_LINE_BYTES, UpstreamError, UpstreamEvents
from shared import jsonrpc

logger = logging.getLogger(__name__)

# The tasks extension (SEP-2663) names its task in `Mcp-Name` too, beside the SDK's own methods.
_TASK_NAME_KEYS = {"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}

_OUTBOX_HIGH: Final = 1000  # messages waiting to be posted before the host's input is held; let go below LOW
_OUTBOX_LOW: Final = 100
CLOSE_GRACE_S: Final = 5.0  # after close(), for the DELETE that ends the server's session
_MAX_WATCHED: Final = 256  # requests whose answers are read (initialize, tools/list), at most
_HEADER_TOKEN: Final = re.compile(r"[\x21-\x7e]+")  # a version or method sent as it is (the server compares)
_ParamMap = dict[tuple[str, ...], str]


class HttpUpstream:
    """One relayed session's connection to a streamable-HTTP server."""

    def __init__(self, config: HttpServerConfig, events: UpstreamEvents, auth: httpx2.Auth | None) -> None:
        self._config = config
        self._events = events
        self._auth = auth
        self._outbox: asyncio.Queue[SessionMessage] = asyncio.Queue()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._wake = asyncio.Event()  # closing, or the transport ended
        self._reading = asyncio.Event()  # clear while the host reads slower than the server writes
        self._reading.set()
        self._server_full = False  # over _OUTBOX_HIGH messages wait to be posted
        self._closed = False  # on_closed was called (or start failed): nothing more reaches the events
        self._closing: asyncio.Task[None] | None = None
        self._failure: str | None = None  # why it ended, as seen at the HTTP layer
        self._version: str | None = None  # negotiated by `initialize`
        self._initializing: dict[RequestId, bool] = {}  # initialize at the server
        self._listing: dict[RequestId, bool] = {}  # 2026-07-28 tools/list at the server -> first page
        self._param_maps: dict[str, _ParamMap] = {}  # tool -> its x-mcp-header arguments
        self._task = asyncio.ensure_future(self._run())

    @classmethod
    async def start(cls, config: HttpServerConfig, events: UpstreamEvents,
                    auth: httpx2.Auth | None = None) -> "HttpUpstream":
        """Open the transport (no request yet: the host's first message is); raises UpstreamError
        saying why it could not."""
        upstream = cls(config, events, auth)
        try:
            await asyncio.shield(upstream._ready)
        except asyncio.CancelledError:
            upstream._closed = True
            upstream.close()
            raise
        return upstream

    @property
    def url(self) -> str:
        return _where(self._config.url)

    # ---- host -> server ----------------------------------------------------------------

    def send(self, raw: bytes, headers: dict[str, str] | None = None) -> None:
        """One message for the server; `headers`: the host's own HTTP routing headers for it, sent
        as the host sent them (what is derived from the message fills in what the host left out)."""
        if self._closing is not None or self._closed:
            return
        if jsonrpc.is_batch(raw):  # streamable HTTP takes one message per POST
            items = jsonrpc.split_batch(raw)
            if not items:
                logger.info("%s: dropped a batch that is not a JSON array of messages", self._config.name)
                return
            for item in items:
                self._send_one(item, None)
            return
        self._send_one(raw, headers)

    def _send_one(self, raw: bytes, host_headers: dict[str, str] | None) -> None:
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(raw)
        except ValidationError as exc:
            self._refuse(raw, exc)
            return
        headers = self._headers(message)
        if host_headers:  # the host's own win; names compared case-blind, so none goes twice
            given = {name.lower() for name in host_headers}
            headers = {**{k: v for k, v in (headers or {}).items() if k.lower() not in given}, **host_headers}
        metadata = ClientMessageMetadata(headers=headers) if headers else None
        self._outbox.put_nowait(SessionMessage(message, metadata=metadata))
        if self._outbox.qsize() > _OUTBOX_HIGH:
            self._outbox_changed()

    def _refuse(self, raw: bytes, exc: ValidationError) -> None:
        envelope = jsonrpc.peek(raw)
        request_id = envelope.id
        problem = _first_error(exc)
        if envelope.kind == "request" and isinstance(request_id, (int, str)):
            why = f"Elicitron did not pass this request to the server: it is not valid JSON-RPC ({problem})"
            answer = jsonrpc.error_response(request_id, jsonrpc.INVALID_REQUEST, why)
            asyncio.get_running_loop().call_soon(self._deliver, answer)
        elif envelope.kind == "response" and isinstance(request_id, (int, str)):
            # The server's request would wait forever: it gets an error in place of the answer.
            error = mcp_types.ErrorData(code=jsonrpc.INTERNAL_ERROR,
                                        message=f"the client's response was not valid JSON-RPC ({problem})")
            self._outbox.put_nowait(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error),
                                                   metadata=self._plain_metadata()))
        else:
            logger.info("%s: dropped a message from the host that is not JSON-RPC (%s)", self._config.name, problem)

    def _headers(self, message: JSONRPCMessage) -> dict[str, str] | None:
        if isinstance(message, JSONRPCRequest):
            params = message.params or {}
            meta = params.get("_meta")
            version = meta.get(mcp_types.PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
            if isinstance(version, str):
                return self._modern_headers(message, params, version)
            if message.method == "initialize":
                self._version = None  # negotiated again; its own POST carries no version
                self._watch(self._initializing, message.id)
                return None
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = (message.params or {}).get("requestId")
            if isinstance(cancelled, (int, str)):  # its answer may never come
                self._listing.pop(cancelled, None)
                self._initializing.pop(cancelled, None)
        return self._plain_headers()

    def _plain_headers(self) -> dict[str, str] | None:
        return {MCP_PROTOCOL_VERSION_HEADER: self._version} if self._version is not None else None

    def _plain_metadata(self) -> ClientMessageMetadata | None:
        headers = self._plain_headers()
        return ClientMessageMetadata(headers=headers) if headers else None

    def _modern_headers(self, message: JSONRPCRequest, params: dict[str, Any], version: str) -> dict[str, str]:
        """What a 2026-07-28 request carries in HTTP headers too (the server checks they agree)."""
        method = message.method
        headers: dict[str, str] = {}
        if _HEADER_TOKEN.fullmatch(version):  # else the server refuses it (-32020): an answer, not a crash
            headers[MCP_PROTOCOL_VERSION_HEADER] = version
        if _HEADER_TOKEN.fullmatch(method):
            headers[MCP_METHOD_HEADER] = method
        key = NAME_BEARING_METHODS.get(method) or _TASK_NAME_KEYS.get(method)
        name = params.get(key) if key is not None else None
        if isinstance(name, str):
            headers[MCP_NAME_HEADER] = encode_header_value(name)
        if method == "tools/call" and isinstance(name, str):
            header_map = self._param_maps.get(name)
            arguments = params.get("arguments")
            if header_map and isinstance(arguments, dict):
                headers.update(mcp_param_headers(header_map, arguments))
        elif method == "tools/list":
            self._watch(self._listing, message.id, params.get("cursor") is None)
        return headers

    @staticmethod
    def _watch(watched: dict[RequestId, bool], request_id: RequestId, value: bool = True) -> None:
        if len(watched) >= _MAX_WATCHED:  # answers that never came
            del watched[next(iter(watched))]
        watched[request_id] = value

    # ---- server -> host ----------------------------------------------------------------

    def _observe(self, message: JSONRPCResponse | JSONRPCError) -> None:
        """Read the answers the headers depend on: the negotiated version, the tools' x-mcp-header."""
        request_id = message.id
        if request_id is None:
            return
        if self._initializing.pop(request_id, None) is not None:
            version = message.result.get("protocolVersion") if isinstance(message, JSONRPCResponse) else None
            if isinstance(version, str) and _HEADER_TOKEN.fullmatch(version):
                self._version = version
        first = self._listing.pop(request_id, None)
        if first is not None and isinstance(message, JSONRPCResponse):
            self._learn_tools(message.result, complete=first and message.result.get("nextCursor") is None)

    def _learn_tools(self, result: dict[str, Any], *, complete: bool) -> None:
        tools = result.get("tools")
        if not isinstance(tools, list):
            return
        names: set[str] = set()
        for tool in tools:
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str):
                continue
            names.add(name)
            schema = tool.get("inputSchema")
            header_map = x_mcp_header_map(schema) if find_invalid_x_mcp_header(schema) is None else None
            if header_map:
                self._param_maps[name] = header_map
            else:  # none, or invalid (the SDK's client drops such a tool; the host decides here)
                self._param_maps.pop(name, None)
        if complete:
            self._param_maps = {name: m for name, m in self._param_maps.items() if name in names}

    def _deliver(self, raw: bytes) -> None:
        if not self._closed:
            self._events.on_message(raw)

    # ---- the transport's life ----------------------------------------------------------

    async def _run(self) -> None:
        try:
            cause = await self._connection()
        except Exception as exc:  # whatever ended the transport becomes the sentence
            logger.debug("%s: the transport ended", self._config.name, exc_info=True)
            cause = _describe(exc, self.url)
        except asyncio.CancelledError:
            if not self._ready.done():
                self._ready.cancel()
            raise
        why = self._failure or cause
        if not self._ready.done():
            self._closed = True
            self._ready.set_exception(UpstreamError(f"could not open a session with server "
                                                    f"{self._config.name!r} at {self.url}: {why}"))
            return
        self._fail(why)

    async def _connection(self) -> str:
        config = self._config
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                create_mcp_http_client(headers=config.headers or None, auth=self._auth))
            hooks = client.event_hooks
            client.event_hooks = {**hooks, "response": [*hooks.get("response", []), self._on_response]}
            read, write = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=client, max_sse_event_size=MAX_LINE_BYTES))
            self._ready.set_result(None)
            async with anyio.create_task_group() as group:
                group.start_soon(self._pump, write)
                group.start_soon(self._receive, read)
                await self._wake.wait()
                group.cancel_scope.cancel()
        # Leaving streamable_http_client sent the DELETE for a session. When we were not closing it
        # (on_closed said so then) and it ended without an exception, the transport's writer could
        # not post a notification or a response (a request's failure raises) and logged why.
        return f"a message could not be posted to {self.url} (the server may be gone; main's log has the error)"

    def pause_reading(self) -> None:
        """The host reads slower than the server writes: the server's next message waits."""
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def _outbox_changed(self) -> None:
        size = self._outbox.qsize()
        full = size > _OUTBOX_HIGH or (self._server_full and size > _OUTBOX_LOW)
        if full != self._server_full:
            self._server_full = full
            self._events.on_server_full(full)

    async def _pump(self, write: WriteStream[SessionMessage]) -> None:
        while True:
            message = await self._outbox.get()
            if self._server_full:
                self._outbox_changed()
            try:
                await write.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._wake.set()  # the transport's writer is gone
                return

    async def _receive(self, read: ReadStream[SessionMessage | Exception]) -> None:
        async for item in read:
            await self._reading.wait()
            if isinstance(item, Exception):  # the transport's word on something it could not read
                logger.info("%s: %s", self._config.name, _describe(item, self.url))
                continue
            message = item.message
            if isinstance(message, (JSONRPCResponse, JSONRPCError)):
                self._observe(message)
            self._deliver(message.model_dump_json(by_alias=True, exclude_unset=True).encode())
        self._wake.set()  # the transport closed its end

    async def _on_response(self, response: httpx2.Response) -> None:
        request = response.request
        status = response.status_code
        if request.method != "POST" or status < 400:
            return
        if status == 404 and MCP_SESSION_ID in request.headers:
            # The server ended the session (it restarted, or expired it): the spec's answer is a new
            # one, which the gateway opens by replaying the host's initialize.
            self._failure = "the server no longer knows this session (HTTP 404)"
            self._wake.set()
            return
        logger.info("%s: HTTP %d %s for a message posted to %s", self._config.name, status,
                    response.reason_phrase, self.url)

    def _fail(self, why: str) -> None:
        if not self._closed:
            self._closed = True
            self._events.on_closed(why)

    def close(self) -> "asyncio.Task[None]":
        """End the session (idempotent): the server gets its DELETE; the task ends once the
        transport is down."""
        if self._closing is None:
            self._fail("the session was closed")
            self._wake.set()
            self._closing = asyncio.ensure_future(self._stop())
        return self._closing

    async def _stop(self) -> None:
        done, _ = await asyncio.wait([self._task], timeout=CLOSE_GRACE_S)
        if not done:
            logger.info("%s: the session's end took over %.0f s; dropped", self._config.name, CLOSE_GRACE_S)
            self._task.cancel()
            await asyncio.wait([self._task], timeout=CLOSE_GRACE_S)


def _where(url: str) -> str:
    """The URL for a message: no credentials, query or fragment (they may hold secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}{parts.path}"


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    if not errors:
        return "not a JSON-RPC message"
    # The adapter tried each message kind in turn; the first complaint ("JSONRPCRequest.params:
    # Input should be an object") is as telling as any.
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first.get('msg', '')}" if where else str(first.get("msg", ""))


def _describe(exc: BaseException, url: str) -> str:
    """One sentence for how the transport ended, unwrapping the exception groups anyio makes."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx2.HTTPStatusError):
        response = exc.response
        return f"the server answered HTTP {response.status_code} {response.reason_phrase}".rstrip()
    if isinstance(exc, httpx2.ConnectError):
        return f"could not connect to {url} ({text})"
    if isinstance(exc, httpx2.TimeoutException):
        return f"the server at {url} did not answer in time ({type(exc).__name__})"
    if isinstance(exc, httpx2.TransportError):
        return f"the connection to {url} failed ({type(exc).__name__}: {text})"
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
