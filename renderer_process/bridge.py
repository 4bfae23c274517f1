"""MainBridge: the renderer's one ZeroMQ DEALER to main, turned into Qt signals.

The Qt adapter (qtconsole's client.py style) over shared/peer.py's core, which decides the life
cycle of wire contract v1, and shared/peer_socket.py, which runs the socket: the bridge watches it
with a QSocketNotifier (`zmq.FD` is edge-triggered: it drains on every notice, send and tick), runs
the timers and turns the core's effects into signals. No widget touches the socket.

`main_missing(True)` when the connection file is gone (main stopped, or never started) or main says
`bye` (its file counts as gone until it names another main), `main_missing(False)` once it is back.
A file that is there but cannot be used (not 0600, malformed, another protocol) is
`connection_problem(reason)`, the fix in the reason; `connection_problem("")` once it can. A bridge
main answers `not-attached` (e.g. after a SIGSTOP past main's silence limit) says hello again at once.
"""

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate

import zmq
from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal

from shared import channels, messages, peer
from shared import peer_requests as requests
from shared.connection_file import read_connection_file
from shared.errors import ConnectionFileError
from shared.peer_socket import BYE_LINGER_MS, MainSocket

logger = logging.getLogger(__name__)

CONNECTING = "connecting"
CONNECTED = "connected"
RECONNECTING = "disconnected - reconnecting"

NOT_SENT = "not-sent"
"""Local code (not on the wire) of the ErrorNotice emitted through `refused` when a send fails."""

NOT_SENT_CALL_CODE = -32000
"""JSON-RPC 'server error' code of the local ChannelReply for a request that could not be sent."""


_PUSHED: dict[type, tuple[str, str]] = {  # what main pushes: the signal that tells it (and of which field)
    messages.ElicitationInvoke: ("invoked", ""), messages.ElicitationDismiss: ("dismissed", ""),
    messages.ElicitationComplete: ("completed", ""), messages.Notice: ("noticed", ""),
    messages.ServersUpdate: ("servers_changed", "servers"), messages.PeersUpdate: ("peers_changed", "peers"),
    messages.RulesUpdate: ("rules_changed", "rules"),
}


