"""MainBridge: the renderer's one ZeroMQ DEALER to main, turned into Qt signals.

Tiny on purpose (qtconsole's client.py style): the Qt adapter over shared/peer.py's core, which
decides the hello/heartbeat/reconnect life cycle of wire contract v1; the bridge runs the socket
and the timers and turns the core's effects into signals. Widgets consume its signals and call its
send methods; no widget touches the socket.

A welcomed bridge that main answers with `error` code `not-attached` (main detached it, e.g. after
the process was stopped with SIGSTOP longer than main's 5 s silence limit) says hello again at once
on the same socket rather than waiting for its own silence timer.

The bridge also says whether main is there at all: `main_missing(True)` when the connection file
is gone (main was stopped, or never started), or at once when main says `bye` (it is stopping; its
file counts as gone until it names another main), `main_missing(False)` once it is back. A
connection file that is there but cannot be used (not 0600, malformed, another protocol) is
`connection_problem(reason)`, with the fix in the reason; `connection_problem("")` once it can.

A plain sync socket is watched with a QSocketNotifier on `zmq.FD`. That descriptor is
edge-triggered, so the bridge drains whenever it fires, after every send, and on every liveness
tick (a missed edge costs at most one tick, never a hang).
"""

import logging
import time
from pathlib import Path
from typing import Any, Literal, cast

import zmq
from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal

from shared import channels, codec, messages, peer
from shared.connection_file import ConnectionInfo, read_connection_file
from shared.errors import ConnectionFileError

logger = logging.getLogger(__name__)

CONNECTING = "connecting"
CONNECTED = "connected"
RECONNECTING = "disconnected - reconnecting"

NOT_SENT = "not-sent"
"""Local code (not on the wire) of the ErrorNotice emitted through `refused` when a send fails."""

NOT_SENT_CALL_CODE = -32000
"""JSON-RPC 'server error' code of the local ChannelReply for a tool call that could not be sent."""

_BYE_LINGER_MS = 200  # close() is the one place a queued message (Bye) must still leave


