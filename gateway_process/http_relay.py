"""`/mcp/<server>` of main's `--mcp-http` child: each host's own session with that server, relayed
(and `/mcp`: each host's session with every server at once, merged by main, names `<server>__<name>`).

The host speaks streamable HTTP here as it would to the server; main opens the host's own
connection to the server and relays every message (main_process/relay/relay.py), so protocol version,
capabilities, serverInfo, errors and every feature are the server's. This module only moves
messages between HTTP and the relay:

- Handshake era (no `MCP-Protocol-Version: 2026-07-28`): one relayed session per MCP session, on a
  peer of main the sessions of that host share (`http_peers.py`); sessions are capped per host and
  in all (`http_sessions.py`). The SDK's `StreamableHTTPServerTransport` does the HTTP side (session
  ids, one SSE stream per POST, the GET stream, DELETE). A message the server sends its host on
  its own (a request, a log line, progress) goes on the stream of the request it belongs to:
  progress by its token; anything else on the GET stream when the host has one open, else on the
  stream of the host's newest request still open.
- 2026-07-28: no MCP session. Every POST is one request, answered as JSON, or as an SSE stream once
  the server sends something for it first (progress, a log line, a subscription's notification);
  the requests of one client (its `clientInfo` name) share one relayed session. A host closing the
  POST cancels its request at the server. Notifications are accepted (202); GET is 405.
"""

import asyncio
import json
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamableHTTPServerTransport,
    StreamId,
    check_accept_headers,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    decode_header_value,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types.jsonrpc import HEADER_MISMATCH, METHOD_NOT_FOUND
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from gateway_process.http_peers import PeerPool
from gateway_process.http_sessions import SessionBudget
from gateway_process.relayed import RelayedSession
from shared import jsonrpc
from shared.errors import RpcCode
from shared.messages import EVERY_SERVER

logger = logging.getLogger(__name__)