def _request_method[**P](build: Callable[P, requests.Request]) -> Callable[Concatenate["MainBridge", P], str]:
    """The bridge method that sends what `build` makes."""

    def method(bridge: "MainBridge", /, *args: P.args, **kwargs: P.kwargs) -> str:
        return bridge._request(build(*args, **kwargs))

    method.__doc__ = build.__doc__
    return method


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

    def __init__(self, connection_path: Path, name: str, parent: QObject | None = None, *,
                 heartbeat_after: float = peer.HEARTBEAT_AFTER_S, silence_limit: float = peer.MAIN_SILENT_S,
                 retry_every: float = peer.RETRY_MAX_S, tick_ms: int = int(peer.TICK_S * 1000)) -> None:
        super().__init__(parent)
        self._connection_path = Path(connection_path)
        self.name = name
        self.window_id = channels.new_uuid7()  # one per bridge: main sees the same window after reconnects
        # A window keeps trying until a main answers, every `retry_every` at most.
        timing = peer.Timing(heartbeat_after=heartbeat_after, main_silent=silence_limit, attach_timeout=retry_every,
                             retry_first=min(peer.RETRY_FIRST_S, retry_every), retry_max=retry_every)
        self._core = peer.PeerCore(role="renderer", name=name, window=self.window_id, timing=timing,
                                   policy=peer.Policy(retry_first_attach=True))
        # LINGER 0: a dead main never blocks close() or exit; IMMEDIATE: nothing queued for no main.
        self._socket = MainSocket(self._connection_path, self._core, self._apply, check_pid=False,
                                  options=((zmq.LINGER, 0), (zmq.IMMEDIATE, 1)), watch=self._watch,
                                  unwatch=self._unwatch, after_send=lambda: self._socket.drain())
        self._work = peer.SocketWork(self._send_or_hello, self._socket.connect, self._socket.close)
        self._notifier: QSocketNotifier | None = None
        self._closed = False
        self.state = ""
        self._file_problem = ""
        self._missing: bool | None = None
        self._tick = QTimer(self)
        self._tick.setInterval(tick_ms)
        self._tick.timeout.connect(self._on_tick)
        self._hello_timer = QTimer(self)  # with IMMEDIATE a hello fails until the connection is up
        self._hello_timer.setInterval(20)
        self._hello_timer.timeout.connect(self._try_hello)

    # ---- public ---------------------------------------------------------------------------

    @property
    def is_welcomed(self) -> bool:
        return self._core.attached

    @property
    def is_remote(self) -> bool:
        """Attached over tcp: main (and its loopback sign-in listener) is on another machine."""
        try:
            return read_connection_file(self._connection_path).endpoint.startswith("tcp://")
        except ConnectionFileError:
            return False

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
        return self._send_or_refuse(channel, body, "the answer was not sent")

    def set_server_policy(self, server: str, decline_all: bool) -> bool:
        """Extension `msgServerPolicy` (no answer); False (and `refused`) if not sent."""
        body = messages.ServerPolicy(server=server, decline_all=decline_all)
        return self._send_or_refuse(channels.SERVER_POLICY, body, f"{server}'s policy was not sent")

    # Requests: each returns its channel (`channel`, or a fresh one), the answer comes on `replied`.
    call_tool = _request_method(requests.call_tool)
    control_server = _request_method(requests.control_server)
    reload = _request_method(requests.reload)
    send_sign_in_redirect = _request_method(requests.sign_in_redirect)
    mcp_request = _request_method(requests.mcp_request)  # a main without it answers on `refused`
    request_rules = _request_method(requests.rules)  # the rules as `rules_changed` too
    revoke_rules = _request_method(requests.revoke_rules)  # the new list as `rules_changed` too

    def close(self) -> None:
        """Say bye and let go of the socket; the bridge stays quiet afterwards."""
        # May run from inside one of our own slots (a window closed mid-tick), so
        # `_closed` stops whatever bridge code resumes afterwards from reconnecting.
        self._closed = True
        self._tick.stop()
        self._hello_timer.stop()
        self._apply(self._core.close(), BYE_LINGER_MS)  # a bye even while main may be attaching us

    # ---- the core's effects as signals ----------------------------------------------------

    def _apply(self, effects: list[peer.Effect], linger_ms: int = 0) -> None:
        for effect in effects:
            if self._work.do(effect, linger_ms):
                continue
            match effect:
                case peer.Welcomed(welcome):
                    self._set_state(CONNECTED)
                    self.welcomed.emit(welcome)
                case peer.AttachFailed(refusal=refusal, stopping=stopping):
                    self._reconnecting(stopping)
                    if refusal is not None:
                        self.refused.emit(refusal)
                case peer.Lost(why, stopping):
                    logger.warning("lost main (%s); attaching again", why)
                    self._reconnecting(stopping)
                case peer.Pushed(_, body) if (pushed := _PUSHED.get(type(body))) is not None:
                    signal, field = pushed
                    getattr(self, signal).emit(getattr(body, field) if field else body)
                case peer.Refused(notice):
                    logger.warning("main refused %s: %s %s", notice.topic, notice.code, notice.message)
                    self.refused.emit(notice)

    def _reconnecting(self, stopping: bool) -> None:
        if (problem := self._socket.problem) is not None:
            self._show_file_problem(problem)
        self._set_state(RECONNECTING)
        if stopping:  # main said bye: it is gone now, not after the silence limit
            self._set_missing(True)

    def _show_file_problem(self, problem: ConnectionFileError) -> None:
        exists = self._connection_path.exists()
        if str(problem) != self._file_problem:  # log each new problem once, not every second
            logger.warning("cannot reach main yet: %s", problem)
            self._file_problem = str(problem)
            # A file that is there but unusable is ours to fix, and the window says how.
            self.connection_problem.emit(str(problem) if exists else "")
        self._set_missing(not exists)

    def _set_missing(self, missing: bool) -> None:
        if missing != self._missing:
            self._missing = missing
            self.main_missing.emit(missing)

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            logger.info("connection state: %s", state)
            self.state_changed.emit(state)

    # ---- socket mechanics -----------------------------------------------------------------

    def _watch(self, fd: int) -> None:
        self._notifier = QSocketNotifier(fd, QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._socket.drain)

    def _unwatch(self, fd: int) -> None:
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier.deleteLater()
            self._notifier = None
        self._hello_timer.stop()

    def _send_or_hello(self, topic: str, body: messages.Body) -> None:
        if topic != channels.HELLO:
            self._socket.send(topic, body)
            return
        self._set_missing(False)  # the file names a main that is not stopping
        if self._file_problem:
            self._file_problem = ""
            self.connection_problem.emit("")
        self._hello_timer.start()  # with IMMEDIATE a send fails until the connection is up
        self._try_hello()

    def _try_hello(self) -> None:
        if self._core.state != "hello-sent" or self._socket.send(channels.HELLO, self._core.hello()):
            self._hello_timer.stop()

    def _on_tick(self) -> None:
        self._socket.drain()
        if not self._closed:
            self._apply(self._core.tick(time.monotonic()))

    def _send_or_refuse(self, topic: str, body: messages.Body, what: str) -> bool:
        if self._core.attached and self._socket.send(topic, body):
            return True
        notice = messages.ErrorNotice(code=NOT_SENT, message=f"not connected to main; {what}", topic=topic)
        QTimer.singleShot(0, self, lambda: self.refused.emit(notice))
        return False

    def _request(self, request: requests.Request) -> str:
        """Send a request answered on its channel; if it cannot go, answer it here with an error."""
        channel = request.channel
        if self._core.attached:  # the waiter first: the answer may come at once
            self._core.expect(channel, requests.Answer(lambda answer: self._answered(channel, answer)))
            if self._socket.send(request.topic, request.body):
                return channel
            self._core.forget(channel)
        error = messages.CallError(code=NOT_SENT_CALL_CODE,
                                   message=f"not connected to main; {request.what} was not sent")
        # Queued so the caller has recorded the channel before the reply shows up.
        QTimer.singleShot(0, self, lambda: self.replied.emit(channel, messages.ChannelReply(error=error)))
        return channel

    def _answered(self, channel: str, answer: messages.ChannelReply) -> None:
        if answer.rules is not None:
            self.rules_changed.emit(answer.rules)
        self.replied.emit(channel, answer)