class MainBridge(QObject):
    """Connects to main as a renderer and reports everything main says as Qt signals."""

    welcomed = Signal(object)  # messages.Welcome
    invoked = Signal(object)  # messages.ElicitationInvoke
    dismissed = Signal(object)  # messages.ElicitationDismiss
    completed = Signal(object)  # messages.ElicitationComplete
    servers_changed = Signal(object)  # list[messages.ServerInfo]
    peers_changed = Signal(object)  # list[messages.PeerInfo] (extension `peers`)
    noticed = Signal(object)  # messages.Notice (extension `notice`)
    replied = Signal(str, object)  # response channel, messages.ChannelReply
    refused = Signal(object)  # messages.ErrorNotice (main's, or a local "not-sent")
    state_changed = Signal(str)  # CONNECTING | CONNECTED | RECONNECTING
    rules_changed = Signal(object)  # list[messages.RuleInfo] (extension `rules`, or a msgRules reply)
    main_missing = Signal(bool)  # True: no connection file (main stopped); False: it is back
    connection_problem = Signal(str)  # why the connection file cannot be used; "" once it can

    def __init__(
        self,
        connection_path: Path,
        name: str,
        parent: QObject | None = None,
        *,
        heartbeat_after: float = peer.HEARTBEAT_AFTER_S,
        silence_limit: float = peer.MAIN_SILENT_S,
        retry_every: float = peer.RETRY_MAX_S,
        tick_ms: int = int(peer.TICK_S * 1000),
    ) -> None:
        super().__init__(parent)
        self._connection_path = Path(connection_path)
        self._window_id = channels.new_uuid7()  # one per bridge: main sees the same window after reconnects
        # A window keeps trying until a main answers, every `retry_every` at most.
        timing = peer.Timing(heartbeat_after=heartbeat_after, main_silent=silence_limit, attach_timeout=retry_every,
                             retry_first=min(peer.RETRY_FIRST_S, retry_every), retry_max=retry_every)
        self._core = peer.PeerCore(role="renderer", name=name, window=self._window_id, timing=timing,
                                   policy=peer.Policy(retry_first_attach=True))

        self._sock: zmq.Socket[bytes] | None = None
        self._reaches: tuple[str, object] | None = None  # endpoint and CURVE options of the socket
        self._notifier: QSocketNotifier | None = None
        self._closed = False
        self._state = ""
        self._last_file_problem = ""
        self._missing: bool | None = None
        self._draining = False
        self._work = peer.SocketWork(self._send_or_hello, self._connect, self._close_socket)

        self._tick = QTimer(self)
        self._tick.setInterval(tick_ms)
        self._tick.timeout.connect(self._on_tick)
        # With IMMEDIATE, a send fails until the connection is up; retry the hello quickly.
        self._hello_timer = QTimer(self)
        self._hello_timer.setInterval(20)
        self._hello_timer.timeout.connect(self._try_hello)

    # ---- public ---------------------------------------------------------------------------

    @property
    def window_id(self) -> str:
        return self._window_id

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def state(self) -> str:
        return self._state

    @property
    def is_welcomed(self) -> bool:
        return self._core.attached

    def start(self) -> None:
        """Connect and say hello; from here on the bridge keeps itself connected until close()."""
        self._closed = False
        self._set_state(CONNECTING)
        self._tick.start()
        self._apply(self._core.attach(time.monotonic()))

    def send_result(self, channel: str, action: messages.Action, content: dict[str, Any] | None,
                    remember: messages.Remember | None = None) -> bool:
        """Answer one elicitation on its one-time channel (with `remember`: keep it as a rule);
        False (and `refused`) if not sent."""
        body = messages.ElicitationResult(action=action, content=content if action == "accept" else None,
                                          remember=remember)
        sent = self._core.attached and self._send(channel, body)
        if not sent:
            self._report_not_sent(channel, "not connected to main; the answer was not sent")
        return sent

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any], channel: str | None = None) -> str:
        """Ask main to call a tool; the reply arrives later as `replied(channel, ...)`."""
        channel = channel or "call-" + channels.new_uuid7()
        body = messages.CallTool(server=server, tool=tool, response_channel=channel, arguments=arguments)
        self._request(channels.CALL_TOOL, body, channel, "the call")
        return channel

    def control_server(
        self, server: str, action: Literal["start", "stop", "restart"], channel: str | None = None
    ) -> str:
        """Extension `msgServerControl`: start, stop or restart one server; answered on `replied`."""
        channel = channel or "control-" + channels.new_uuid7()
        body = messages.ServerControl(server=server, action=action, response_channel=channel)
        self._request(channels.SERVER_CONTROL, body, channel, f"{action} {server}")
        return channel

    def reload(self, channel: str | None = None) -> str:
        """Extension `msgReload`: main re-reads its config; answered on `replied`."""
        channel = channel or "reload-" + channels.new_uuid7()
        self._request(channels.RELOAD, messages.Reload(response_channel=channel), channel, "the reload")
        return channel

    @property
    def is_remote(self) -> bool:
        """Attached over tcp: main (and its loopback sign-in listener) is on another machine."""
        try:
            return read_connection_file(self._connection_path).endpoint.startswith("tcp://")
        except ConnectionFileError:
            return False

    def send_sign_in_redirect(self, server: str, elicitation_id: str, url: str, channel: str | None = None) -> str:
        """Extension `msgSignInRedirect`: the address a browser here ended on after signing in."""
        channel = channel or "sign-in-" + channels.new_uuid7()
        body = messages.SignInRedirect(server=server, elicitation_id=elicitation_id, url=url, response_channel=channel)
        self._request(channels.SIGN_IN_REDIRECT, body, channel, "the sign-in address")
        return channel

    def mcp_request(
        self, server: str, method: messages.McpMethod, params: dict[str, Any], channel: str | None = None
    ) -> str:
        """Extension `msgMcpRequest` (read-only MCP request, e.g. tools/list); answered on `replied`.
        A main without the extension refuses the topic: that comes as `refused` with its topic."""
        channel = channel or "mcp-" + channels.new_uuid7()
        body = messages.McpRequest(server=server, method=method, response_channel=channel, params=params)
        self._request(channels.MCP_REQUEST, body, channel, f"{method} of {server}")
        return channel

    def set_server_policy(self, server: str, decline_all: bool) -> bool:
        """Extension `msgServerPolicy` (no answer); False (and `refused`) if not sent."""
        body = messages.ServerPolicy(server=server, decline_all=decline_all)
        sent = self._core.attached and self._send(channels.SERVER_POLICY, body)
        if not sent:
            self._report_not_sent(
                channels.SERVER_POLICY, f"not connected to main; {server}'s policy was not sent"
            )
        return sent

    def request_rules(self, channel: str | None = None) -> str:
        """Extension `msgRules`: the current rules arrive as `rules_changed` (and `replied`)."""
        channel = channel or "rules-" + channels.new_uuid7()
        self._request(channels.RULES, messages.RulesRequest(response_channel=channel), channel, "the rules request")
        return channel

    def revoke_rules(self, ids: list[str], revoke_all: bool = False, channel: str | None = None) -> str:
        """Extension `msgRevokeRules`; the report arrives on `replied`, the new list as `rules_changed`."""
        channel = channel or "revoke-" + channels.new_uuid7()
        body = messages.RevokeRules(response_channel=channel, ids=ids, revoke_all=revoke_all)
        self._request(channels.REVOKE_RULES, body, channel, "the revoke")
        return channel

    def close(self) -> None:
        """Say bye and let go of the socket; the bridge stays quiet afterwards."""
        # May run from inside one of our own slots (a window closed mid-tick), so
        # `_closed` stops whatever bridge code resumes afterwards from reconnecting.
        self._closed = True
        self._tick.stop()
        self._hello_timer.stop()
        for effect in self._core.close():  # a bye even while main may be attaching us: it detaches at once
            if isinstance(effect, peer.Send):
                self._send(effect.topic, effect.body)
        self._close_socket(linger_ms=_BYE_LINGER_MS)

    # ---- connection life cycle (the core decides; this runs the socket and the signals) -------

    def _apply(self, effects: list[peer.Effect]) -> None:
        for effect in effects:
            if self._work.do(effect):
                continue
            match effect:
                case peer.Welcomed(welcome):
                    self._set_state(CONNECTED)
                    self.welcomed.emit(welcome)
                case peer.AttachFailed(refusal=refusal, stopping=stopping):
                    self._set_state(RECONNECTING)
                    if stopping:
                        self._set_missing(True)
                    if refusal is not None:
                        self.refused.emit(refusal)
                case peer.Lost(why, stopping):
                    logger.warning("lost main (%s); attaching again", why)
                    self._set_state(RECONNECTING)
                    if stopping:  # it is gone now, not after the silence limit
                        self._set_missing(True)
                case peer.Pushed(topic, body):
                    self._dispatch(topic, body)
                case peer.Refused(notice):
                    logger.warning("main refused %s: %s %s", notice.topic, notice.code, notice.message)
                    self.refused.emit(notice)
                case _:
                    pass

    def _connect(self) -> None:
        """Re-read the file (main may have restarted), connect (or keep a socket that reaches the
        same main), hello."""
        now = time.monotonic()
        try:
            info = read_connection_file(self._connection_path)
            options = peer.curve_options(info, self._connection_path)
        except ConnectionFileError as exc:
            exists = self._connection_path.exists()
            if str(exc) != self._last_file_problem:  # log each new problem once, not every second
                logger.warning("cannot reach main yet: %s", exc)
                self._last_file_problem = str(exc)
                # A file that is there but unusable is ours to fix, and the window says how.
                self.connection_problem.emit(str(exc) if exists else "")
            self._set_missing(not exists)
            self._apply(self._core.connect_failed(str(exc), now))
            return
        if self._last_file_problem:
            self._last_file_problem = ""
            self.connection_problem.emit("")
        if self._sock is None or self._reaches != (info.endpoint, options):
            try:
                self._open_socket(info, options)
            except zmq.ZMQError as exc:
                logger.warning("cannot connect to %s: %s", info.endpoint, exc)
                self._apply(self._core.connect_failed(str(exc), now))
                return
        effects = self._core.connected(info, now)
        if not any(isinstance(effect, peer.AttachFailed) for effect in effects):
            self._set_missing(False)
        self._apply(effects)

    def _open_socket(self, info: ConnectionInfo, options: list[tuple[int, bytes]]) -> None:
        self._close_socket(linger_ms=0)
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self._sock, self._reaches = sock, (info.endpoint, options)
        sock.setsockopt(zmq.LINGER, 0)  # a dead main must never block close() or exit
        sock.setsockopt(zmq.IMMEDIATE, 1)  # queue nothing for a peer that is not there
        for option, key in options:  # CURVE on tcp: main allows only paired client keys
            sock.setsockopt(option, key)
        sock.connect(info.endpoint)
        self._notifier = QSocketNotifier(sock.getsockopt(zmq.FD), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._drain)
        logger.debug("connecting to main at %s", info.endpoint)  # every retry: keep INFO quiet

    def _close_socket(self, linger_ms: int) -> None:
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier.deleteLater()
            self._notifier = None
        if self._sock is not None:
            self._sock.close(linger=linger_ms)
            self._sock = None
        self._hello_timer.stop()

    def _send_or_hello(self, topic: str, body: messages.Body) -> None:
        if topic != channels.HELLO:
            self._send(topic, body)
            return
        self._hello_timer.start()  # with IMMEDIATE a send fails until the connection is up
        self._try_hello()

    def _try_hello(self) -> None:
        if self._core.state != "hello-sent":
            self._hello_timer.stop()
        elif self._send(channels.HELLO, self._core.hello()):
            self._hello_timer.stop()
            logger.debug("hello sent as window %s", self._window_id)

    def _on_tick(self) -> None:
        self._drain()
        if not self._closed:
            self._apply(self._core.tick(time.monotonic()))

    def _set_missing(self, missing: bool) -> None:
        if missing != self._missing:
            self._missing = missing
            self.main_missing.emit(missing)

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            logger.info("connection state: %s", state)
            self.state_changed.emit(state)

    # ---- frames ---------------------------------------------------------------------------

    def _send(self, topic: str, body: messages.Body) -> bool:
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.send_multipart(codec.encode(topic, body), zmq.NOBLOCK)
        except zmq.Again:
            logger.debug("%s not sent: no connection to main", topic)
            return False
        except zmq.ZMQError as exc:
            logger.warning("%s not sent: %s", topic, exc)
            return False
        self._core.sent(time.monotonic())
        self._drain()  # sending can consume the FD's edge; look for input now
        return True

    def _drain(self) -> None:
        if self._draining:  # a slot sent something mid-drain; the outer loop keeps reading
            return
        self._draining = True
        try:
            while self._sock is not None and _readable(self._sock):
                frames = self._sock.recv_multipart(zmq.NOBLOCK)
                self._apply(self._core.feed(frames, time.monotonic()))
        except zmq.Again:
            pass
        finally:
            self._draining = False

    def _dispatch(self, topic: str, body: object) -> None:
        if isinstance(body, messages.ElicitationInvoke):
            self.invoked.emit(body)
        elif isinstance(body, messages.ElicitationDismiss):
            self.dismissed.emit(body)
        elif isinstance(body, messages.ElicitationComplete):
            self.completed.emit(body)
        elif isinstance(body, messages.ServersUpdate):
            self.servers_changed.emit(body.servers)
        elif isinstance(body, messages.PeersUpdate):
            self.peers_changed.emit(body.peers)
        elif isinstance(body, messages.Notice):
            self.noticed.emit(body)
        elif isinstance(body, messages.RulesUpdate):
            self.rules_changed.emit(body.rules)

    def _request(self, topic: str, body: messages.Body, channel: str, what: str) -> None:
        """Send a request answered on `channel`; if it cannot go, answer it locally with an error."""
        if self._core.attached:
            self._core.expect(channel, _Replies(self, channel))  # before sending: the reply may come at once
            if self._send(topic, body):
                return
            self._core.forget(channel)
        reply = messages.ChannelReply(
            error=messages.CallError(
                code=NOT_SENT_CALL_CODE, message=f"not connected to main; {what} was not sent"
            )
        )
        # Queued so the caller has recorded the channel before the reply shows up.
        QTimer.singleShot(0, self, lambda: self.replied.emit(channel, reply))

    def _report_not_sent(self, topic: str, message: str) -> None:
        notice = messages.ErrorNotice(code=NOT_SENT, message=message, topic=topic)
        QTimer.singleShot(0, self, lambda: self.refused.emit(notice))


def _readable(sock: zmq.Socket[bytes]) -> bool:
    events = cast(int, sock.getsockopt(zmq.EVENTS))
    return bool(events & zmq.POLLIN)


class _Replies:
    """The core's waiter for one request: its reply becomes `replied` (and `rules_changed`)."""

    def __init__(self, bridge: MainBridge, channel: str) -> None:
        self._bridge = bridge
        self._channel = channel

    def reply(self, answer: messages.ChannelReply) -> None:
        if answer.rules is not None:
            self._bridge.rules_changed.emit(answer.rules)
        self._bridge.replied.emit(self._channel, answer)

    def progress(self, update: messages.Progress) -> None:
        pass

    def refused(self, notice: messages.ErrorNotice) -> None:
        pass

    def lost(self, why: str) -> None:
        pass  # as before the core: a call that main lost gets no reply
