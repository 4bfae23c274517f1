"""MainBridge: the renderer's one peer of main, everything main says turned into Qt signals.

renderer_process/qt_peer.py runs shared/peer.py's core (the life cycle of wire contract v1) on the
Qt loop; the bridge gives it a window's timing, sends what the window asks and turns the core's
events into signals. No widget touches the socket. A window keeps trying until a main answers, and
says hello again at once when main answers `not-attached` (e.g. after a SIGSTOP past main's silence
limit); renderer_process/connection_status.py says when `main_missing` and `connection_problem` fire.
"""

import getpass
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate

from PySide6.QtCore import QObject, Signal

from renderer_process.bridge_messages import pushed_signal, unsent_notice, unsent_reply
from renderer_process.connection_status import CONNECTED, CONNECTING, ConnectionStatus
from renderer_process.qt_peer import QtPeer
from shared import channels, messages, peer
from shared import peer_requests as requests
from shared.connection_file import names_remote_main

logger = logging.getLogger(__name__)


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
                             retry_first=min(peer.RETRY_FIRST_S, retry_every), retry_max=retry_every,
                             tick=tick_ms / 1000)
        core = peer.PeerCore(role="renderer", name=name, window=self.window_id, timing=timing,
                             policy=peer.Policy(retry_first_attach=True), user=os_user())
        self._status = ConnectionStatus(self._connection_path, on_state=self.state_changed.emit,
                                        on_missing=self.main_missing.emit,
                                        on_problem=self.connection_problem.emit)
        self._peer = QtPeer(self._connection_path, core, self._on_effect, on_hello=self._status.found_main,
                            parent=self)

    # ---- public ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return self._status.state  # CONNECTING | CONNECTED | RECONNECTING

    @property
    def is_welcomed(self) -> bool:
        return self._peer.core.attached

    @property
    def is_remote(self) -> bool:
        """Attached over tcp: main (and its loopback sign-in listener) is on another machine."""
        return names_remote_main(self._connection_path)

    def start(self) -> None:
        """Connect and say hello; from here on the bridge keeps itself connected until close()."""
        self._status.set_state(CONNECTING)
        self._peer.start()

    def send_result(self, channel: str, action: messages.Action, content: dict[str, Any] | None,
                    remember: messages.Remember | None = None, reason: str | None = None,
                    grant: messages.GrantChoice | None = None) -> bool:
        """Answer one elicitation on its one-time channel (with `remember`: keep it as a rule; with
        `reason`: why an approval was denied, for the agent; with `grant`: what an approval's allow
        covers); False (and `refused`) if not sent."""
        body = requests.result(action, content, remember, reason, grant)
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
        self._peer.close()

    # ---- the core's events as signals -----------------------------------------------------

    def _on_effect(self, effect: peer.Effect) -> None:
        match effect:
            case peer.Welcomed(welcome):
                self._status.set_state(CONNECTED)
                self.welcomed.emit(welcome)
            case peer.AttachFailed(refusal=refusal, stopping=stopping):
                self._status.reconnecting(self._peer.problem, stopping)
                if refusal is not None:
                    self.refused.emit(refusal)
            case peer.Lost(why, stopping):
                logger.warning("lost main (%s); attaching again", why)
                self._status.reconnecting(self._peer.problem, stopping)
            case peer.Pushed(_, body) if (pushed := pushed_signal(body)) is not None:
                signal, value = pushed
                getattr(self, signal).emit(value)
            case peer.Refused(notice):
                logger.warning("main refused %s: %s: %s", notice.topic, notice.code, notice.message)
                self.refused.emit(notice)

    def _send_or_refuse(self, topic: str, body: messages.Body, what: str) -> bool:
        return self._peer.send(topic, body, lambda: self.refused.emit(unsent_notice(topic, what)))

    def _request(self, request: requests.Request) -> str:
        """Send a request answered on its channel; if it cannot go, answer it here with an error."""
        channel = request.channel
        return self._peer.request(request, lambda answer: self._answered(channel, answer),
                                  lambda: self.replied.emit(channel, unsent_reply(request.what)))

    def _answered(self, channel: str, answer: messages.ChannelReply) -> None:
        if answer.rules is not None:
            self.rules_changed.emit(answer.rules)
        self.replied.emit(channel, answer)


def os_user() -> str | None:
    """Who runs this window, for the audit's "who answered" (hello's `user`); None when the OS
    does not say."""
    try:
        return getpass.getuser()[:messages.MAX_ID_CHARS] or None
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (a bare container)
        return None
