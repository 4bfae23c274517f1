"""MainWindow: servers, tool calls, results, and the one-at-a-time elicitation cards.

It consumes the bridge's signals through its `on_*` slots and speaks back only through its own
signals (`answer_ready`, `call_requested`), so tests can drive it without any socket and
`attach()` is the one place that wires it to a MainBridge.
"""

import json
import logging
from functools import partial
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QGroupBox,
    QLabel,
    QMainWindow,
    QPlainTextEdit,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from renderer_process.bridge import NOT_SENT, MainBridge
from renderer_process.call_panel import CallPanel
from renderer_process.card import ElicitationCard, UrlOpener, open_in_browser
from renderer_process.card_queue import CardQueue
from renderer_process.reply_format import format_reply
from renderer_process.servers_panel import ServersPanel
from shared import channels, messages

logger = logging.getLogger(__name__)

STATUS_MS = 8000
_REQUEUE_CODES = {"invalid-content", NOT_SENT}  # the request is still pending: ask again


class MainWindow(QMainWindow):
    answer_ready = Signal(str, str, object)  # response channel, action, content or None
    call_requested = Signal(str, str, str, object)  # response channel, server, tool, arguments

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
        self._calls: dict[str, tuple[str, str]] = {}  # response channel -> (server, tool)

        self.setWindowTitle(f"Elicitron — {name}" if name else "Elicitron")
        self.resize(860, 540)

        self.queue_label = QLabel(self)
        self.queue_label.setObjectName("queue")
        self.queue_label.setStyleSheet("font-weight: bold;")
        self.queue_label.hide()
        self.servers_panel = ServersPanel(self)
        self.call_panel = CallPanel(self)
        self.results = QPlainTextEdit(self)
        self.results.setObjectName("results")
        self.results.setReadOnly(True)
        self.state_label = QLabel(self)
        self.state_label.setObjectName("state")
        self.statusBar().addPermanentWidget(self.state_label)
        self._build_layout()

        self.call_panel.call_requested.connect(self._on_call_requested)
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
        layout.addWidget(splitter, 1)
        self.setCentralWidget(central)

    def attach(self, bridge: MainBridge) -> None:
        """Wire this window to a bridge, both ways."""
        self._window_id = bridge.window_id
        bridge.state_changed.connect(self.on_state_changed)
        bridge.welcomed.connect(self.on_welcomed)
        bridge.servers_changed.connect(self.on_servers_changed)
        bridge.invoked.connect(self.on_invoked)
        bridge.dismissed.connect(self.on_dismissed)
        bridge.completed.connect(self.on_completed)
        bridge.replied.connect(self.on_replied)
        bridge.refused.connect(self.on_refused)
        self.answer_ready.connect(bridge.send_result)
        self.call_requested.connect(
            lambda channel, server, tool, arguments: bridge.call_tool(server, tool, arguments, channel)
        )

    # ---- accessors for tests and other engineers -------------------------------------------

    def current_card(self) -> ElicitationCard | None:
        return self._card

    def queued_count(self) -> int:
        return len(self._queue)

    # ---- slots fed by the bridge ----------------------------------------------------------

    def on_state_changed(self, state: str) -> None:
        self.state_label.setText(state)

    def on_welcomed(self, welcome: messages.Welcome) -> None:
        self.on_servers_changed(welcome.servers)
        # `pending` is main's full list: whatever we hold that is not in it was resolved (or
        # belonged to a previous main) while we were away.
        pending = {item.response_channel for item in welcome.pending}
        self._queue.keep_only(pending)
        if self._card is not None and self._card.invoke.response_channel not in pending:
            self._drop_current(f"{self._card.server}: request is no longer pending")
        self._sent.clear()
        for item in welcome.pending:
            self._enqueue(item)
        self._show_next()

    def on_servers_changed(self, servers: list[messages.ServerInfo]) -> None:
        self.servers_panel.set_servers(servers)
        self.call_panel.set_servers(servers)

    def on_invoked(self, invoke: messages.ElicitationInvoke) -> None:
        self._enqueue(invoke)
        self._show_next()

    def on_dismissed(self, dismiss: messages.ElicitationDismiss) -> None:
        channel = dismiss.response_channel
        self._sent.pop(channel, None)
        if self._card is not None and self._card.invoke.response_channel == channel:
            self._drop_current(f"{self._card.server}: {self._dismiss_reason(dismiss)}")
            self._show_next()
        elif self._queue.remove(channel) is not None:
            self._update_queue_text()

    def on_completed(self, complete: messages.ElicitationComplete) -> None:
        self.statusBar().showMessage(f"{complete.server}: the linked page reported it is done", STATUS_MS)

    def on_replied(self, channel: str, reply: messages.ChannelReply) -> None:
        call = self._calls.pop(channel, None)
        if call is None:
            logger.debug("reply on %s is not for a call of this window", channel)
            return
        server, tool = call
        self.results.appendPlainText(f"{server}/{tool}: {format_reply(reply)}")

    def on_refused(self, notice: messages.ErrorNotice) -> None:
        invoke = self._sent.pop(notice.topic, None) if notice.topic else None
        if invoke is not None and notice.code in _REQUEUE_CODES:
            self.statusBar().showMessage(
                f"{invoke.request.server}: answer not taken ({notice.message}); please answer again",
                STATUS_MS,
            )
            self._enqueue(invoke)
            self._show_next()
            return
        self.statusBar().showMessage(
            f"main refused {notice.topic or 'a message'}: {notice.message}", STATUS_MS
        )

    # ---- cards ------------------------------------------------------------------------------

    def _enqueue(self, invoke: messages.ElicitationInvoke) -> None:
        showing = self._card is not None and self._card.invoke.response_channel == invoke.response_channel
        if not showing:
            self._queue.push(invoke)
        self._update_queue_text()

    def _show_next(self) -> None:
        if self._card is None:
            invoke = self._queue.pop_oldest()
            if invoke is not None:
                card = ElicitationCard(invoke, self, opener=self._opener)
                card.answered.connect(partial(self._on_card_answered, card))
                self._card = card
                card.open()  # window-modal, non-blocking: the bridge keeps running
        self._update_queue_text()

    def _on_card_answered(self, card: ElicitationCard, action: str, content: Any) -> None:
        if card is not self._card:
            return
        channel = card.invoke.response_channel
        self._sent[channel] = card.invoke
        self._card = None
        card.deleteLater()
        self.answer_ready.emit(channel, action, content)
        self._show_next()

    def _drop_current(self, status: str) -> None:
        card = self._card
        if card is None:
            return
        self._card = None
        card.close_silently()
        card.deleteLater()
        self.statusBar().showMessage(status, STATUS_MS)

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

    # ---- tool calls ---------------------------------------------------------------------------

    def _on_call_requested(self, server: str, tool: str, arguments: dict[str, Any]) -> None:
        channel = "call-" + channels.new_uuid7()
        self._calls[channel] = (server, tool)
        self.results.appendPlainText(f"→ {server}/{tool} {json.dumps(arguments, ensure_ascii=False)}")
        self.call_requested.emit(channel, server, tool, arguments)

    # ---- closing --------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        # Closing the window is not an answer: requests stay pending for other windows.
        if self._card is not None:
            card, self._card = self._card, None
            card.close_silently()
        super().closeEvent(event)


def _boxed(title: str, widget: QWidget) -> QGroupBox:
    box = QGroupBox(title)
    layout = QVBoxLayout(box)
    layout.addWidget(widget)
    return box
