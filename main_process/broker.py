"""The ROUTER side of wire contract v1: peers, hello/token, heartbeats, pending elicitations.

One plain (sync) ROUTER socket watched by the asyncio loop's reader on its ZMQ_FD: receives
drain in one callback and sends never block, which keeps a round trip close to raw pyzmq.
"""

import asyncio
import errno
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import zmq

from main_process.audit import AuditLog
from main_process.audit_writer import AuditWriter
from main_process.log_limiter import RateLimitedLog
from main_process.pending import PendingElicitation, PendingRegistry
from shared import PROTOCOL_VERSION, channels
from shared.codec import DEFAULT_MAX_BODY_BYTES, decode_from_peer, encode
from shared.errors import InvalidContentError, ProtocolError
from shared.messages import (
    Bye,
    CallError,
    CallTool,
    ChannelReply,
    DismissReason,
    ElicitationComplete,
    ElicitationDismiss,
    ElicitationInvoke,
    ElicitationRequest,
    ElicitationResult,
    ErrorNotice,
    Heartbeat,
    Hello,
    McpRequest,
    Notice,
    PeerInfo,
    PeersUpdate,
    Reload,
    Role,
    ServerControl,
    ServerInfo,
    ServerPolicy,
    ServersUpdate,
    Shutdown,
    StatusReport,
    StatusRequest,
    Welcome,
)
from shared.schema import validate_content

logger = logging.getLogger(__name__)

_RESERVED_TOPICS = {
    channels.WELCOME, channels.HEARTBEAT, channels.INVOKE, channels.DISMISS,
    channels.COMPLETE, channels.SERVERS, channels.ERROR, channels.PEERS, channels.NOTICE,
}
ZAP_DOMAIN = b"elicitron"  # tcp listeners authenticate CURVE clients in this ZAP domain
# Plain ints: the enum arithmetic of zmq.EVENTS & zmq.POLLIN costs ~1 us per check on the hot path.
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_NOBLOCK = int(zmq.NOBLOCK)
_SEND_MORE = int(zmq.SNDMORE) | _NOBLOCK
_BAD_HELLO_LIMIT = 3  # per routing id within _BAD_HELLO_WINDOW_S; further hellos are ignored
_BAD_HELLO_WINDOW_S = 10.0


ReplyTo = Callable[[ChannelReply], None]  # sends one answer on a peer's response channel


class BrokerHost(Protocol):
    """What the broker needs from the rest of main."""

    def server_infos(self) -> list[ServerInfo]: ...

    def call_tool(self, request: CallTool, origin: str, reply: ReplyTo) -> None:
        """Start the call; `reply` is called exactly once, with its result or error."""

    def mcp_request(self, request: McpRequest, reply: ReplyTo) -> None:
        """Forward one read-only MCP request; `reply` is called exactly once."""

    def control_server(self, request: ServerControl) -> Awaitable[ChannelReply]: ...

    def reload(self) -> Awaitable[ChannelReply]: ...

    def set_server_policy(self, policy: ServerPolicy, by: str) -> None: ...

    def request_shutdown(self) -> None: ...

    def no_window_attached(self) -> None:
        """An elicitation arrived and no renderer is attached (auto-open hook)."""


@dataclass(frozen=True)
class Listener:
    """One endpoint main binds; tcp ones carry main's CURVE keypair (CURVE is mandatory there)."""

    endpoint: str
    curve_keypair: tuple[bytes, bytes] | None = None


@dataclass
class Peer:
    routing_id: bytes
    window: str
    name: str
    role: Role
    last_seen: float


