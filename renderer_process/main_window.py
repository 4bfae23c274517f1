"""MainWindow: servers, tool calls, results, and the one-at-a-time elicitation cards.

It consumes the bridge's signals through its `on_*` slots and speaks back only through its own
signals (`answer_ready`, `call_requested`, `control_requested`, `reload_requested`,
`policy_requested`), so tests can drive it without any socket and `attach()` is the one place
that wires it to a MainBridge.

Which request shows as the one modal card, which wait in the queue ("N more waiting") and which
are listed under "waiting in another window" (with "Answer here") is shared/window_core.py's
WindowCore, the same core a browser page's peer uses, rendered by card_area.py's CardArea.

While no window of this program is active (another program has the focus, or the window was
closed into the tray), a new request is announced with a desktop notification naming the server
and its question; clicking it brings the window and the card forward. The title and the tray
icon show how many requests wait here. When main is gone (stopped: its connection file is
removed, or main said it is stopping) a banner says so and what to do, and nothing offers to act
on its servers; a connection file this window cannot use (e.g. not 0600) is a banner with the fix.

The window is a thin face composing parts with one job each: CardArea (the cards), BrowserWait,
SignInFinishes, RequestNotifier, KeepInTray, DeclinePolicy, MainRequests (our requests to main
and the results log) and the ConnectionBanner; it relays their signals as its own.
"""

import logging

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow, QPlainTextEdit, QWidget

from renderer_process.bridge import MainBridge
from renderer_process.browser_wait import BrowserWait
from renderer_process.call_panel import CallPanel
from renderer_process.card import URL, UrlOpener, open_in_browser
from renderer_process.card_area import STATUS_MS, CardArea, refusal_text
from renderer_process.connection_banner import ConnectionBanner, Reachability
from renderer_process.consent_cards import Card
from renderer_process.decline_policy import DeclinePolicy
from renderer_process.hosts import HostsLabel
from renderer_process.icon import app_icon
from renderer_process.keep_in_tray import KeepInTray
from renderer_process.main_requests import MainRequests
from renderer_process.remembered_panel import RememberedPanel
from renderer_process.request_notifier import RequestNotifier
from renderer_process.result_view import ResultView
from renderer_process.servers_panel import ServersPanel
from renderer_process.sign_in_card import is_sign_in
from renderer_process.sign_in_finish import SignInFinishes
from renderer_process.tray import Tray, TrayFactory, system_tray
from renderer_process.web_devices_dialog import WebDevicesDialog
from renderer_process.window_layout import lay_out
from shared import channels, messages

logger = logging.getLogger(__name__)


