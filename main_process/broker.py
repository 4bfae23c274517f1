"""The ROUTER side of the wire contract: sockets, CURVE, hello, liveness, and what each topic does.

One plain (sync) ROUTER socket per listener, watched by the asyncio loop's reader on its ZMQ_FD:
receives drain in one callback and sends never block, which keeps a round trip close to raw pyzmq.
The pending requests themselves live in `pending.PendingRequests`; who is attached and what a
connection may cost, in `peers`. Here:

- every frame is split first and its body decoded only once main knows it will act on it (a result
  for a closed or foreign channel, or anything from a peer over its rate, is refused undecoded);
- what a welcomed peer's topic does is its `@handles(topic)` method; its body type, who may send
  it and whether it is answered on a response channel are its row in shared/channels.py (TOPICS, at
  the end, puts the two together). The handler gets the sender's `Peer`, looked up once per
  message, and passes it on as the `caller`; a topic answered on a response channel gets the
  `reply` for it too, its channel checked before the handler runs;
- one drain handles at most DRAIN_BUDGET messages, then yields to the loop, so a flooding peer
  cannot hold up heartbeats, servers or other peers;
- every send goes through `send`/`_send_frames`, which schedule the drain a send may need (a
  send can consume the FD's edge), so no new send can forget it;
- `peers` changes reach peers coalesced (one list per PEERS_COALESCE_S, one shared buffer for all,
  only to peers whose last list differs), not one list per attach to everyone; a peer that
  attaches gets the current list right after its welcome;
- every peer's calls in flight are tracked (`peer_calls.PeerCalls`): a peer may cancel its own.
  Host peers make none: theirs go through their relayed sessions (relay.py).
"""

import asyncio
import errno
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, cast

import zmq

from main_process.audit_writer import AuditWriter
from main_process.clock import MONOTONIC, Clock, Timer
from main_process.elicitation_gate import ElicitationGate
from main_process.log_limiter import RateLimitedLog, cut
from main_process.peer_calls import Cancel, PeerCalls
from main_process.peers import PEER_SLOTS, Peer, PeerTable, RateLimiter
from main_process.pending import (
    WELCOME_PENDING_BYTES,
    Elicitation,
    PendingRequests,
    RequestOptions,
    Unanswered,
)
from main_process.store.interface import AuditTable
from shared import PROTOCOL_VERSION, channels
from shared.codec import DEFAULT_MAX_BODY_BYTES, decode_peer_body, encode, encode_welcome, split_from_peer
from shared.errors import ProtocolError, RpcCode, WireCode
from shared.event_loop import describe as describe_loop
from shared.messages import (
    Ask,
    AuthRequest,
    Body,
    Bye,
    CallError,
    CallTool,
    CancelCall,
    ChannelReply,
    DeviceRef,
    ElicitationComplete,
    ElicitationResult,
    ErrorNotice,
    Heartbeat,
    Hello,
    HttpGatewayStatus,
    ListChanged,
    ListenerStatus,
    ListName,
    McpClose,
    McpRelay,
    McpRequest,
    Notice,
    NotifyStatus,
    PeerInfo,
    PeersUpdate,
    PolicyStatus,
    Progress,
    Reload,
    RevokeRules,
    Role,
    RotateHttpToken,
    RuleInfo,
    RulesRequest,
    RulesUpdate,
    ServerControl,
    ServerInfo,
    ServerPolicy,
    ServersUpdate,
    Shutdown,
    SignInRedirect,
    StatusReport,
    StatusRequest,
    WebWindowStatus,
    Welcome,
    Withdraw,
)
from shared.zmq_calls import EVENTS, NOBLOCK, POLLIN, RCVMORE, SEND_MORE, zget, zrecv, zsend

logger = logging.getLogger(__name__)

ZAP_DOMAIN: Final = b"elicitron"  # tcp listeners authenticate CURVE clients in this ZAP domain
_BAD_HELLO_LIMIT: Final = 3  # per routing id within _BAD_HELLO_WINDOW_S; further hellos are ignored
_BAD_HELLO_WINDOW_S: Final = 10.0
DRAIN_BUDGET: Final = 200  # messages per drain callback before the loop gets a turn
PEERS_COALESCE_S: Final = 0.1
_SHARED_FRAME_BYTES: Final = 4096  # broadcast bodies at least this big are sent as one shared buffer
_HEARTBEAT_FRAMES: Final = encode(channels.HEARTBEAT, Heartbeat())


