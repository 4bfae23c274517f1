"""MainWindow: servers, tool calls, results, and the one-at-a-time elicitation cards.

It consumes the bridge's signals through its `on_*` slots and speaks back only through its own
signals (`answer_ready`, `call_requested`, `control_requested`, `reload_requested`,
`policy_requested`), so tests can drive it without any socket and `attach()` is the one place
that wires it to a MainBridge.

Which request shows as the one modal card, which wait in the queue ("N more waiting") and which
are listed under "waiting in another window" (with "Answer here") is shared/window_core.py's
WindowCore, the same core a browser page's peer uses: the window feeds it main's pushes and the
user's answers and renders the effects it returns (`_render`).

While no window of this program is active (another program has the focus, or the window was
closed into the tray), a new request is announced with a desktop notification naming the server
and its question; clicking it brings the window and the card forward. The title and the tray
icon show how many requests wait here. When main is gone (stopped: its connection file is
removed, or main said it is stopping) a banner says so and what to do, and nothing offers to act
on its servers; a connection file this window cannot use (e.g. not 0600) is a banner with the fix.
"""

import json
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent
from PySide6.QtWidgets import (
    QApplication,
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

from renderer_process.bridge import MainBridge
from renderer_process.call_panel import CallPanel
from renderer_process.card import URL, UrlOpener, open_in_browser
from renderer_process.connection_status import CONNECTED
from renderer_process.consent_cards import Card, card_for, remember_choice
from renderer_process.elsewhere import ElsewhereList
from renderer_process.hosts import HostsLabel
from renderer_process.icon import app_icon
from renderer_process.long_text import preview
from renderer_process.remembered_panel import RememberedPanel
from renderer_process.reply_format import format_admin_reply, format_reply
from renderer_process.result_view import ResultView
from renderer_process.servers_panel import ServersPanel
from renderer_process.sign_in_card import SignInFinishDialog, is_sign_in
from renderer_process.tray import Tray, TrayFactory, system_tray
from renderer_process.web_devices_dialog import WebDevicesDialog
from shared import channels, messages
from shared.command_name import elicitron_command
from shared.window_core import (
    AnswerRefused,
    Arrived,
    Effect,
    ElsewhereChanged,
    SendAnswer,
    Show,
    WindowCore,
    Withdraw,
)

logger = logging.getLogger(__name__)

STATUS_MS = 8000
BRIEF_MS = 4000  # "cancelled by the server": worth a glance, not a long stay
KEEP_IN_TRAY_KEY = "window/keepInTray"
_MAX_TOOLS = 10_000  # a server paging forever stops here
MAIN_GONE_TEXT = (
    "main is not running: it was stopped (elicitron stop), or has not been started. Its servers "
    "are stopped too, and no request can reach this window. To start it again, run "
    "`{command} launch --no-window`; this window reconnects by itself."
)
MAIN_LOST_TEXT = "Lost contact with main; reconnecting… Nothing can be sent to it until it answers."
FILE_PROBLEM_TEXT = "This window cannot use its connection file: {problem}. It tries again every second."


@dataclass(frozen=True)
class _Request:
    """What one of our own requests to main was, to log its reply."""

    label: str
    admin: bool  # server control or reload (else a tool call)
    tools_of: str = ""  # a tools/list of this server (pages gathered in `pages`)
    pages: tuple[dict[str, Any], ...] = ()


class MainWindow(QMainWindow):
    answer_ready = Signal(str, str, object)  # response channel, action, content or None
    answer_remembered = Signal(str, str, object, object)  # ... and what to remember (messages.Remember)
    call_requested = Signal(str, str, str, object)  # response channel, server, tool, arguments
    control_requested = Signal(str, str, str)  # response channel, server, "start" | "stop" | "restart"
    reload_requested = Signal(str)  # response channel
    policy_requested = Signal(str, bool)  # server, decline_all
    sign_in_redirect_requested = Signal(str, str, str, str)  # response channel, server, elicitationId, url
    mcp_requested = Signal(str, str, str, object)  # response channel, server, method, params

    def __init__(
        self,
        window_id: str = "",
        name: str = "",
        parent: QWidget | None = None,
        *,
        opener: UrlOpener = open_in_browser,
        settings: QSettings | None = None,
        tray_factory: TrayFactory = system_tray,
    ) -> None:
        super().__init__(parent)
        self._core = WindowCore(window_id)  # the cards: shown, queued, waiting in another window
        self._name = name
        self._opener = opener
        self._settings = settings  # None: options last as long as the window
        self._notified: set[str] = set()  # channels a notification was shown for
        self._main_missing = False
        self._connected = False
        self._file_problem = ""  # why the connection file cannot be used, if it cannot
        self._card: Card | None = None  # the card of the core's shown request
        self._requests: dict[str, _Request] = {}  # response channel -> what we asked
        self._declining: set[str] = set()  # servers the user declines for this main session
        self._browser_waits: dict[tuple[str, str], messages.ElicitationInvoke] = {}
        self.remote = False  # attached over tcp: sign-ins finish by pasting the browser's address
        self._sign_in_finish: dict[str, SignInFinishDialog] = {}  # elicitationId -> open dialog
        self._sign_in_pastes: dict[str, SignInFinishDialog] = {}  # response channel -> its dialog

        self.setWindowIcon(app_icon())
        self.resize(900, 640)

        self.queue_label = QLabel(self)
        self.queue_label.setObjectName("queue")
        self.queue_label.setStyleSheet("font-weight: bold;")
        self.queue_label.hide()
        self.elsewhere = ElsewhereList(self)
        self.browser_wait = _BrowserWait(self)
        self.servers_panel = ServersPanel(self)
        self.call_panel = CallPanel(self)
        self.remembered_panel = RememberedPanel(self)
        self.results = QPlainTextEdit(self)
        self.results.setObjectName("results")
        self.results.setReadOnly(True)
        self.results.setAccessibleName("Log")
        self.result_view = ResultView(self)
        self.banner = _Banner(self)
        self.keep_in_tray = QAction("Keep running in the tray when closed", self)
        self.keep_in_tray.setObjectName("keep_in_tray")
        self.keep_in_tray.setCheckable(True)
        self.tray = Tray(tray_factory(self), self.keep_in_tray, self)
        self._load_options()
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
        self.elsewhere.answer_here.connect(lambda channel: self._render(self._core.answer_here(channel)))
        self.browser_wait.clear_button.clicked.connect(self._stop_waiting_for_browser)
        self.call_panel.tools_wanted.connect(self._request_tools)
        self.keep_in_tray.toggled.connect(self._save_options)
        self.tray.show_requested.connect(self.bring_forward)
        self.tray.quit_requested.connect(QApplication.quit)
        self.on_state_changed("connecting")
        self._refresh_waiting()

    def show_web_devices(self) -> WebDevicesDialog:
        """Window ▸ Web devices…: the paired browsers, Revoke, Pair (with the link's QR code)."""
        dialog = WebDevicesDialog(self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        return dialog

    def _build_layout(self) -> None:
        menu = self.menuBar().addMenu("&Window")
        menu.addAction(self.keep_in_tray)
        web_devices = menu.addAction("Web devices…")
        web_devices.setObjectName("web_devices_action")
        web_devices.triggered.connect(self.show_web_devices)
        servers_box = QSplitter(Qt.Orientation.Vertical, self)
        servers_box.addWidget(_boxed("Servers", self.servers_panel))
        servers_box.addWidget(_boxed("Remembered", self.remembered_panel))
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.addWidget(_boxed("Call a tool", self.call_panel))
        results = QSplitter(Qt.Orientation.Vertical, self)
        results.addWidget(self.result_view)
        results.addWidget(self.results)
        results.setStretchFactor(0, 3)  # the last result first; the log of everything below it
        results.setStretchFactor(1, 1)
        results.setSizes([300, 100])
        right.addWidget(_boxed("Results", results))
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(servers_box)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.addWidget(self.banner)
        layout.addWidget(self.queue_label)
        layout.addWidget(self.elsewhere)
        layout.addWidget(self.browser_wait)
        layout.addWidget(splitter, 1)
        self.setCentralWidget(central)

    def attach(self, bridge: MainBridge) -> None:
        """Wire this window to a bridge, both ways."""
        self._core.window = bridge.window_id
        bridge.state_changed.connect(self.on_state_changed)
        bridge.main_missing.connect(self.on_main_missing)
        bridge.connection_problem.connect(self.on_connection_problem)
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
        self.answer_remembered.connect(bridge.send_result)
        bridge.rules_changed.connect(self.remembered_panel.set_rules)
        bridge.replied.connect(self.remembered_panel.on_reply)
        bridge.welcomed.connect(lambda _welcome: bridge.request_rules())
        self.remembered_panel.revoke_requested.connect(lambda ids, every: bridge.revoke_rules(ids, every))
        self.call_requested.connect(
            lambda channel, server, tool, arguments: bridge.call_tool(server, tool, arguments, channel)
        )
        self.control_requested.connect(
            lambda channel, server, action: bridge.control_server(server, action, channel)
        )
        self.reload_requested.connect(lambda channel: bridge.reload(channel))
        self.policy_requested.connect(bridge.set_server_policy)
        self.remote = bridge.is_remote
        self.sign_in_redirect_requested.connect(
            lambda channel, server, eid, url: bridge.send_sign_in_redirect(server, eid, url, channel)
        )
        self.mcp_requested.connect(
            lambda channel, server, method, params: bridge.mcp_request(server, method, params, channel)
        )

    # ---- accessors for tests and other engineers -------------------------------------------

    def current_card(self) -> Card | None:
        return self._card

    def queued_count(self) -> int:
        return len(self._core.queued)

    # ---- slots fed by the bridge ----------------------------------------------------------

    def on_state_changed(self, state: str) -> None:
        self.state_label.setText(state)
        self._connected = state == CONNECTED
        self._show_reachability()

    def on_main_missing(self, missing: bool) -> None:
        """main's connection file is gone (main stopped cleanly) or is back."""
        if missing and not self._main_missing:
            # A cleanly stopped main cancelled its requests: nothing here can be answered any more.
            dropped = self._core.waiting_count
            self._render(self._core.cleared("main stopped: its requests are gone"))
            if dropped:
                logger.info("main stopped; dropped %d request(s) it held", dropped)
        self._main_missing = missing
        self._show_reachability()

    def on_connection_problem(self, problem: str) -> None:
        """The connection file is there but cannot be used (`problem` says why and how to fix it)."""
        self._file_problem = problem
        self._show_reachability()

    def _show_reachability(self) -> None:
        if self._connected:
            self.banner.say("")
        elif self._file_problem:
            self.banner.say(FILE_PROBLEM_TEXT.format(problem=self._file_problem.rstrip(".")))
        elif self._main_missing:
            self.banner.say(MAIN_GONE_TEXT.format(command=elicitron_command()))
        elif self._core.session:  # we were attached once: contact was lost
            self.banner.say(MAIN_LOST_TEXT)
        else:
            self.banner.say("")  # still connecting for the first time: the status bar says so
        self.servers_panel.set_reachable(self._connected, "main not running" if self._main_missing else "")
        self.call_panel.set_connected(self._connected)

    def on_welcomed(self, welcome: messages.Welcome) -> None:
        if welcome.session != self._core.session:  # a (re)started main: its own policies
            self._declining.clear()
            self.servers_panel.set_declining(self._declining)
            self._browser_waits.clear()
            self.browser_wait.set_waits([])
        self._connected = True
        self._main_missing = False
        self._show_reachability()
        self.on_servers_changed(welcome.servers)
        self._render(self._core.welcomed(welcome))  # the replay: what main no longer holds goes
        self._notified &= self._core.open_channels()
        # main sends `peers` right after `welcome`: let it land before a card takes the screen,
        # so a request that another window is already showing is not put in front of the user.
        QTimer.singleShot(0, self, lambda: self._render(self._core.settle()))

    def on_servers_changed(self, servers: list[messages.ServerInfo]) -> None:
        self.servers_panel.set_servers(servers)
        self.call_panel.set_servers(servers)

    def on_peers_changed(self, peers: list[messages.PeerInfo]) -> None:
        self.hosts_label.set_peers(peers)
        self._render(self._core.peers(peers))

    def on_invoked(self, invoke: messages.ElicitationInvoke) -> None:
        self._render(self._core.invoked(invoke))

    def on_dismissed(self, dismiss: messages.ElicitationDismiss) -> None:
        self._render(self._core.dismissed(dismiss))

    def on_completed(self, complete: messages.ElicitationComplete) -> None:
        """URL mode finished: close the matching URL card or "waiting for the browser" entry."""
        key = (complete.server, complete.elicitation_id)
        finish = self._sign_in_finish.pop(complete.elicitation_id, None)
        if finish is not None:
            finish.accept()
        card = self._card
        if card is not None and card.kind == URL and (card.server, card.elicitation_id) == key:
            self._drop_current(f"{complete.server}: the linked page reported it is done", STATUS_MS)
            self._render(self._core.give_back(card.invoke.response_channel))
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
        finish = self._sign_in_pastes.pop(channel, None)
        if finish is not None and reply.error is not None:
            finish.show_problem(reply.error.message)
        request = self._requests.pop(channel, None)
        if request is None:
            logger.debug("reply on %s is not for a request of this window", channel)
            return
        if request.tools_of:
            self._on_tools_page(request, reply)
            return
        text = format_admin_reply(reply) if request.admin else format_reply(reply)
        self.results.appendPlainText(f"{request.label}: {text}")
        if not request.admin:
            self.result_view.show_reply(request.label, reply)

    def on_refused(self, notice: messages.ErrorNotice) -> None:
        if notice.topic == channels.MCP_REQUEST:  # e.g. a main without the extension
            self._tools_unavailable(f"main refused it: {notice.message}")
            return
        effects = self._core.refused(notice)  # an answer of ours: asked again, or just refused
        if effects:
            self._render(effects)
            return
        self._show_refusal(notice.topic, notice.message)

    def _show_refusal(self, topic: str | None, message: str) -> None:
        self.statusBar().showMessage(f"main refused {topic or 'a message'}: {message}", STATUS_MS)

    # ---- cards: what the core says ------------------------------------------------------------

    def _render(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case Show(invoke):
                    self._open_card(invoke)
                case Withdraw(invoke, why, brief) if self._card is not None \
                        and self._card.invoke.response_channel == invoke.response_channel:
                    self._drop_current(why, BRIEF_MS if brief else STATUS_MS)
                case SendAnswer(invoke, action, content, None):
                    self.answer_ready.emit(invoke.response_channel, action, content)
                case SendAnswer(invoke, action, content, remember):
                    self.answer_remembered.emit(invoke.response_channel, action, content, remember)
                case AnswerRefused(invoke, message, True):
                    self.statusBar().showMessage(
                        f"{invoke.request.server}: answer not taken ({message}); please answer again", STATUS_MS)
                    self._forget_browser_wait(invoke)
                case AnswerRefused(invoke, message, False):
                    self._show_refusal(invoke.response_channel, message)
                case Arrived(invokes):
                    self._announce(list(invokes))
                case ElsewhereChanged(items):
                    self.elsewhere.set_items(list(items))
                case _:
                    pass  # Closed, NotOpen: a card here is gone once answered
        self._update_queue_text()

    def _open_card(self, invoke: messages.ElicitationInvoke) -> None:
        card = card_for(invoke, self, opener=self._opener)
        card.answered.connect(partial(self._on_card_answered, card))
        card.decline_all_requested.connect(self._decline_all)
        self._card = card
        if self.isVisible():
            card.open()  # window-modal, non-blocking: the bridge keeps running
        # else the window is in the tray: the card waits for the notification to be clicked
        logger.info("showing card %s from %s", invoke.response_channel, invoke.request.server)

    def _on_card_answered(self, card: Card, action: messages.Action, content: Any) -> None:
        if card is not self._card:
            return
        self._card = None
        card.deleteLater()
        if action == "accept" and card.kind == URL and card.elicitation_id is not None \
                and card.invoke.kind != "question":  # a program's link gets no completion notice
            self._browser_waits[(card.server, card.elicitation_id)] = card.invoke
            self.browser_wait.set_waits(list(self._browser_waits.values()))
        if action == "accept" and self.remote and is_sign_in(card.invoke):
            self._open_sign_in_finish(card.invoke)
        self._render(self._core.answer(card.invoke.response_channel, action, content, remember_choice(card, action)))

    def _open_sign_in_finish(self, invoke: messages.ElicitationInvoke) -> None:
        dialog = SignInFinishDialog(invoke, self)
        self._sign_in_finish[dialog.elicitation_id] = dialog
        dialog.pasted.connect(self._on_sign_in_pasted)
        dialog.rejected.connect(lambda: self._sign_in_finish.pop(dialog.elicitation_id, None))
        dialog.open()

    def _on_sign_in_pasted(self, server: str, elicitation_id: str, url: str) -> None:
        dialog = self._sign_in_finish.get(elicitation_id)
        channel = "sign-in-" + channels.new_uuid7()
        if dialog is not None:
            self._sign_in_pastes[channel] = dialog
        self._requests[channel] = _Request(f"sign-in to {server}", admin=True)
        self.sign_in_redirect_requested.emit(channel, server, elicitation_id, url)

    def _drop_current(self, status: str, status_ms: int) -> None:
        card = self._card
        if card is None:
            return
        self._card = None
        card.close_silently()
        card.deleteLater()
        self.statusBar().showMessage(status, status_ms)

    def _update_queue_text(self) -> None:
        text = self._core.summary()
        self.queue_label.setText(text)
        self.queue_label.setVisible(bool(text))
        if self._card is not None:
            self._card.set_waiting_text(text)
        self._refresh_waiting()

    # ---- waiting count, notifications, tray ------------------------------------------------------

    def waiting_count(self) -> int:
        """Requests waiting for an answer in this window: the card on screen and the queue."""
        return self._core.waiting_count

    def _refresh_waiting(self) -> None:
        count = self.waiting_count()
        title = f"Elicitron — {self._name}" if self._name else "Elicitron"
        if count:
            title += f" ({count} waiting)"
        self.setWindowTitle(title)
        self.tray.set_waiting(count)

    def _user_is_here(self) -> bool:
        # Any active window of ours (this one, its card) means the user sees the request already.
        return QApplication.activeWindow() is not None

    def _announce(self, invokes: list[messages.ElicitationInvoke]) -> None:
        """Notify about requests not yet announced, when the user is not looking at us."""
        new = [item for item in invokes if item.response_channel not in self._notified]
        if not new or self._user_is_here():
            return
        self._notified.update(item.response_channel for item in new)
        first = new[0]
        if len(new) == 1:
            what = "you to open a link" if first.request.params.get("mode") == URL else "for input"
            title = f"{first.request.server} asks {what}"
            message = preview(str(first.request.params.get("message", "")))[0] or "A request is waiting."
        else:
            servers = sorted({item.request.server for item in new})
            title = f"{len(new)} requests waiting"
            message = "From " + ", ".join(servers)
        if not self.tray.notify(title, message):
            QApplication.alert(self)  # no tray: at least ask the desktop for attention
        logger.info("notified: %s", title)

    def bring_forward(self) -> None:
        """Show the window (also out of the tray) and put the card, if any, in front."""
        if self.isMinimized() or not self.isVisible():
            self.showNormal()
        self.raise_()
        self.activateWindow()
        card = self._card
        if card is not None:
            card.open()
            card.raise_()
            card.activateWindow()

    def _load_options(self) -> None:
        keep = self._settings.value(KEEP_IN_TRAY_KEY, False, bool) if self._settings is not None else False
        self.keep_in_tray.setChecked(bool(keep) and self.tray.available)
        self.keep_in_tray.setEnabled(self.tray.available)
        if not self.tray.available:
            self.keep_in_tray.setToolTip("This desktop has no system tray")

    def _save_options(self) -> None:
        if self._settings is not None:
            self._settings.setValue(KEEP_IN_TRAY_KEY, self.keep_in_tray.isChecked())
            self._settings.sync()

    # ---- tools/list for the argument form -----------------------------------------------------

    def _request_tools(
        self, server: str, cursor: str | None = None, pages: tuple[dict[str, Any], ...] = ()
    ) -> None:
        channel = "tools-" + channels.new_uuid7()
        self._requests[channel] = _Request(f"tools of {server}", admin=True, tools_of=server, pages=pages)
        self.mcp_requested.emit(channel, server, "tools/list", {"cursor": cursor} if cursor else {})

    def _on_tools_page(self, request: _Request, reply: messages.ChannelReply) -> None:
        server = request.tools_of
        if reply.error is not None or not isinstance(reply.result, dict):
            message = reply.error.message if reply.error is not None else "empty reply"
            self.call_panel.set_tools_failed(server, message)
            return
        tools = reply.result.get("tools")
        page = tuple(t for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ()
        pages = request.pages + page
        cursor = reply.result.get("nextCursor")
        if isinstance(cursor, str) and cursor and len(pages) < _MAX_TOOLS:
            self._request_tools(server, cursor, pages)
            return
        self.call_panel.set_tools(server, list(pages))

    def _tools_unavailable(self, message: str) -> None:
        for channel, request in list(self._requests.items()):
            if request.tools_of:
                del self._requests[channel]
                self.call_panel.set_tools_failed(request.tools_of, message)

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
        if self.keep_in_tray.isChecked() and self.tray.available:
            # Stays attached in the tray: requests are announced and the card waits for a click.
            event.ignore()
            if self._card is not None:
                self._card.hide()
            self.hide()
            return
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
            f"Waiting for the browser: {item.request.server} — "
            f"{preview(str(item.request.params.get('message', '')), 1, 200)[0]}"
            for item in items
        ]
        self.label.setText("\n".join(lines))
        self.setVisible(bool(items))


def _boxed(title: str, widget: QWidget) -> QGroupBox:
    box = QGroupBox(title)
    layout = QVBoxLayout(box)
    layout.addWidget(widget)
    return box


class _Banner(QFrame):
    """A line across the top of the window: main is gone (and what to do), or contact was lost."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("main_banner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel(self)
        self.label.setObjectName("main_banner_text")
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.label.setStyleSheet("font-weight: bold;")
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # the fix, to copy
        layout = QHBoxLayout(self)
        layout.addWidget(self.label, 1)
        self.hide()

    def say(self, text: str) -> None:
        self.label.setText(text)
        self.setVisible(bool(text))