class Broker:
    def __init__(
        self,
        *,
        endpoint: str,
        token: str,
        remote: Listener | None = None,
        session: str,
        host: BrokerHost,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        heartbeat_s: float = 1.0,
        peer_timeout_s: float = 5.0,
        audit: AuditLog | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.session = session
        self._token = token
        self._host = host
        self._max_body = max_body_bytes
        self._heartbeat_s = heartbeat_s
        self._peer_timeout_s = peer_timeout_s
        self._audit_log = audit
        self._audit: AuditWriter | None = None  # made in start(): it needs the loop
        self._peers: dict[bytes, Peer] = {}
        self._bad_hellos: dict[bytes, tuple[float, int]] = {}
        self.pending = PendingRegistry()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._complaints = RateLimitedLog(logger)
        self._drain_scheduled = False
        self._draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.listeners = [Listener(endpoint)] + ([remote] if remote is not None else [])
        # One ROUTER per listener (CURVE is per socket); a routing id inside the broker is the
        # socket's index byte + ZeroMQ's routing id, so ids from different sockets never clash.
        self._socks = [self._make_socket(listener, max_body_bytes) for listener in self.listeners]

    def _make_socket(self, listener: Listener, max_body_bytes: int) -> zmq.Socket[bytes]:
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # else sends to a gone peer vanish silently
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a reconnecting window keeps its routing id
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.HEARTBEAT_IVL, int(self._heartbeat_s * 1000))
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(self._peer_timeout_s * 1000))
        # Hard cap far above the contract limit: beyond it zmq drops the connection outright.
        sock.setsockopt(zmq.MAXMSGSIZE, max_body_bytes * 16)
        sock.setsockopt(zmq.SNDHWM, 10_000)
        sock.setsockopt(zmq.RCVHWM, 10_000)
        if listener.curve_keypair is not None:
            public, secret = listener.curve_keypair
            sock.setsockopt(zmq.CURVE_SERVER, 1)
            sock.setsockopt(zmq.CURVE_PUBLICKEY, public)
            sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
            sock.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN)  # the ZAP handler checks the allow-list
        return sock

    # ---- lifecycle ---------------------------------------------------------------------

    def bind(self) -> None:
        for listener, sock in zip(self.listeners, self._socks, strict=True):
            sock.bind(listener.endpoint)
            if listener.endpoint.startswith("ipc://"):
                os.chmod(listener.endpoint.removeprefix("ipc://"), 0o600)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._audit_log is not None:
            self._audit = AuditWriter(self._audit_log, self._loop)
        for sock in self._socks:
            self._loop.add_reader(sock.getsockopt(zmq.FD), self._drain)
        self._spawn(self._heartbeat_loop())
        self._drain()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for sock in self._socks:
            if self._loop is not None:
                self._loop.remove_reader(sock.getsockopt(zmq.FD))
            sock.close(linger=0)
        if self._audit is not None:
            self._audit.close()  # every queued row reaches the disk
        if self.endpoint.startswith("ipc://"):
            try:
                os.unlink(self.endpoint.removeprefix("ipc://"))
            except FileNotFoundError:
                pass

    # ---- what the servers call ---------------------------------------------------------

    async def elicit(
        self,
        server: str,
        params: dict[str, Any],
        origin: str | None,
        timeout_s: float,
        cancel_reason: Callable[[], DismissReason] = lambda: "cancelled",
    ) -> ElicitationResult:
        """Show one request in the windows and wait for the one valid answer (steps 3-8).

        `cancel_reason` tells, when the caller is cancelled, whether the server withdrew the
        request or its connection went away."""
        assert self._loop is not None, "start() first"
        now = time.time()
        invoke = ElicitationInvoke(
            request=ElicitationRequest(server=server, params=params),
            response_channel=channels.new_result_channel(),
            created_at=int(now * 1000),
            expires_at=int((now + timeout_s) * 1000),
            origin=origin,
        )
        pending = PendingElicitation(invoke=invoke, future=self._loop.create_future())
        self.pending.add(pending)
        frames = encode(channels.INVOKE, invoke)
        for peer in list(self._peers.values()):
            if peer.role == "renderer" and self._send_frames(peer.routing_id, frames):
                pending.sent_to.add(peer.routing_id)
        if self._audit is not None:
            self._audit.request(invoke)  # written while the windows show it
        self._schedule_drain()
        if not pending.sent_to:
            self._host.no_window_attached()
        # A timer rather than wait_for: no timeout context per request on the hot path.
        expiry = self._loop.call_later(timeout_s, self._expire, pending)
        try:
            return await pending.future
        except asyncio.CancelledError:
            self._finish(pending, cancel_reason())
            raise
        finally:
            expiry.cancel()

    def _expire(self, pending: PendingElicitation) -> None:
        if pending.future.done():
            return
        logger.info("elicitation %s from %s expired", pending.channel, pending.invoke.request.server)
        if self.pending.close(pending.channel, "expired") is None:
            return
        self._dismiss(pending, "expired")
        self._resolve_after_audit(pending, ElicitationResult(action="cancel"), "expired", None)

    def dismiss_server(self, server: str) -> None:
        """A server's connection ended: its open requests can never be answered."""
        for pending in self.pending.all():
            if pending.invoke.request.server == server:
                self._finish(pending, "server-closed")
                if not pending.future.done():
                    pending.future.set_result(ElicitationResult(action="cancel"))

    def publish_servers(self) -> None:
        self._broadcast(channels.SERVERS, ServersUpdate(servers=self._host.server_infos()))

    def publish_complete(self, server: str, elicitation_id: str) -> None:
        self._broadcast(channels.COMPLETE, ElicitationComplete(server=server, elicitation_id=elicitation_id))

    def publish_notice(self, level: str, message: str, server: str | None) -> None:
        self._broadcast(channels.NOTICE, Notice(level=level, message=message, server=server))  # type: ignore[arg-type]

    def renderer_count(self) -> int:
        return sum(1 for peer in self._peers.values() if peer.role == "renderer")

    def peers(self) -> list[PeerInfo]:
        return [PeerInfo(window=p.window, name=p.name, role=p.role) for p in self._peers.values()]

    # ---- receiving ---------------------------------------------------------------------

    def _drain(self) -> None:
        self._drain_scheduled = False
        self._draining = True
        try:
            self._drain_sockets()
        finally:
            self._draining = False

    def _drain_sockets(self) -> None:
        for index, sock in enumerate(self._socks):
            tag = bytes([index])
            # ZMQ_FD is edge-triggered: read until EVENTS says there is nothing left.
            while not sock.closed and sock.getsockopt(_EVENTS) & _POLLIN:
                try:
                    frames = sock.recv_multipart(_NOBLOCK)
                except zmq.Again:
                    break
                frames[0] = tag + frames[0]
                try:
                    self._handle(frames)
                except Exception:  # top-level handler of one frame: a bug must not stall the drain
                    logger.exception("failed handling a frame from %s", frames[0].hex())

    def _schedule_drain(self) -> None:
        # A send can consume the FD's edge; look again once the current callback is done. Inside
        # _drain there is no need: it checks EVENTS again after every message it handles.
        if self._drain_scheduled or self._draining or self._loop is None:
            return
        if any(sock.getsockopt(_EVENTS) & _POLLIN for sock in self._socks):
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def _handle(self, frames: list[bytes]) -> None:
        routing_id = frames[0]
        peer = self._peers.get(routing_id)
        if peer is not None:
            peer.last_seen = time.monotonic()  # any message counts, even one we refuse
        try:
            topic, body = decode_from_peer(frames[1:], self._max_body)
        except ProtocolError as err:
            self._refuse(routing_id, err)
            return
        if isinstance(body, Hello):
            self._on_hello(routing_id, body)
            return
        if peer is None:
            self._refuse(routing_id, ProtocolError("not-attached", "send a valid hello first", topic))
            return
        match body:
            case Heartbeat():
                pass
            case ElicitationResult():
                self._on_result(peer, topic, body)
            case CallTool():
                self._on_call_tool(peer, body)
            case McpRequest():
                self._on_mcp_request(peer, body)
            case StatusRequest():
                self._send(routing_id, body.response_channel, ChannelReply(status=self._status_report()))
            case Shutdown():
                logger.info("shutdown requested by %s (%s)", peer.name or peer.window, peer.role)
                self._host.request_shutdown()
            case ServerControl():
                self._spawn(self._reply_later(routing_id, body.response_channel, self._host.control_server(body)))
            case Reload():
                self._spawn(self._reply_later(routing_id, body.response_channel, self._host.reload()))
            case ServerPolicy():
                self._host.set_server_policy(body, peer.name or peer.window)
            case Bye():
                self._detach(peer, "said bye")

    def _on_hello(self, routing_id: bytes, hello: Hello) -> None:
        if hello.protocol != PROTOCOL_VERSION or hello.token != self._token:
            now = time.monotonic()
            first, count = self._bad_hellos.get(routing_id, (now, 0))
            if now - first > _BAD_HELLO_WINDOW_S:
                first, count = now, 0
            self._bad_hellos[routing_id] = (first, count + 1)
            if len(self._bad_hellos) > 10_000:
                self._bad_hellos.clear()
            if count >= _BAD_HELLO_LIMIT:
                return  # throttled: a guessing peer gets no more answers for a while
            if hello.protocol != PROTOCOL_VERSION:
                err = ProtocolError("bad-protocol", f"main speaks protocol {PROTOCOL_VERSION}", channels.HELLO)
            else:
                err = ProtocolError("bad-token", "the token does not match this main's connection file",
                                    channels.HELLO)
            self._refuse(routing_id, err)  # a welcomed peer stays attached: bad frames never detach
            return
        for other in list(self._peers.values()):
            if other.window == hello.window and other.routing_id != routing_id:
                self._detach(other, "replaced by a new connection of the same window")
        peer = Peer(routing_id, hello.window, hello.name, hello.role, time.monotonic())
        self._peers[routing_id] = peer
        pending_for_peer: list[ElicitationInvoke] = []
        if peer.role == "renderer":
            for pending in self.pending.all():
                pending.sent_to.add(routing_id)  # delivery in welcome counts as sending
                pending_for_peer.append(pending.invoke)
        welcome = Welcome(session=self.session, window=hello.window, servers=self._host.server_infos(),
                          pending=pending_for_peer)
        self._send(routing_id, channels.WELCOME, welcome)
        logger.info("attached %s %r (%s), %d pending delivered", peer.role, peer.name, peer.window,
                    len(pending_for_peer))
        self._publish_peers()

    def _on_result(self, peer: Peer, topic: str, result: ElicitationResult) -> None:
        pending = self.pending.get(topic)
        if pending is None:
            closed = self.pending.closed_reason(topic)
            if closed is None:
                self._refuse(peer.routing_id, ProtocolError("unknown-channel", "no such request", topic))
            else:
                self._refuse(peer.routing_id, ProtocolError("already-answered", f"request is {closed}", topic))
            return
        if peer.routing_id not in pending.sent_to:
            self._refuse(peer.routing_id, ProtocolError("not-recipient", "this request was not sent to you", topic))
            return
        params = pending.invoke.request.params
        content: dict[str, Any] | None = None
        if result.action == "accept" and params.get("mode", "form") == "form":
            content = result.content or {}
            try:
                validate_content(params.get("requestedSchema", {}), content)
            except InvalidContentError as exc:
                self._refuse(peer.routing_id, ProtocolError("invalid-content", str(exc), topic))
                return
        if pending.future.done():  # the server withdrew it a moment ago; its dismiss is on the way
            self._refuse(peer.routing_id, ProtocolError("already-answered", "request was cancelled", topic))
            return
        self.pending.close(topic, "answered")
        dismiss = encode(channels.DISMISS, ElicitationDismiss(response_channel=topic, reason="answered",
                                                              by=peer.window))
        for routing_id in pending.sent_to:  # the windows first: they are not waiting on the disk
            if routing_id in self._peers:
                self._send_frames(routing_id, dismiss)
        self._resolve_after_audit(pending, ElicitationResult(action=result.action, content=content),
                                  result.action, peer.window)
        self._schedule_drain()

    def _resolve_after_audit(self, pending: PendingElicitation, answer: ElicitationResult, outcome: str,
                             window: str | None) -> None:
        """Hand the server its answer only once the outcome is durable: a SIGKILL of main at any
        moment loses no decided outcome."""
        if self._audit is not None:
            self._audit.outcome(pending.channel, outcome, window=window, content=answer.content)
        if not pending.future.done():
            pending.future.set_result(answer)

    def _on_call_tool(self, peer: Peer, request: CallTool) -> None:
        channel = request.response_channel
        if not channel or channel in _RESERVED_TOPICS or channels.is_result_channel(channel) or not channel.isascii():
            self._refuse(peer.routing_id, ProtocolError("bad-body", f"responseChannel {channel!r} is not usable",
                                                        channels.CALL_TOOL))
            return
        routing_id = peer.routing_id

        def reply(answer: ChannelReply) -> None:
            if routing_id in self._peers:  # a peer that left gets nothing; its window shows no call
                self._send(routing_id, channel, answer)

        # A callback, not a task awaiting the call: one task switch less on every tool call.
        self._host.call_tool(request, peer.window, reply)

    def _on_mcp_request(self, peer: Peer, request: McpRequest) -> None:
        channel = request.response_channel
        if not self._usable_channel(channel):
            self._refuse(peer.routing_id, ProtocolError("bad-body", f"responseChannel {channel!r} is not usable",
                                                        channels.MCP_REQUEST))
            return
        routing_id = peer.routing_id

        def reply(answer: ChannelReply) -> None:
            if routing_id in self._peers:
                self._send(routing_id, channel, answer)

        self._host.mcp_request(request, reply)

    @staticmethod
    def _usable_channel(channel: str) -> bool:
        return bool(channel) and channel.isascii() and channel not in _RESERVED_TOPICS \
            and not channels.is_result_channel(channel)

    async def _reply_later(self, routing_id: bytes, channel: str, work: Awaitable[ChannelReply]) -> None:
        try:
            reply = await work
        except Exception as exc:  # top-level handler of one peer request: report, never crash main
            logger.exception("request answered on %s failed", channel)
            reply = ChannelReply(error=CallError(code=-32603, message=f"internal error: {exc}"))
        if routing_id in self._peers:
            self._send(routing_id, channel, reply)

    # ---- sending -----------------------------------------------------------------------

    def _send(self, routing_id: bytes, topic: str, body: Any) -> bool:
        sent = self._send_frames(routing_id, encode(topic, body))
        self._schedule_drain()
        return sent

    def _send_frames(self, routing_id: bytes, frames: list[bytes]) -> bool:
        try:
            sock = self._socks[routing_id[0]]
            # Frame by frame with int flags: cheaper than send_multipart; ROUTER sends are atomic.
            sock.send(routing_id[1:], _SEND_MORE)
            sock.send(frames[0], _SEND_MORE)
            sock.send(frames[1], _NOBLOCK)
            return True
        except zmq.ZMQError as exc:
            peer = self._peers.get(routing_id)
            if exc.errno == errno.EHOSTUNREACH:
                if peer is not None:
                    self._detach(peer, "unreachable")
            else:
                self._complaints.warning(("send", exc.strerror), "dropped a message to %r: %s",
                                         peer.window if peer else routing_id, exc)
            return False

    def _broadcast(self, topic: str, body: Any) -> None:
        frames = encode(topic, body)
        for routing_id in list(self._peers):
            self._send_frames(routing_id, frames)
        self._schedule_drain()

    def _refuse(self, routing_id: bytes, err: ProtocolError) -> None:
        # Unattached peers share one rate-limit key, so reconnecting per frame cannot flood the log;
        # %r keeps control characters in a peer's topic from forging log lines.
        who = routing_id.hex() if routing_id in self._peers else "unattached peers"
        self._complaints.warning((err.code, who), "refused %r from %s: %r", err.topic or "frame",
                                 routing_id.hex(), err.message)
        self._send(routing_id, channels.ERROR, ErrorNotice(code=err.code, message=err.message, topic=err.topic))

    def _finish(self, pending: PendingElicitation, reason: str) -> None:
        """Close a request nobody answered (withdrawn, server gone): record it and dismiss it."""
        if self.pending.close(pending.channel, reason) is None:
            return
        self._dismiss(pending, reason)  # the windows first: they are not waiting on the disk
        if self._audit is not None:
            self._audit.outcome(pending.channel, reason)

    def _dismiss(self, pending: PendingElicitation, reason: str) -> None:
        dismiss = encode(channels.DISMISS, ElicitationDismiss(response_channel=pending.channel,
                                                              reason=reason))  # type: ignore[arg-type]
        for routing_id in pending.sent_to:
            if routing_id in self._peers:
                self._send_frames(routing_id, dismiss)
        self._schedule_drain()

    # ---- liveness ----------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        frames = encode(channels.HEARTBEAT, Heartbeat())
        while True:
            await asyncio.sleep(self._heartbeat_s)
            now = time.monotonic()
            for peer in list(self._peers.values()):
                if now - peer.last_seen > self._peer_timeout_s:
                    self._detach(peer, f"silent for {now - peer.last_seen:.1f} s")
                else:
                    self._send_frames(peer.routing_id, frames)
            self._schedule_drain()

    def _detach(self, peer: Peer, why: str) -> None:
        if self._peers.pop(peer.routing_id, None) is not None:
            logger.info("detached %s %r (%s): %s", peer.role, peer.name, peer.window, why)
            self._publish_peers()

    def _publish_peers(self) -> None:
        self._broadcast(channels.PEERS, PeersUpdate(peers=self.peers()))

    def _status_report(self) -> StatusReport:
        return StatusReport(session=self.session, pid=os.getpid(), endpoint=self.endpoint,
                            servers=self._host.server_infos(), peers=self.peers(),
                            pending=[p.invoke for p in self.pending.all()])

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