ReplyTo = Callable[[ChannelReply], None]  # sends one answer on a peer's response channel
ProgressTo = Callable[[float, float | None, str | None], None]  # sends msgProgress for one call
_HANDLERS: dict[str, Callable[..., None]] = {}  # filled by @handles; TOPICS pairs them with their rows


def handles[H: Callable[..., None]](topic: str) -> Callable[[H], H]:
    """Marks a Broker method as what main does with `topic` from a welcomed peer."""
    def register(method: H) -> H:
        if topic in _HANDLERS:
            raise ImportError(f"two handlers for {topic}")
        _HANDLERS[topic] = method
        return method

    return register


class _Request(Protocol):
    """A body answered on its response channel (a row with `reply`)."""

    @property
    def response_channel(self) -> str: ...


class BrokerHost(Protocol):
    """What the broker needs from the rest of main. A method that acts for a peer gets it as
    `caller`, looked up once per message by the broker (its window, name, role)."""

    def server_infos(self) -> list[ServerInfo]: ...

    def call_tool(self, request: CallTool, caller: Peer, reply: ReplyTo,
                  progress: ProgressTo | None = None) -> Cancel | None:
        """Start the call; `reply` is called exactly once, with its result or error (also when it
        is cancelled). Returns how to cancel it at the server (None: it has already replied)."""

    def mcp_request(self, request: McpRequest, reply: ReplyTo) -> None:
        """Forward one read-only MCP request; `reply` is called exactly once."""

    def control_server(self, request: ServerControl) -> Awaitable[ChannelReply]: ...

    def reload(self, config: str | None = None) -> Awaitable[ChannelReply]: ...

    def set_server_policy(self, policy: ServerPolicy, caller: Peer) -> None: ...

    def request_shutdown(self) -> None: ...

    def auth(self, request: AuthRequest) -> Awaitable[ChannelReply]:
        """Extension msgAuth: a server's sign-in status, login or logout."""

    def sign_in_redirect(self, request: SignInRedirect) -> Awaitable[ChannelReply]:
        """Extension msgSignInRedirect: an address pasted in a window on another machine."""

    def no_window_attached(self) -> None:
        """An elicitation arrived and no renderer is attached (auto-open hook)."""

    def rules_report(self) -> ChannelReply:
        """Every rule (`ChannelReply.rules`), for msgRules."""

    def revoke_rules(self, request: RevokeRules, caller: Peer) -> Awaitable[ChannelReply]:
        """Revoke rules (`ChannelReply.revoked`), for msgRevokeRules."""
    # extension msgAsk: a program's questions, owned by the asking peer
    def ask_question(self, request: Ask, caller: Peer, reply: ReplyTo) -> None:
        """Open the question or refuse it; `reply` gets its one answer (or error)."""

    def withdraw_question(self, request: Withdraw, caller: Peer) -> None: ...

    # extension msgMcpRelay: hosts' own sessions with a server (main_process/relay.py)
    def relay(self, peer: Peer, message: McpRelay) -> None: ...

    def relay_close(self, peer: Peer, close: McpClose) -> None: ...

    def peer_gone(self, peer: Peer) -> None:
        """A peer detached (after its calls and requests were cancelled)."""


class ServerWatcher(Protocol):
    """Who in main follows the servers as the host peers do (main's merged sessions)."""

    def servers_changed(self, servers: list[ServerInfo]) -> None: ...

    def lists_changed(self, server: str, lists: list[ListName]) -> None: ...


