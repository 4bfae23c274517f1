"""MainWindow: servers, tool calls, results, and the one-at-a-time elicitation cards.

It consumes the bridge's signals through its `on_*` slots and speaks back only through its own
signals (`answer_ready`, `call_requested`, `control_requested`, `reload_requested`,
`policy_requested`), so tests can drive it without any socket and `attach()` is the one place
that wires it to a MainBridge.

Where a request shows (origin affinity): a request whose `origin` is another renderer window that
is attached right now (per main's latest `peers` list) belongs to that window; here it is only
listed under "waiting in another window", with "Answer here". Every other request (origin is
this window, null, a controller, or a window that is gone; no peers list yet counts as gone) is
queued for this window's modal card, oldest first. When an origin window detaches, its requests
move into the queue; when the peers list shows a queued request's origin attached, it moves to
the list (the card on screen is never taken away from the user).
"""

import json
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from renderer_process.bridge import NOT_SENT, MainBridge
from renderer_process.call_panel import CallPanel
from renderer_process.card import URL, ElicitationCard, UrlOpener, open_in_browser
from renderer_process.card_queue import CardQueue
from renderer_process.elsewhere import ElsewhereList
from renderer_process.hosts import HostsLabel
from renderer_process.reply_format import format_admin_reply, format_reply
from renderer_process.servers_panel import ServersPanel
from shared import channels, messages

logger = logging.getLogger(__name__)

STATUS_MS = 8000
BRIEF_MS = 4000  # "cancelled by the server": worth a glance, not a long stay
_REQUEUE_CODES = {"invalid-content", NOT_SENT}  # the request is still pending: ask again


@dataclass(frozen=True)
class _Request:
    """What one of our own requests to main was, to log its reply."""

    label: str
    admin: bool  # server control or reload (else a tool call)