class MainWindow(QMainWindow):
    answer_ready = Signal(str, str, object)  # response channel, action, content or None
    answer_remembered = Signal(str, str, object, object)  # ... and what to remember (messages.Remember)
    answer_explained = Signal(str, str, object, str)  # ... an approval denied, with the reason typed on it
    answer_granted = Signal(str, str, object, object)  # ... an approval allowed with a grant (messages.GrantChoice)
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
        self._name = name
        self._reach = Reachability()
        self.remote = False  # attached over tcp: sign-ins finish by pasting the browser's address

        self.setWindowIcon(app_icon())
        self.resize(900, 640)

        self.cards = CardArea(window_id, self, opener)  # the card, the queue, the other windows'
        self.queue_label, self.elsewhere = self.cards.queue_label, self.cards.elsewhere
        self.browser_wait = BrowserWait(self)
        self.servers_panel = ServersPanel(self)
        self.call_panel = CallPanel(self)
        self.remembered_panel = RememberedPanel(self)
        self.results = QPlainTextEdit(self)
        self.results.setObjectName("results")
        self.results.setReadOnly(True)
        self.results.setAccessibleName("Log")
        self.result_view = ResultView(self)
        self.banner = ConnectionBanner(self)
        self.keep_in_tray = KeepInTray(settings, self)
        self.tray = Tray(tray_factory(self), self.keep_in_tray, self)
        self.keep_in_tray.load(self.tray.available)
        self.state_label = QLabel(self)
        self.state_label.setObjectName("state")
        self.statusBar().addPermanentWidget(self.state_label)
        self.hosts_label = HostsLabel(self)
        self.statusBar().addPermanentWidget(self.hosts_label)
        self.requests = MainRequests(self.results, self.result_view, self.call_panel)
        self.declining = DeclinePolicy(self.servers_panel)
        self.sign_ins = SignInFinishes(self)
        self.notifier = RequestNotifier(self.tray, self)
        menu = self.menuBar().addMenu("&Window")
        menu.addAction(self.keep_in_tray)
        web_devices = menu.addAction("Web devices…")
        web_devices.setObjectName("web_devices_action")
        web_devices.triggered.connect(self.show_web_devices)
        lay_out(self, [self.banner, self.queue_label, self.elsewhere, self.browser_wait], self.servers_panel,
                self.remembered_panel, self.call_panel, self.result_view, self.results)
        self._wire()
        self.on_state_changed("connecting")
        self._refresh_waiting(0)

    def _wire(self) -> None:
        """The parts' signals: to each other, to the status bar, and out as this window's own."""
        show_status = self.statusBar().showMessage
        self.cards.answer_ready.connect(self.answer_ready)
        self.cards.answer_remembered.connect(self.answer_remembered)
        self.cards.answer_explained.connect(self.answer_explained)
        self.cards.answer_granted.connect(self.answer_granted)
        self.cards.accepted.connect(self._on_accepted)
        self.cards.arrived.connect(self.notifier.announce)
        self.cards.decline_all_requested.connect(self.declining.decline_all)
        self.cards.answer_not_taken.connect(self.browser_wait.forget)
        self.cards.status.connect(show_status)
        self.cards.waiting_changed.connect(self._refresh_waiting)
        self.call_panel.call_requested.connect(self.requests.call)
        self.call_panel.tools_wanted.connect(self.requests.request_tools)
        self.servers_panel.control_requested.connect(self.requests.control)
        self.servers_panel.reload_requested.connect(self.requests.reload)
        self.servers_panel.policy_requested.connect(self.declining.set)
        self.declining.policy_requested.connect(self.policy_requested)
        self.declining.status.connect(lambda text: show_status(text, STATUS_MS))
        self.sign_ins.redirect_requested.connect(self.requests.sign_in_redirect)
        self.requests.call_requested.connect(self.call_requested)
        self.requests.control_requested.connect(self.control_requested)
        self.requests.reload_requested.connect(self.reload_requested)
        self.requests.sign_in_redirect_requested.connect(self.sign_in_redirect_requested)
        self.requests.mcp_requested.connect(self.mcp_requested)
        self.tray.show_requested.connect(self.bring_forward)
        self.tray.quit_requested.connect(QApplication.quit)

    def show_web_devices(self) -> WebDevicesDialog:
        """Window ▸ Web devices…: the paired browsers, Revoke, Pair (with the link's QR code)."""
        dialog = WebDevicesDialog(self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        return dialog

    def attach(self, bridge: MainBridge) -> None:
        """Wire this window to a bridge, both ways."""
        self.cards.set_window_id(bridge.window_id)
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
        self.answer_explained.connect(lambda channel, action, content, reason:
                                      bridge.send_result(channel, action, content, reason=reason))
        self.answer_granted.connect(lambda channel, action, content, grant:
                                    bridge.send_result(channel, action, content, grant=grant))
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
        return self.cards.current_card()

    def queued_count(self) -> int:
        return self.cards.queued_count()

    def waiting_count(self) -> int:
        """Requests waiting for an answer in this window: the card on screen and the queue."""
        return self.cards.waiting_count()

    # ---- slots fed by the bridge ----------------------------------------------------------

    def on_state_changed(self, state: str) -> None:
        self.state_label.setText(state)
        self._reach.set_state(state)
        self._show_reachability()

    def on_main_missing(self, missing: bool) -> None:
        """main's connection file is gone (main stopped cleanly) or is back."""
        if missing and not self._reach.main_missing:
            self.cards.main_stopped()
        self._reach.main_missing = missing
        self._show_reachability()

    def on_connection_problem(self, problem: str) -> None:
        """The connection file is there but cannot be used (`problem` says why and how to fix it)."""
        self._reach.file_problem = problem
        self._show_reachability()

    def _show_reachability(self) -> None:
        reach = self._reach
        self.banner.say(reach.banner_text(attached_once=bool(self.cards.session)))
        self.servers_panel.set_reachable(reach.connected, reach.why_not)
        self.call_panel.set_connected(reach.connected)

    def on_welcomed(self, welcome: messages.Welcome) -> None:
        if welcome.session != self.cards.session:  # a (re)started main: its own policies
            self.declining.reset()
            self.browser_wait.clear()
        self._reach.welcomed()
        self._show_reachability()
        self.on_servers_changed(welcome.servers)
        self.cards.welcomed(welcome)
        self.notifier.keep_only(self.cards.open_channels())

    def on_servers_changed(self, servers: list[messages.ServerInfo]) -> None:
        self.servers_panel.set_servers(servers)
        self.call_panel.set_servers(servers)

    def on_peers_changed(self, peers: list[messages.PeerInfo]) -> None:
        self.hosts_label.set_peers(peers)
        self.cards.peers(peers)

    def on_invoked(self, invoke: messages.ElicitationInvoke) -> None:
        self.cards.invoked(invoke)

    def on_dismissed(self, dismiss: messages.ElicitationDismiss) -> None:
        self.cards.dismissed(dismiss)

    def on_completed(self, complete: messages.ElicitationComplete) -> None:
        """URL mode finished: close the matching URL card or "waiting for the browser" entry."""
        done = f"{complete.server}: the linked page reported it is done"
        self.sign_ins.completed(complete.elicitation_id)
        if self.cards.completed(complete.server, complete.elicitation_id, done):
            return
        if self.browser_wait.complete(complete.server, complete.elicitation_id):
            self.statusBar().showMessage(done, STATUS_MS)
        else:
            logger.debug("completion of %s/%s matches nothing here", complete.server, complete.elicitation_id)

    def on_noticed(self, notice: messages.Notice) -> None:
        text = f"[{notice.level}] " + (f"{notice.server}: " if notice.server else "") + notice.message
        self.statusBar().showMessage(text, STATUS_MS)
        self.results.appendPlainText(text)

    def on_replied(self, channel: str, reply: messages.ChannelReply) -> None:
        self.sign_ins.on_reply(channel, reply)
        self.requests.on_replied(channel, reply)

    def on_refused(self, notice: messages.ErrorNotice) -> None:
        if notice.topic == channels.MCP_REQUEST:  # e.g. a main without the extension
            self.requests.tools_unavailable(f"main refused it: {notice.message}")
            return
        if not self.cards.refused(notice):  # not an answer of ours (asked again, or just refused)
            self.statusBar().showMessage(refusal_text(notice.topic, notice.message), STATUS_MS)

    # ---- what the parts report ------------------------------------------------------------------

    def _on_accepted(self, card: Card) -> None:
        """A link opened here is waited for; a remote sign-in is finished by pasting its address."""
        if card.kind == URL and card.elicitation_id is not None \
                and card.invoke.kind != "question":  # a program's link gets no completion notice
            self.browser_wait.add(card.server, card.elicitation_id, card.invoke)
        if self.remote and is_sign_in(card.invoke):
            self.sign_ins.open(card.invoke)

    def _refresh_waiting(self, count: int) -> None:
        title = f"Elicitron — {self._name}" if self._name else "Elicitron"
        if count:
            title += f" ({count} waiting)"
        self.setWindowTitle(title)
        self.tray.set_waiting(count)

    # ---- showing and closing --------------------------------------------------------------------

    def bring_forward(self) -> None:
        """Show the window (also out of the tray) and put the card, if any, in front."""
        if self.isMinimized() or not self.isVisible():
            self.showNormal()
        self.raise_()
        self.activateWindow()
        self.cards.bring_forward()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.keep_in_tray.isChecked() and self.tray.available:
            # Stays attached in the tray: requests are announced and the card waits for a click.
            event.ignore()
            self.cards.hide_card()
            self.hide()
            return
        # Closing the window is not an answer: requests stay pending for other windows.
        self.cards.close_card()
        super().closeEvent(event)