@dataclass(frozen=True)
class Listener:
    """One endpoint main binds; tcp ones carry main's CURVE keypair (CURVE is mandatory there)."""

    endpoint: str
    curve_keypair: tuple[bytes, bytes] | None = None


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
        audit: AuditTable | None = None,
        peer_slots: Mapping[Role, int] = PEER_SLOTS,
        limiter: RateLimiter | None = None,
        welcome_pending_bytes: int = WELCOME_PENDING_BYTES,
        clock: Clock = MONOTONIC,
    ) -> None:
        self.endpoint = endpoint
        self._clock = clock  # liveness and expiry run on it (tests move a SettableClock)
        self.session = session
        self._token = token
        self._host = host
        self._max_body = max_body_bytes
        self._heartbeat_s = heartbeat_s
        self._peer_timeout_s = peer_timeout_s
        self._audit_log = audit
        self._peers = PeerTable(peer_slots)
        self._calls = PeerCalls()
        self._limiter = limiter or RateLimiter()
        self._welcome_pending_bytes = welcome_pending_bytes
        self._bad_hellos: dict[bytes, tuple[float, int]] = {}
        self._pending: PendingRequests | None = None  # made in start(): it needs the loop
        self._gate: ElicitationGate | None = None  # with it
        self._audit: AuditWriter | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._complaints = RateLimitedLog(logger)
        self._drain_scheduled = False
        self._draining = False
        self._peers_publish: asyncio.TimerHandle | None = None
        self._heartbeat: Timer | None = None
        self._peers_sent: dict[bytes, bytes] = {}  # the last `peers` body each peer got
        self._loop: asyncio.AbstractEventLoop | None = None
        self.http_gateway_status: Callable[[], HttpGatewayStatus] | None = None  # main --mcp-http
        self.rotate_http_token: Callable[[], Awaitable[None]] | None = None  # main --mcp-http
        self.listener_status: Callable[[], list[ListenerStatus]] | None = None  # main --listen tcp://
        self.notify_status: Callable[[], list[NotifyStatus]] | None = None  # the config's `notify`
        self.web_window_status: Callable[[], WebWindowStatus] | None = None  # main --web
        self.policy_status: Callable[[], PolicyStatus | None] | None = None  # the config's `policies`
        self._server_watchers: list[ServerWatcher] = []
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
        self._pending = PendingRequests(self, self._loop, audit=self._audit, unseen=self._host.no_window_attached,
                                        welcome_pending_bytes=self._welcome_pending_bytes,
                                        window_name=self._window_name, window_device=self._window_device,
                                        clock=self._clock)
        self._gate = ElicitationGate(self._pending)
        for sock in self._socks:
            self._loop.add_reader(sock.fileno(), self._drain)
        self._heartbeat = self._clock.call_later(self._heartbeat_s, self._heartbeat_tick)
        self._drain()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._peers_publish is not None:
            self._peers_publish.cancel()
        for sock in self._socks:
            if self._loop is not None:
                self._loop.remove_reader(sock.fileno())
            sock.close(linger=0)
        if self._audit is not None:
            await self._audit.close()  # every queued row reaches the store
        if self.endpoint.startswith("ipc://"):
            try:
                os.unlink(self.endpoint.removeprefix("ipc://"))
            except FileNotFoundError:
                pass

    @property
    def pending(self) -> PendingRequests:
        assert self._pending is not None, "start() first"
        return self._pending

    @property
    def gate(self) -> ElicitationGate:
        """What becomes of every elicitation before it opens (rules, route, screening)."""
        assert self._gate is not None, "start() first"
        return self._gate

    # ---- what the servers call ---------------------------------------------------------

    async def elicit(self, elicitation: Elicitation, options: RequestOptions,
                     cancel_reason: Callable[[], Unanswered] = lambda: "cancelled") -> ElicitationResult:
        """Show one server request in the windows and wait for the one valid answer (steps 3-8),
        once the gate let it through.

        Raises UndeliverableRequestError (before anything is shown) for a request the windows
        cannot be sent."""
        return await self.pending.ask(elicitation, options, cancel_reason)

    def withdraw_server(self, server: str) -> None:
        """A server's connection ended: its open requests can never be answered."""
        self.pending.withdraw_server(server)

    def publish_servers(self) -> None:
        servers = self._host.server_infos()
        self._publish(channels.SERVERS, ServersUpdate(servers=servers))
        for watcher in self._server_watchers:
            watcher.servers_changed(servers)

    def watch_servers(self, watcher: ServerWatcher) -> None:
        self._server_watchers.append(watcher)

    def host_peer(self, window: str) -> Peer | None:
        """The attached peer with that hello window, if it is a host."""
        peer = self._peers.by_window(window)
        return peer if peer is not None and peer.role == "host" else None

    def say_goodbye(self) -> None:
        """main is stopping: every attached peer hears `bye` now, before the servers stop, so a
        window shows main as gone at once rather than after its silence limit."""
        self._publish(channels.BYE, Bye())
        self._server_watchers.clear()  # the servers stopping now is main stopping: sessions end as such

    def publish_complete(self, server: str, elicitation_id: str) -> None:
        self._publish(channels.COMPLETE, ElicitationComplete(server=server, elicitation_id=elicitation_id))

    def publish_list_changed(self, server: str, lists: list[ListName]) -> None:
        """Tell host peers these lists of `server` may have changed (they relist and tell their host)."""
        self._publish(channels.LIST_CHANGED, ListChanged(server=server, lists=lists))
        for watcher in self._server_watchers:
            watcher.lists_changed(server, lists)

    def publish_notice(self, level: str, message: str, server: str | None) -> None:
        notice = Notice(level=level, message=message, server=server)  # type: ignore[arg-type]
        self._publish(channels.NOTICE, notice)

    def publish_rules(self, rules: list[RuleInfo]) -> None:
        """Extension `rules`: every rule, to every window."""
        self._publish(channels.RULES_UPDATE, RulesUpdate(rules=rules))

    def peer(self, routing_id: bytes) -> Peer | None:
        return self._peers.get(routing_id)

    def send_to_peer(self, routing_id: bytes, frames: list[bytes], *, held_when_full: bool = False) -> bool:
        """One message to one attached peer (False: it is gone or its queue is full).
        `held_when_full`: the caller keeps it and sends it again, so a full queue is no drop to log."""
        if routing_id not in self._peers:
            return False
        sent = self._send_frames(routing_id, frames, held_when_full=held_when_full)
        self._schedule_drain()
        return sent

    def peers_changed(self) -> None:
        """Something `peers` shows changed (a host's calls in flight)."""
        self._peers_changed()

    def peer_by_window(self, window: str) -> Peer | None:
        return self._peers.by_window(window)

    def peer_by_routing_id(self, routing_id: bytes) -> Peer | None:
        return self._peers.get(routing_id)

    def _window_name(self, window: str) -> str | None:
        peer = self._peers.by_window(window)
        return peer.name if peer is not None else None

    def _window_device(self, window: str) -> DeviceRef | None:
        peer = self._peers.by_window(window)
        return peer.device if peer is not None else None

    def peers(self) -> list[PeerInfo]:
        return self._peers.infos()

    # ---- Outbox (for PendingRequests) -------------------------------------------------

    def renderers(self) -> list[bytes]:
        return self._peers.renderers()

    def send(self, routing_ids: Iterable[bytes], frames: list[bytes]) -> list[bytes]:
        if self._peers_publish is not None:
            # A request goes out: windows must know who is attached first (origin affinity), not a
            # coalescing window later.
            self._peers_publish.cancel()
            self._publish_peers()
        reached = [rid for rid in routing_ids if rid in self._peers and self._send_frames(rid, frames)]
        self._schedule_drain()
        return reached

    # ---- receiving ---------------------------------------------------------------------

    def _drain(self) -> None:
        self._drain_scheduled = False
        self._draining = True
        try:
            left = self._drain_sockets(DRAIN_BUDGET)
        finally:
            self._draining = False
        if left == 0 and self._loop is not None:
            # Budget spent with messages still waiting: the FD's edge is gone, so come back ourselves.
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def _drain_sockets(self, budget: int) -> int:
        """Handle up to `budget` messages; returns the budget left (0: there may be more)."""
        for index, sock in enumerate(self._socks):
            tag = bytes([index])
            # ZMQ_FD is edge-triggered: read until EVENTS says there is nothing left.
            while not sock.closed and zget(sock, EVENTS) & POLLIN:
                if budget == 0:
                    return 0
                try:
                    # A ROUTER puts the routing id before every message, so a second frame follows.
                    frames = [zrecv(sock, NOBLOCK), zrecv(sock, NOBLOCK)]
                    while zget(sock, RCVMORE):
                        frames.append(zrecv(sock, NOBLOCK))
                except zmq.Again:
                    break
                budget -= 1
                frames[0] = tag + frames[0]
                try:
                    self._handle(frames)
                # top-level handler of one frame: a bug must not stall the drain
                except Exception:  # noqa: BLE001
                    self._complaints.exception(("handler", frames[1][:40].hex()), "failed handling a frame %r from %s",
                                               cut(frames[1]), frames[0].hex())
        return max(budget, 1)

    def _schedule_drain(self) -> None:
        # A send can consume the FD's edge; look again once the current callback is done. Inside
        # _drain there is no need: it checks EVENTS again after every message it handles.
        if self._drain_scheduled or self._draining or self._loop is None:
            return
        for sock in self._socks:
            if zget(sock, EVENTS) & POLLIN:
                self._drain_scheduled = True
                self._loop.call_soon(self._drain)
                return

    def _handle(self, frames: list[bytes]) -> None:
        routing_id = frames[0]
        peer = self._peers.get(routing_id)
        now = self._clock.now()
        if peer is not None:
            peer.last_seen = now  # any message counts, even one we refuse or drop
        # Bytes count only for a body main may read: an oversized one is refused unread.
        body_bytes = len(frames[-1]) if len(frames[-1]) <= self._max_body else 0
        if not self._limiter.allow(routing_id, body_bytes, now):
            if self._limiter.should_warn(routing_id, now):
                self._complaints.warning(("rate", routing_id.hex() if peer else "unattached"),
                                         "dropping messages from %s (%r): over its rate", routing_id.hex(),
                                         cut(peer.name) if peer else "unattached")
                self._send_error(routing_id, ProtocolError(
                    WireCode.RATE_LIMITED, "too many messages; some were dropped unread"))
            return
        try:
            topic, raw = split_from_peer(frames[1:], self._max_body)
            if topic == channels.HELLO:
                hello = decode_peer_body(topic, raw)
                assert isinstance(hello, Hello)
                self._on_hello(routing_id, hello)
            elif peer is None:
                raise ProtocolError(WireCode.NOT_ATTACHED, "send a valid hello first", topic)
            elif channels.is_result_channel(topic):
                self.pending.answer(routing_id, peer.window, topic, raw)
            else:
                self._dispatch(peer, topic, raw)
        except ProtocolError as err:
            self._refuse(routing_id, err)

    def _dispatch(self, peer: Peer, topic: str, raw: bytes) -> None:
        """A welcomed peer's message on a fixed topic, as its row says: decoded, checked, handled."""
        route = TOPICS[topic]
        body = decode_peer_body(topic, raw)
        if peer.role not in route.row.roles:
            allowed = " or ".join(f'"{role}"' for role in sorted(route.row.roles))
            raise ProtocolError(WireCode.BAD_BODY, f"{topic} is for peers with role {allowed}", topic)
        if route.row.reply:
            # First: a refused channel starts no work.
            reply = self._replier(peer, topic, cast(_Request, body).response_channel)
            route.handle(self, peer, body, reply)
        else:
            route.handle(self, peer, body)

    # ---- what each topic does (`@handles`; TOPICS, at the end of this module, collects them) ------

    @handles(channels.HEARTBEAT)
    def _on_heartbeat(self, peer: Peer, body: Heartbeat) -> None:
        pass  # its arrival is the point: `_handle` noted the peer as alive

    @handles(channels.BYE)
    def _on_bye(self, peer: Peer, body: Bye) -> None:
        self._detach(peer, "said bye")

    @handles(channels.CALL_TOOL)
    def _on_call_tool(self, peer: Peer, body: CallTool, reply: ReplyTo) -> None:
        reply, started = self._calls.track(peer, body.response_channel, reply)
        progress = self._progress_sender(peer, body.response_channel) if body.progress else None
        started(self._host.call_tool(body, peer, reply, progress))

    @handles(channels.CANCEL_CALL)
    def _on_cancel_call(self, peer: Peer, body: CancelCall) -> None:
        self._calls.cancel(peer.routing_id, body.response_channel)

    @handles(channels.MCP_REQUEST)
    def _on_mcp_request(self, peer: Peer, body: McpRequest, reply: ReplyTo) -> None:
        self._host.mcp_request(body, reply)

    @handles(channels.STATUS)
    def _on_status(self, peer: Peer, body: StatusRequest, reply: ReplyTo) -> None:
        reply(ChannelReply(status=self._status_report()))

    @handles(channels.SERVER_CONTROL)
    def _on_server_control(self, peer: Peer, body: ServerControl, reply: ReplyTo) -> None:
        self._spawn(self._reply_later(reply, self._host.control_server(body)))

    @handles(channels.RELOAD)
    def _on_reload(self, peer: Peer, body: Reload, reply: ReplyTo) -> None:
        self._spawn(self._reply_later(reply, self._host.reload(body.config)))

    @handles(channels.ROTATE_HTTP_TOKEN)
    def _on_rotate_http_token(self, peer: Peer, body: RotateHttpToken, reply: ReplyTo) -> None:
        self._spawn(self._reply_later(reply, self._rotated_http_token()))

    @handles(channels.SERVER_POLICY)
    def _on_server_policy(self, peer: Peer, body: ServerPolicy) -> None:
        self._host.set_server_policy(body, peer)

    @handles(channels.AUTH)
    def _on_auth(self, peer: Peer, body: AuthRequest, reply: ReplyTo) -> None:
        self._spawn(self._reply_later(reply, self._host.auth(body)))

    @handles(channels.SIGN_IN_REDIRECT)
    def _on_sign_in_redirect(self, peer: Peer, body: SignInRedirect, reply: ReplyTo) -> None:
        self._spawn(self._reply_later(reply, self._host.sign_in_redirect(body)))

    @handles(channels.SHUTDOWN)
    def _on_shutdown(self, peer: Peer, body: Shutdown) -> None:
        logger.info("shutdown requested by %r (%s)", cut(peer.name or peer.window), peer.role)
        self._host.request_shutdown()

    @handles(channels.ASK)
    def _on_ask(self, peer: Peer, body: Ask, reply: ReplyTo) -> None:
        self._host.ask_question(body, peer, reply)

    @handles(channels.WITHDRAW)
    def _on_withdraw(self, peer: Peer, body: Withdraw) -> None:
        self._host.withdraw_question(body, peer)

    @handles(channels.RULES)
    def _on_rules(self, peer: Peer, body: RulesRequest, reply: ReplyTo) -> None:
        reply(self._host.rules_report())

    @handles(channels.REVOKE_RULES)
    def _on_revoke_rules(self, peer: Peer, body: RevokeRules, reply: ReplyTo) -> None:
        self._spawn(self._reply_later(reply, self._host.revoke_rules(body, peer)))  # after the store removed it

    @handles(channels.MCP_RELAY)
    def _on_mcp_relay(self, peer: Peer, body: McpRelay) -> None:
        self._host.relay(peer, body)

    @handles(channels.MCP_CLOSE)
    def _on_mcp_close(self, peer: Peer, body: McpClose) -> None:
        self._host.relay_close(peer, body)

    def _replier(self, peer: Peer, topic: str, channel: str) -> ReplyTo:
        """How to answer on a peer's response channel; refuses a channel it could confuse."""
        if not channel.isascii() or not channel.isprintable() or " " in channel or channel in channels.TO_PEER \
                or channels.is_result_channel(channel):
            raise ProtocolError(WireCode.BAD_BODY, f"responseChannel {cut(channel)!r} is not usable", topic)
        routing_id = peer.routing_id

        def reply(answer: ChannelReply) -> None:
            if routing_id in self._peers:  # a peer that left gets nothing
                self._send_frames(routing_id, encode(channel, answer))
                self._schedule_drain()

        return reply

    def _progress_sender(self, peer: Peer, channel: str) -> ProgressTo:
        routing_id = peer.routing_id

        def progress(value: float, total: float | None, message: str | None) -> None:
            if routing_id in self._peers:
                self._send_frames(routing_id, encode(channels.PROGRESS, Progress(
                    response_channel=channel, progress=value, total=total, message=message)))
                self._schedule_drain()

        return progress

    def name_host(self, peer: Peer, name: str) -> None:
        """Who the MCP host behind a host peer is, from the `initialize` (or 2026-07-28 envelope)
        of its relayed session: `peers` and `msgStatus` show it, invokes name it in `via`."""
        if peer.name != name:
            peer.name = name
            logger.info("host %r (%r) names itself", cut(name), cut(peer.window))
            self._peers_changed()

    def _on_hello(self, routing_id: bytes, hello: Hello) -> None:
        if hello.protocol != PROTOCOL_VERSION or hello.token != self._token:
            if self._hello_throttled(routing_id):
                return  # a guessing peer gets no more answers for a while
            if hello.protocol != PROTOCOL_VERSION:
                err = ProtocolError(WireCode.BAD_PROTOCOL, f"main speaks protocol {PROTOCOL_VERSION}", channels.HELLO)
            else:
                err = ProtocolError(WireCode.BAD_TOKEN, "the token does not match this main's connection file",
                                    channels.HELLO)
            raise err  # a welcomed peer stays attached: bad frames never detach
        peer = Peer(routing_id, hello.window, hello.name, hello.role, self._clock.now(),
                    device=hello.device if hello.role == "renderer" else None)  # only a window answers for one
        try:
            replaced = self._peers.attach(peer)
        except ProtocolError as err:
            err.topic = channels.HELLO
            raise
        for old in replaced:
            self._after_detach(old, "replaced by a new connection of the same window")
        welcome = Welcome(session=self.session, window=hello.window, servers=self._host.server_infos(), pending=[],
                          max_message_bytes=self._max_body)
        delivered = 0
        if peer.role == "renderer":
            in_welcome, after, open_channels = self.pending.deliver_on_attach(routing_id)
            welcome.pending_channels = open_channels
            self._send_frames(routing_id, encode_welcome(welcome, in_welcome))
            for pending in after:
                self._send_frames(routing_id, pending.frames)
            delivered = len(open_channels)
        else:
            self._send_frames(routing_id, encode_welcome(welcome, []))
        # The current peers list right away (a window then knows whose requests are whose before it
        # shows a card); everyone else hears of the change coalesced.
        # The coalesced list that follows reaches the newcomer too: a peer can count on exactly two.
        self._send_frames(routing_id, encode(channels.PEERS, PeersUpdate(peers=self._peers.infos())))
        self._schedule_drain()
        logger.info("attached %s %r (%r), %d pending delivered", peer.role, cut(peer.name), cut(peer.window),
                    delivered)
        self._peers_changed()

    def _hello_throttled(self, routing_id: bytes) -> bool:
        now = self._clock.now()
        first, count = self._bad_hellos.get(routing_id, (now, 0))
        if now - first > _BAD_HELLO_WINDOW_S:
            first, count = now, 0
        self._bad_hellos[routing_id] = (first, count + 1)
        if len(self._bad_hellos) > 10_000:
            self._bad_hellos.clear()
        return count >= _BAD_HELLO_LIMIT

    async def _rotated_http_token(self) -> ChannelReply:
        if self.rotate_http_token is None:
            return ChannelReply(error=CallError(code=RpcCode.INVALID_REQUEST, message=(
                "main does not serve MCP over HTTP; start it with `elicitron main --mcp-http [HOST:]PORT`")))
        logger.info("rotating the MCP HTTP bearer token")
        await self.rotate_http_token()
        return ChannelReply(status=self._status_report())

    async def _reply_later(self, reply: ReplyTo, work: Awaitable[ChannelReply]) -> None:
        try:
            answer = await work
        # top-level handler of one peer request: report, never crash main
        except Exception as exc:  # noqa: BLE001
            self._complaints.exception(("request", type(exc).__name__), "a peer's request failed")
            answer = ChannelReply(error=CallError(code=RpcCode.INTERNAL_ERROR, message=f"internal error: {exc}"))
        reply(answer)

    # ---- sending -----------------------------------------------------------------------

    def _send_frames(self, routing_id: bytes, frames: list[Any], *, held_when_full: bool = False) -> bool:
        try:
            sock = self._socks[routing_id[0]]
            # Frame by frame with int flags: cheaper than send_multipart; ROUTER sends are atomic.
            zsend(sock, routing_id[1:], SEND_MORE)
            zsend(sock, frames[0], SEND_MORE)
            zsend(sock, frames[1], NOBLOCK)  # a zmq.Frame (broadcasts) is sent without a copy
            return True
        except zmq.ZMQError as exc:
            peer = self._peers.get(routing_id)
            if exc.errno == errno.EHOSTUNREACH:
                if peer is not None:
                    self._detach(peer, "unreachable")
            elif not (held_when_full and exc.errno == errno.EAGAIN):
                self._complaints.warning(("send", exc.strerror), "dropped a message to %r: %s",
                                         cut(peer.window) if peer else routing_id.hex(), exc)
            return False

    def _publish(self, topic: str, body: Body) -> None:
        """`topic` to every attached peer of the roles its row names (shared/channels.py)."""
        roles = channels.TO_PEER[topic].roles
        routing_ids = [peer.routing_id for peer in self._peers if peer.role in roles]
        if routing_ids:
            self._broadcast(routing_ids, encode(topic, body))

    def _broadcast(self, routing_ids: list[bytes], frames: list[bytes]) -> None:
        if len(routing_ids) > 1 and len(frames[1]) >= _SHARED_FRAME_BYTES:
            # One buffer for every copy: a list to 500 windows costs one list, not 500.
            frames = [frames[0], zmq.Frame(frames[1])]  # type: ignore[list-item]
        for routing_id in routing_ids:
            self._send_frames(routing_id, frames)
        self._schedule_drain()

    def _peers_all(self) -> list[bytes]:
        return [peer.routing_id for peer in self._peers]

    def _refuse(self, routing_id: bytes, err: ProtocolError) -> None:
        # Unattached peers share one rate-limit key, so reconnecting per frame cannot flood the log;
        # %r and cut() keep control characters and megabytes in a peer's topic out of the log.
        who = routing_id.hex() if routing_id in self._peers else "unattached peers"
        self._complaints.warning((err.code, who), "refused %r from %s: %r", cut(err.topic or "frame"),
                                 routing_id.hex(), cut(err.message, 200))
        self._send_error(routing_id, err)

    def _send_error(self, routing_id: bytes, err: ProtocolError) -> None:
        self._send_frames(routing_id, encode(channels.ERROR, ErrorNotice(code=err.code, message=err.message,
                                                                          topic=err.topic)))
        self._schedule_drain()

    # ---- liveness ----------------------------------------------------------------------

    def _heartbeat_tick(self) -> None:
        """Every heartbeat_s: a peer silent past its limit is detached, every other one hears
        `heartbeat`."""
        self._heartbeat = self._clock.call_later(self._heartbeat_s, self._heartbeat_tick)
        if not self._draining:
            # Read what waits first: after a stall of main's own loop, a peer's heartbeat sitting
            # in the socket is no silence.
            self._drain()
        now = self._clock.now()
        for peer in self._peers:
            if now - peer.last_seen > self._peer_timeout_s:
                self._detach(peer, f"silent for {now - peer.last_seen:.1f} s")
            else:
                self._send_frames(peer.routing_id, _HEARTBEAT_FRAMES)
        self._schedule_drain()

    def _detach(self, peer: Peer, why: str) -> None:
        if self._peers.get(peer.routing_id) is peer:
            self._peers.detach(peer.routing_id)
            self._after_detach(peer, why)

    def _after_detach(self, peer: Peer, why: str) -> None:
        logger.info("detached %s %r (%r): %s", peer.role, cut(peer.name), cut(peer.window), why)
        self._peers_sent.pop(peer.routing_id, None)
        if self._pending is not None:
            self._pending.withdraw_owner(peer.routing_id)
        self._host.peer_gone(peer)
        self._peers_changed()

    def _peers_changed(self) -> None:
        if self._peers_publish is None and self._loop is not None:
            self._peers_publish = self._loop.call_later(PEERS_COALESCE_S, self._publish_peers)

    def _publish_peers(self) -> None:
        self._peers_publish = None
        frames = encode(channels.PEERS, PeersUpdate(peers=self._peers.infos()))
        # Only to windows whose last list differs: one that attached meanwhile has it already, and a
        # host's call that began and ended within the coalescing window changed nothing.
        stale = [rid for rid in self._peers_all() if self._peers_sent.get(rid) != frames[1]]
        for rid in stale:
            self._peers_sent[rid] = frames[1]
        self._broadcast(stale, frames)

    def _status_report(self) -> StatusReport:
        return StatusReport(session=self.session, pid=os.getpid(), endpoint=self.endpoint,
                            servers=self._host.server_infos(), peers=self._peers.infos(),
                            pending=self.pending.summaries(),
                            event_loop=describe_loop(self._loop) if self._loop is not None else None,
                            mcp_http=None if self.http_gateway_status is None else self.http_gateway_status(),
                            listeners=[] if self.listener_status is None else self.listener_status(),
                            notify=[] if self.notify_status is None else self.notify_status(),
                            web_window=None if self.web_window_status is None else self.web_window_status(),
                            policies=None if self.policy_status is None else self.policy_status())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