_TASK_NAME_KEYS = {"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}  # SEP-2663
_MAX_SCHEMAS = 10_000
MAX_HOST_NAME = 200
MAX_BODY_BYTES = 4 << 20
REPLAY_EVENTS = 1000  # per handshake-era session, for hosts that resume a broken stream
RETRY_MS = 1000  # the SSE `retry` a host is told to wait before it reconnects
_SESSION_HEADER = "mcp-session-id"
_PROTOCOL_HEADER = "mcp-protocol-version"
_PROGRESS = "notifications/progress"
_SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"


def _relayed(pool: PeerPool, host: str, server: str | None, to_host: Any) -> RelayedSession:
    """One host's session with `server`, or with every server at once (`/mcp`: server None, merged
    in main), on a peer of main that host's sessions share."""
    return RelayedSession(pool.share(host, server), server if server is not None else EVERY_SERVER, to_host)


def _host_name(info: object) -> str:
    """A `clientInfo`'s title or name, as main names the host's peer (sessions of one name share it)."""
    if not isinstance(info, dict):
        return "MCP host"
    return str(info.get("title") or info.get("name") or "MCP host")[:MAX_HOST_NAME]


def _meta(envelope: jsonrpc.Envelope) -> dict[str, Any]:
    meta = envelope.params_dict().get("_meta")
    return meta if isinstance(meta, dict) else {}


# ---- the handshake era: one MCP session, one relayed session ------------------------------------


class _Replay(EventStore):
    """Resumability (SSE event ids, priming events, `Last-Event-ID`), as an SDK server gives it: the
    last REPLAY_EVENTS events of one session, so a host whose stream broke gets what it missed."""

    def __init__(self) -> None:
        self._events: deque[tuple[StreamId, EventId, types.JSONRPCMessage | None]] = deque(maxlen=REPLAY_EVENTS)
        self._ids = count(1)

    async def store_event(self, stream_id: StreamId, message: types.JSONRPCMessage | None) -> EventId:
        event_id = f"{next(self._ids)}"
        self._events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        events = list(self._events)
        index = next((i for i, (_, event_id, _) in enumerate(events) if event_id == last_event_id), None)
        if index is None:
            return None
        stream = events[index][0]
        for stream_id, event_id, message in events[index + 1:]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


class _LegacySession:
    def __init__(self, pool: PeerPool, host: str, server: str | None, security: TransportSecuritySettings) -> None:
        self.transport = StreamableHTTPServerTransport(mcp_session_id=uuid.uuid4().hex, security_settings=security,
                                                       event_store=_Replay(), retry_interval=RETRY_MS)
        self.host = host
        self.relayed = _relayed(pool, host, server, self._to_host)
        self.on_end: Any = None  # its RelayedServer's, to end it for room
        self.last_used = time.monotonic()
        self.get_streams = 0
        self._open: dict[jsonrpc.Id, object] = {}  # host requests at the server -> their progress token
        self._out: asyncio.Queue[SessionMessage] = asyncio.Queue()
        self._closed = False

    @property
    def session_id(self) -> str:
        assert self.transport.mcp_session_id is not None
        return self.transport.mcp_session_id

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Until the host ends the session (DELETE) or it is closed here."""
        async with self.transport.connect() as (read, write), anyio.create_task_group() as group:
            group.start_soon(self._write, write)
            task_status.started()
            try:
                async for item in read:
                    if isinstance(item, Exception):
                        continue  # the transport answered the host already
                    self._from_host(item)
            except (anyio.ClosedResourceError, anyio.EndOfStream):
                pass  # the transport closed its end: the session is over
            group.cancel_scope.cancel()

    def _from_host(self, item: SessionMessage) -> None:
        message = item.message
        raw = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        if isinstance(message, types.JSONRPCRequest):
            meta = (message.params or {}).get("_meta")
            self._open[message.id] = meta.get("progressToken") if isinstance(meta, dict) else None
        self.last_used = time.monotonic()
        self.relayed.from_host(raw)

    async def _write(self, write: Any) -> None:
        try:
            while True:
                await write.send(await self._out.get())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the session ended under us: nothing more reaches this host

    def _to_host(self, raw: bytes) -> None:
        try:
            message = types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
        except ValidationError as exc:
            logger.warning("dropped a message for the host that is not JSON-RPC: %s", exc.errors()[:1])
            return
        related: jsonrpc.Id | None = None
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._open.pop(message.id, None)  # type: ignore[arg-type]
        else:
            related = self._stream_for(message)
        metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
        self._out.put_nowait(SessionMessage(message, metadata=metadata))

    def _stream_for(self, message: types.JSONRPCRequest | types.JSONRPCNotification) -> jsonrpc.Id | None:
        """The host request whose SSE stream a message of the server's own goes on (None: GET)."""
        params = message.params or {}
        if message.method == _PROGRESS:
            token = params.get("progressToken")
            for request_id, progress in self._open.items():
                if progress is not None and progress == token:
                    return request_id
        if self.get_streams or not self._open:
            return None
        return next(reversed(self._open))

    def busy(self) -> bool:
        return bool(self.get_streams or self._open)

    def end(self) -> None:
        if self.on_end is not None:
            self.on_end(self)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.relayed.close()
            if not self.transport.is_terminated:  # its HTTP side ends too: the host's next request hears 404
                asyncio.ensure_future(self.transport.terminate())


# ---- 2026-07-28: a POST per request -------------------------------------------------------------


@dataclass(eq=False)
class _Post:
    """One 2026-07-28 POST waiting on the server."""

    host_id: jsonrpc.Id
    progress: object
    listing: bool = False  # a tools/list: its tools' schemas are kept for the Mcp-Param checks
    events: "asyncio.Queue[bytes]" = field(default_factory=asyncio.Queue)


class _ModernClient:
    """The relayed session of one 2026-07-28 client (by clientInfo name)."""

    def __init__(self, pool: PeerPool, host: str, server: str | None, schemas: dict[str, Any]) -> None:
        self.host = host
        self.relayed = _relayed(pool, host, server, self._to_host)
        self.on_end: Any = None  # its RelayedServer's, to end it for room
        self.posts: dict[jsonrpc.Id, _Post] = {}  # by the id the server sees
        self.last_used = time.monotonic()
        self._ids = count()
        self._schemas = schemas  # tools' inputSchemas, from the listings that pass (Mcp-Param checks)

    def open(self, envelope: jsonrpc.Envelope, raw: bytes, headers: dict[str, str]) -> tuple[jsonrpc.Id, _Post]:
        host_id = envelope.id
        assert isinstance(host_id, (int, str))
        upstream_id: jsonrpc.Id = host_id
        if host_id in self.posts:  # two POSTs with one id (two clients of one name): keep them apart
            upstream_id = f"elicitron-{next(self._ids)}"
            message = jsonrpc.peek(raw)
            raw = jsonrpc.request(upstream_id, str(message.method), message.params_dict())
        post = _Post(host_id, _meta(envelope).get("progressToken"), listing=envelope.method == "tools/list")
        self.posts[upstream_id] = post
        self.last_used = time.monotonic()
        self.relayed.from_host(raw, headers)
        return upstream_id, post

    def cancel(self, upstream_id: jsonrpc.Id) -> None:
        """The host closed its POST: the request is cancelled at the server."""
        if self.posts.pop(upstream_id, None) is not None:
            self.relayed.from_host(jsonrpc.notification("notifications/cancelled", {
                "requestId": upstream_id, "reason": "the client closed the request"}))

    def _to_host(self, raw: bytes) -> None:
        envelope = jsonrpc.peek(raw)
        if envelope.kind == "response" and isinstance(envelope.id, (int, str)):
            post = self.posts.pop(envelope.id, None)
            if post is not None:
                if post.listing:
                    self._learn(envelope)
                post.events.put_nowait(raw if post.host_id == envelope.id else jsonrpc.with_id(raw, post.host_id))
            return
        post = self._post_for(envelope)
        if post is not None:
            post.events.put_nowait(raw)
        else:
            logger.debug("a message of the server's own with no request to go with: %s", envelope.method)

    def _learn(self, envelope: jsonrpc.Envelope) -> None:
        tools = envelope.result_dict().get("tools")
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                self._schemas[tool["name"]] = tool.get("inputSchema")
        if len(self._schemas) > _MAX_SCHEMAS:
            self._schemas.clear()  # a server renaming tools forever: start over

    def _post_for(self, envelope: jsonrpc.Envelope) -> _Post | None:
        meta = _meta(envelope)
        params = envelope.params_dict()
        subscription = meta.get(_SUBSCRIPTION_KEY)
        if subscription in self.posts:
            return self.posts[subscription]
        if envelope.method == _PROGRESS:
            token = params.get("progressToken")
            return next((post for post in self.posts.values() if post.progress is not None and post.progress == token),
                        None)
        return next(reversed(self.posts.values())) if len(self.posts) == 1 else None

    def busy(self) -> bool:
        return bool(self.posts)

    def end(self) -> None:
        if self.on_end is not None:
            self.on_end(self)

    def close(self) -> None:
        self.relayed.close()


# ---- one /mcp/<server> ---------------------------------------------------------------------------


class RelayedServer:
    """Every host of one server path (`server` None: `/mcp`, every server at once)."""

    def __init__(self, pool: PeerPool, budget: SessionBudget, server: str | None,
                 security: TransportSecuritySettings, group: anyio.abc.TaskGroup) -> None:
        self._pool = pool
        self._budget = budget
        self.server = server
        self._security = security
        self._group = group
        self.sessions: dict[str, _LegacySession] = {}
        self.clients: dict[str, _ModernClient] = {}
        self.schemas: dict[str, Any] = {}  # tool name -> inputSchema, as the server last listed it

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        session_id = request.headers.get(_SESSION_HEADER)
        if session_id is not None:
            session = self.sessions.get(session_id)
            if session is None:
                await _json_error(404, "Session not found")(scope, receive, send)
                return
            await self._legacy(session, request, scope, receive, send)
            return
        version = request.headers.get(_PROTOCOL_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:  # as the SDK routes eras
            await self._modern(request, scope, send)
            return
        if request.method != "POST":
            await _json_error(400, "Bad Request: Missing session ID")(scope, receive, send)
            return
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            await _json_error(413, f"request is over {MAX_BODY_BYTES:,} bytes")(scope, receive, send)
            return
        envelope = jsonrpc.peek(body)
        if envelope.kind != "request" or envelope.method != "initialize":  # no session to open: nothing is kept
            await _json_error(400, "Bad Request: Missing session ID")(scope, receive, send)
            return
        host = _host_name(envelope.params_dict().get("clientInfo"))
        refusal = self._budget.refusal(host)
        if refusal is not None:
            logger.warning("refused a new MCP session of %r: %s", host[:80], refusal)
            request_id = envelope.id if isinstance(envelope.id, (int, str)) else None
            await _raw_json(503, jsonrpc.error_response(request_id, RpcCode.SERVER_ERROR, refusal), send)
            return
        session = _LegacySession(self._pool, host, self.server, self._security)
        session.on_end = self._end
        self.sessions[session.session_id] = session
        self._budget.add(session)
        await self._group.start(self._run_session, session)
        await self._legacy(session, request, scope, _replaying(body, receive), send)

    async def _run_session(self, session: _LegacySession, *,
                           task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            await session.run(task_status=task_status)
        # top-level handler of one host's session: it ends, the gateway and its other hosts go on
        except Exception:
            logger.exception("MCP session %s failed", session.session_id[:8])
        finally:
            self._end(session)

    async def _legacy(self, session: _LegacySession, request: Request, scope: Scope, receive: Receive,
                      send: Send) -> None:
        session.last_used = time.monotonic()
        getting = request.method == "GET"
        session.get_streams += getting
        try:
            await session.transport.handle_request(scope, receive, send)
        finally:
            session.get_streams -= getting
        if session.transport.is_terminated:  # the host sent DELETE
            self._end(session)

    def _end(self, session: _LegacySession) -> None:
        if self.sessions.get(session.session_id) is session:
            del self.sessions[session.session_id]
        self._budget.release(session)
        session.close()

    def _end_client(self, client: "_ModernClient") -> None:
        if self.clients.get(client.host) is client:
            del self.clients[client.host]
        self._budget.release(client)
        client.close()

    # ---- 2026-07-28 -----------------------------------------------------------------------------

    async def _modern(self, request: Request, scope: Scope, send: Send) -> None:
        receive = request.receive
        if request.method != "POST":
            await Response(status_code=405, headers={"Allow": "POST"})(scope, receive, send)
            return
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            await Response(status_code=406)(scope, receive, send)
            return
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            await _json_error(413, f"request is over {MAX_BODY_BYTES:,} bytes")(scope, receive, send)
            return
        envelope = jsonrpc.peek(body)
        if envelope.kind == "other":
            parse = jsonrpc.split_batch(body) is None and _not_json(body)
            await _raw_json(400, jsonrpc.error_response(
                None, jsonrpc.PARSE_ERROR if parse else jsonrpc.INVALID_REQUEST,
                "Parse error" if parse else "Invalid Request: not one JSON-RPC request"), send)
            return
        if envelope.kind == "notification":  # nothing in 2026-07-28 asks the server to act on one
            await Response(status_code=202)(scope, receive, send)
            return
        if envelope.kind != "request" or not isinstance(envelope.id, (int, str)):
            await _raw_json(400, jsonrpc.error_response(None, jsonrpc.INVALID_REQUEST,
                                                        "Invalid Request: a client does not post responses"), send)
            return
        rejection = self._ladder(request, envelope, body)
        if rejection is None and envelope.method == "initialize":
            # Not a 2026-07-28 method: what an HTTP server says of it, whatever the server's own transport.
            rejection = InboundLadderRejection(code=METHOD_NOT_FOUND, message="Method not found: initialize")
        if rejection is not None:
            await _raw_json(ERROR_CODE_HTTP_STATUS.get(rejection.code, 400), jsonrpc.error_response(
                envelope.id, rejection.code, rejection.message, rejection.data), send)
            return
        name = _host_name(_meta(envelope).get("io.modelcontextprotocol/clientInfo"))
        client = self.clients.get(name)
        if client is None:
            refusal = self._budget.refusal(name)
            if refusal is not None:
                logger.warning("refused a new MCP client %r: %s", name[:80], refusal)
                await _raw_json(503, jsonrpc.error_response(envelope.id, RpcCode.SERVER_ERROR, refusal), send)
                return
            client = self.clients[name] = _ModernClient(self._pool, name, self.server, self.schemas)
            client.on_end = self._end_client
            self._budget.add(client)
        upstream_id, post = client.open(envelope, body, _routing_headers(request))
        await _answer_post(client, upstream_id, post, receive, send)

    def _ladder(self, request: Request, envelope: jsonrpc.Envelope, body: bytes) -> InboundLadderRejection | None:
        """The checks a 2026-07-28 HTTP server makes before it dispatches (the SDK's own, in its
        order), so a host is told what the server would tell it, whatever the server's transport."""
        duplicated = find_duplicated_routing_header(request.headers.items())
        if duplicated is not None:
            return InboundLadderRejection(code=HEADER_MISMATCH, message=f"{duplicated} header appears more than once")
        decoded = _decode_object(body)
        verdict = classify_inbound_request(decoded, headers=dict(request.headers))
        if isinstance(verdict, InboundLadderRejection):
            return verdict
        params = envelope.params_dict()
        name_key = _TASK_NAME_KEYS.get(str(envelope.method))
        if name_key is not None and params.get(name_key) is not None \
                and decode_header_value(request.headers.get("mcp-name")) != params.get(name_key):
            return InboundLadderRejection(code=HEADER_MISMATCH,
                                          message=f"Mcp-Name header does not match params.{name_key}")
        if envelope.method == "tools/call":
            schema = self.schemas.get(str(params.get("name")))
            arguments = params.get("arguments")
            if schema is not None and isinstance(arguments, dict | None):
                return validate_mcp_param_headers(schema, arguments or {}, request.headers)
        return None

    # ---- upkeep ---------------------------------------------------------------------------------

    def sweep(self, idle_s: float) -> None:
        now = time.monotonic()
        for session in list(self.sessions.values()):
            if now - session.last_used > idle_s and not session.get_streams:
                logger.info("MCP session %s idle for %.0f s: closing it", session.session_id[:8], now - session.last_used)
                self._end(session)
        for client in list(self.clients.values()):
            if now - client.last_used > idle_s and not client.posts:
                self._end_client(client)

    def close(self) -> None:
        for session in list(self.sessions.values()):
            self._end(session)
        for client in list(self.clients.values()):
            self._end_client(client)


async def _answer_post(client: _ModernClient, upstream_id: jsonrpc.Id, post: _Post, receive: Receive,
                       send: Send) -> None:
    """The response as JSON; or, once the server sends something for it first, an SSE stream."""
    gone = asyncio.ensure_future(_disconnected(receive))
    streaming = False
    try:
        while True:
            got = asyncio.ensure_future(post.events.get())
            done, _ = await asyncio.wait([got, gone], return_when=asyncio.FIRST_COMPLETED)
            if got not in done:
                got.cancel()
                client.cancel(upstream_id)
                return
            raw = got.result()
            final = jsonrpc.peek(raw).kind == "response"
            if final and not streaming:
                await _raw_json(_status_of(raw), raw, send)
                return
            if not streaming:
                streaming = True
                await send({"type": "http.response.start", "status": 200, "headers": [
                    (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
            await send({"type": "http.response.body", "body": b"event: message\ndata: " + jsonrpc.one_line(raw) + b"\n\n",
                        "more_body": not final})
            if final:
                return
    finally:
        gone.cancel()


def _routing_headers(request: Request) -> dict[str, str]:
    """The host's MCP routing headers, passed on to a server that is reached over HTTP."""
    return {name: value for name, value in request.headers.items() if name.startswith("mcp-")
            and name != _SESSION_HEADER}


def _decode_object(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # msgspec read it; json may still give up on its depth
        return {}
    return value if isinstance(value, dict) else {}


def _not_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return True
    return False


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive`, with the request body already read handed over first."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _status_of(raw: bytes) -> int:
    """HTTP status of a 2026-07-28 answer, as the SDK's own server maps error codes."""
    code = jsonrpc.peek(raw).error_dict().get("code")
    return ERROR_CODE_HTTP_STATUS.get(code, 200) if isinstance(code, int) else 200


async def _raw_json(status: int, body: bytes, send: Send) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def _json_error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": jsonrpc.INVALID_REQUEST, "message": message}},
                        status_code=status)