class MainWindow(QMainWindow):
    answer_ready = Signal(str, str, object)  # response channel, action, content or None
    call_requested = Signal(str, str, str, object)  # response channel, server, tool, arguments
    control_requested = Signal(str, str, str)  # response channel, server, "start" | "stop" | "restart"
    reload_requested = Signal(str)  # response channel
    policy_requested = Signal(str, bool)  # server, decline_all

    def __init__(
        self,
        window_id: str = "",
        name: str = "",
        parent: QWidget | None = None,
        *,
        opener: UrlOpener = open_in_browser,
    ) -> None:
        super().__init__(parent)
        self._window_id = window_id
        self._opener = opener
        self._queue = CardQueue()
        self._card: ElicitationCard | None = None
        self._sent: dict[str, messages.ElicitationInvoke] = {}  # answered, not yet dismissed
        self._requests: dict[str, _Request] = {}  # response channel -> what we asked
        self._peers: dict[str, messages.PeerInfo] | None = None  # None: no `peers` list yet
        self._elsewhere: dict[str, messages.ElicitationInvoke] = {}  # belongs to another window
        self._adopted: set[str] = set()  # channels the user chose to answer here
        self._declining: set[str] = set()  # servers the user declines for this main session
        self._session = ""
        self._browser_waits: dict[tuple[str, str], messages.ElicitationInvoke] = {}

        self.setWindowTitle(f"Elicitron — {name}" if name else "Elicitron")
        self.resize(860, 540)

        self.queue_label = QLabel(self)
        self.queue_label.setObjectName("queue")
        self.queue_label.setStyleSheet("font-weight: bold;")
        self.queue_label.hide()
        self.elsewhere = ElsewhereList(self)
        self.browser_wait = _BrowserWait(self)
        self.servers_panel = ServersPanel(self)
        self.call_panel = CallPanel(self)
        self.results = QPlainTextEdit(self)
        self.results.setObjectName("results")
        self.results.setReadOnly(True)
        self.state_label = QLabel(self)
        self.state_label.setObjectName("state")
        self.statusBar().addPermanentWidget(self.state_label)
        self.hosts_label = HostsLabel(self)
        self.statusBar().addPermanentWidget(self.hosts_label)
        self._build_layout()

        self.call_panel.call_requested.connect(self._on_call_requested)
        self.servers_panel.control_requested.connect(self._on_control_requested)
        self.servers_panel.reload_requested.connect(self._on_reload_requested)
        self.servers_panel.policy_requested.connect(self._on_policy_requested)
        self.elsewhere.answer_here.connect(self._answer_here)
        self.browser_wait.clear_button.clicked.connect(self._stop_waiting_for_browser)
        self.on_state_changed("connecting")

    def _build_layout(self) -> None:
        servers_box = _boxed("Servers", self.servers_panel)
        right = QWidget(self)
        column = QVBoxLayout(right)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(_boxed("Call a tool", self.call_panel))
        column.addWidget(_boxed("Results", self.results), 1)
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(servers_box)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.addWidget(self.queue_label)
        layout.addWidget(self.elsewhere)
        layout.addWidget(self.browser_wait)
        layout.addWidget(splitter, 1)
        self.setCentralWidget(central)

    def attach(self, bridge: MainBridge) -> None:
        """Wire this window to a bridge, both ways."""
        self._window_id = bridge.window_id
        bridge.state_changed.connect(self.on_state_changed)
        bridge.welcomed.connect(self.on_welcomed)
        bridge.servers_changed.connect(self.on_servers_changed)
        bridge.peers_changed.connect(self.on_peers_changed)
        bridge.invoked.connect(self.on_invoked)
        bridge.dismissed.connect(self.on_dismissed)
        bridge.completed.connect(self.on_completed)
        bridge.noticed.connect(self.on_noticed)
        bridge.replied.connect(self.on_replied)
        bridge.refused.connect(self.on_refused)
        self.answer_ready.connect(bridge.send_result)
        self.call_requested.connect(
            lambda channel, server, tool, arguments: bridge.call_tool(server, tool, arguments, channel)
        )
        self.control_requested.connect(
            lambda channel, server, action: bridge.control_server(server, action, channel)
        )
        self.reload_requested.connect(lambda channel: bridge.reload(channel))
        self.policy_requested.connect(bridge.set_server_policy)

    # ---- accessors for tests and other engineers -------------------------------------------

    def current_card(self) -> ElicitationCard | None:
        return self._card

    def queued_count(self) -> int:
        return len(self._queue)

    def elsewhere_channels(self) -> list[str]:
        return [item.response_channel for item in self._elsewhere_sorted()]

    # ---- slots fed by the bridge ----------------------------------------------------------

    def on_state_changed(self, state: str) -> None:
        self.state_label.setText(state)

    def on_welcomed(self, welcome: messages.Welcome) -> None:
        if welcome.session != self._session:  # a (re)started main: its own peers and policies
            self._session = welcome.session
            self._peers = None
            self._declining.clear()
            self.servers_panel.set_declining(self._declining)
            self._browser_waits.clear()
            self.browser_wait.set_waits([])
        self.on_servers_changed(welcome.servers)
        # `pending` is main's full list: whatever we hold that is not in it was resolved (or
        # belonged to a previous main) while we were away.
        pending = {item.response_channel for item in welcome.pending}
        self._queue.keep_only(pending)
        for channel in [c for c in self._elsewhere if c not in pending]:
            del self._elsewhere[channel]
        self._adopted &= pending
        if self._card is not None and self._card.invoke.response_channel not in pending:
            self._drop_current(f"{self._card.server}: request is no longer pending", STATUS_MS)
        self._sent.clear()
        for item in welcome.pending:
            self._place(item)
        self._refresh_elsewhere()
        # main sends `peers` right after `welcome`: let it land before a card takes the screen,
        # so a request that another window is already showing is not put in front of the user.
        QTimer.singleShot(0, self, self._show_next)
        self._update_queue_text()

    def on_servers_changed(self, servers: list[messages.ServerInfo]) -> None:
        self.servers_panel.set_servers(servers)
        self.call_panel.set_servers(servers)

    def on_peers_changed(self, peers: list[messages.PeerInfo]) -> None:
        self._peers = {peer.window: peer for peer in peers}
        self.hosts_label.set_peers(peers)
        for item in [*self._elsewhere.values(), *self._queue.items()]:
            self._place(item)
        self._refresh_elsewhere()
        self._show_next()

    def on_invoked(self, invoke: messages.ElicitationInvoke) -> None:
        self._place(invoke)
        self._refresh_elsewhere()
        self._show_next()

    def on_dismissed(self, dismiss: messages.ElicitationDismiss) -> None:
        channel = dismiss.response_channel
        self._sent.pop(channel, None)
        self._adopted.discard(channel)
        if self._elsewhere.pop(channel, None) is not None:
            self._refresh_elsewhere()
        if self._card is not None and self._card.invoke.response_channel == channel:
            brief = dismiss.reason == "cancelled"
            self._drop_current(
                f"{self._card.server}: {self._dismiss_reason(dismiss)}", BRIEF_MS if brief else STATUS_MS
            )
            self._show_next()
        elif self._queue.remove(channel) is not None:
            self._update_queue_text()

    def on_completed(self, complete: messages.ElicitationComplete) -> None:
        """URL mode finished: close the matching URL card or "waiting for the browser" entry."""
        key = (complete.server, complete.elicitation_id)
        card = self._card
        if card is not None and card.kind == URL and (card.server, card.elicitation_id) == key:
            self._drop_current(f"{complete.server}: the linked page reported it is done", STATUS_MS)
            self._show_next()
        elif self._browser_waits.pop(key, None) is not None:
            self.browser_wait.set_waits(list(self._browser_waits.values()))
            self.statusBar().showMessage(f"{complete.server}: the linked page reported it is done", STATUS_MS)
        else:
            logger.debug("completion of %s/%s matches nothing here", *key)

    def on_noticed(self, notice: messages.Notice) -> None:
        text = f"[{notice.level}] " + (f"{notice.server}: " if notice.server else "") + notice.message
        self.statusBar().showMessage(text, STATUS_MS)
        self.results.appendPlainText(text)

    def on_replied(self, channel: str, reply: messages.ChannelReply) -> None:
        request = self._requests.pop(channel, None)
        if request is None:
            logger.debug("reply on %s is not for a request of this window", channel)
            return
        text = format_admin_reply(reply) if request.admin else format_reply(reply)
        self.results.appendPlainText(f"{request.label}: {text}")

    def on_refused(self, notice: messages.ErrorNotice) -> None:
        invoke = self._sent.pop(notice.topic, None) if notice.topic else None
        if invoke is not None and notice.code in _REQUEUE_CODES:
            self.statusBar().showMessage(
                f"{invoke.request.server}: answer not taken ({notice.message}); please answer again",
                STATUS_MS,
            )
            self._forget_browser_wait(invoke)
            self._place(invoke)
            self._show_next()
            return
        self.statusBar().showMessage(
            f"main refused {notice.topic or 'a message'}: {notice.message}", STATUS_MS
        )

    # ---- where a request goes -------------------------------------------------------------

    def _owner_name(self, invoke: messages.ElicitationInvoke) -> str | None:
        """The name of the other attached window this request belongs to; None if it is ours."""
        origin = invoke.origin
        if not origin or origin == self._window_id or self._peers is None:
            return None
        if invoke.response_channel in self._adopted:
            return None
        peer = self._peers.get(origin)
        if peer is None or peer.role != "renderer":
            return None
        return peer.name or origin

    def _place(self, invoke: messages.ElicitationInvoke) -> None:
        """Queue `invoke` for the card here, or list it as waiting in its own window."""
        channel = invoke.response_channel
        if self._card is not None and self._card.invoke.response_channel == channel:
            return
        if self._owner_name(invoke) is not None:
            self._queue.remove(channel)
            self._elsewhere[channel] = invoke
        else:
            self._elsewhere.pop(channel, None)
            self._queue.push(invoke)
        self._update_queue_text()

    def _elsewhere_sorted(self) -> list[messages.ElicitationInvoke]:
        return sorted(self._elsewhere.values(), key=lambda item: item.created_at)

    def _refresh_elsewhere(self) -> None:
        items = [(item, self._owner_name(item) or "?") for item in self._elsewhere_sorted()]
        self.elsewhere.set_items(items)

    def _answer_here(self, channel: str) -> None:
        invoke = self._elsewhere.pop(channel, None)
        if invoke is None:
            return
        self._adopted.add(channel)
        self._refresh_elsewhere()
        if self._card is None:
            self._open_card(invoke)
        else:  # a card is on screen (the list is behind it): this one comes next
            self._queue.push(invoke)
        self._update_queue_text()

    # ---- cards ------------------------------------------------------------------------------

    def _show_next(self) -> None:
        if self._card is None:
            invoke = self._queue.pop_oldest()
            if invoke is not None:
                self._open_card(invoke)
        self._update_queue_text()

    def _open_card(self, invoke: messages.ElicitationInvoke) -> None:
        card = ElicitationCard(invoke, self, opener=self._opener)
        card.answered.connect(partial(self._on_card_answered, card))
        card.decline_all_requested.connect(self._decline_all)
        self._card = card
        card.open()  # window-modal, non-blocking: the bridge keeps running
        logger.info("showing card %s from %s", invoke.response_channel, invoke.request.server)

    def _on_card_answered(self, card: ElicitationCard, action: str, content: Any) -> None:
        if card is not self._card:
            return
        channel = card.invoke.response_channel
        self._sent[channel] = card.invoke
        self._card = None
        card.deleteLater()
        if action == "accept" and card.kind == URL and card.elicitation_id is not None:
            self._browser_waits[(card.server, card.elicitation_id)] = card.invoke
            self.browser_wait.set_waits(list(self._browser_waits.values()))
        self.answer_ready.emit(channel, action, content)
        self._show_next()

    def _drop_current(self, status: str, status_ms: int) -> None:
        card = self._card
        if card is None:
            return
        self._card = None
        card.close_silently()
        card.deleteLater()
        self.statusBar().showMessage(status, status_ms)

    def _update_queue_text(self) -> None:
        text = self._queue.summary()
        self.queue_label.setText(text)
        self.queue_label.setVisible(bool(text))
        if self._card is not None:
            self._card.set_waiting_text(text)

    def _dismiss_reason(self, dismiss: messages.ElicitationDismiss) -> str:
        if dismiss.reason == "answered":
            return "answered" if dismiss.by == self._window_id else "answered in another window"
        return {
            "cancelled": "cancelled by the server",
            "expired": "expired",
            "server-closed": "server closed",
        }.get(dismiss.reason, dismiss.reason)

    # ---- URL mode: waiting for the browser ------------------------------------------------------

    def _forget_browser_wait(self, invoke: messages.ElicitationInvoke) -> None:
        for key, item in list(self._browser_waits.items()):
            if item.response_channel == invoke.response_channel:
                del self._browser_waits[key]
        self.browser_wait.set_waits(list(self._browser_waits.values()))

    def _stop_waiting_for_browser(self) -> None:
        self._browser_waits.clear()
        self.browser_wait.set_waits([])

    # ---- decline all from a server ------------------------------------------------------------

    def _decline_all(self, server: str) -> None:
        self._declining.add(server)
        self.servers_panel.set_declining(self._declining)
        self.policy_requested.emit(server, True)
        # main confirms with a notice, which the results log shows.
        self.statusBar().showMessage(f"{server}: declining all its requests for this session", STATUS_MS)

    def _on_policy_requested(self, server: str, decline_all: bool) -> None:
        if decline_all:
            self._decline_all(server)
            return
        self._declining.discard(server)
        self.servers_panel.set_declining(self._declining)
        self.policy_requested.emit(server, False)
        self.statusBar().showMessage(f"{server}: its requests are shown again", STATUS_MS)

    # ---- tool calls, server control, reload ---------------------------------------------------

    def _on_call_requested(self, server: str, tool: str, arguments: dict[str, Any]) -> None:
        channel = "call-" + channels.new_uuid7()
        self._requests[channel] = _Request(f"{server}/{tool}", admin=False)
        self.results.appendPlainText(f"→ {server}/{tool} {json.dumps(arguments, ensure_ascii=False)}")
        self.call_requested.emit(channel, server, tool, arguments)

    def _on_control_requested(self, server: str, action: str) -> None:
        channel = "control-" + channels.new_uuid7()
        self._requests[channel] = _Request(f"{action} {server}", admin=True)
        self.results.appendPlainText(f"→ {action} {server}")
        self.control_requested.emit(channel, server, action)

    def _on_reload_requested(self) -> None:
        channel = "reload-" + channels.new_uuid7()
        self._requests[channel] = _Request("reload config", admin=True)
        self.results.appendPlainText("→ reload config")
        self.reload_requested.emit(channel)

    # ---- closing --------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        # Closing the window is not an answer: requests stay pending for other windows.
        if self._card is not None:
            card, self._card = self._card, None
            card.close_silently()
        super().closeEvent(event)


class _BrowserWait(QFrame):
    """ "Waiting for the browser": URL requests accepted here whose page has not reported done."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("url_waiting")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel(self)
        self.label.setObjectName("url_waiting_text")
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.clear_button = QPushButton("Stop waiting", self)
        self.clear_button.setObjectName("url_waiting_clear")
        layout = QHBoxLayout(self)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.clear_button)
        self.hide()

    def set_waits(self, items: list[messages.ElicitationInvoke]) -> None:
        lines = [
            f"Waiting for the browser: {item.request.server} — {item.request.params.get('message', '')}"
            for item in items
        ]
        self.label.setText("\n".join(lines))
        self.setVisible(bool(items))


def _boxed(title: str, widget: QWidget) -> QGroupBox:
    box = QGroupBox(title)
    layout = QVBoxLayout(box)
    layout.addWidget(widget)
    return box