@dataclass(frozen=True, slots=True)
class Route:
    """main's side of one topic a welcomed peer sends: its row (body, who may send it, whether it
    is answered on a response channel) and its handler."""

    row: channels.Topic
    # One of Broker's `@handles` methods: (broker, peer, body), and the `reply` when the row has one.
    handle: Callable[..., None]


# Every topic a peer sends but hello (the one a peer sends before it is welcomed: Broker._on_hello);
# the one-time result channels go to PendingRequests.answer. A topic without its handler, or a
# handler for no such topic, fails here, at import. What each does to the caller's limits (rate,
# size, nesting) is the same for all and happens before a route is looked up (`_handle`,
# `split_from_peer`).
def _routes(handlers: Mapping[str, Callable[..., None]]) -> dict[str, Route]:
    rows = {name: row for name, row in channels.TO_MAIN.items() if name != channels.HELLO}
    if handlers.keys() != rows.keys():
        raise ImportError(f"topics peers send without a @handles method: {sorted(rows.keys() - handlers.keys())}; "
                          f"@handles methods of no such topic: {sorted(handlers.keys() - rows.keys())}")
    return {name: Route(row, handlers[name]) for name, row in rows.items()}


TOPICS: Final[dict[str, Route]] = _routes(_HANDLERS)
