"""The servers panel: one row per MCP server (status, error, tools) and the buttons that act on it.

Rows: the server's name and status; for a failed or restarting server, its error (main sends the
last lines of its stderr) as a line under the row and as the row's tooltip; then its tools. The
selected server's error is also shown whole under the tree, wrapped and selectable (a tree row
cuts a long sentence to what fits its column, e.g. "FileNotFoundError: [Errno 2] No suc…"). The
buttons act on the selected server (Start / Stop / Restart, and "Ask again" after "Decline all
from <server>"); "Reload config" asks main to re-read its config. The panel only emits signals;
the window turns them into messages to main. While main is unreachable the buttons are disabled,
and when it is gone the rows say so instead of showing the last status main reported.
"""

import logging
from typing import Literal

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QBrush, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPushButton,
    QScrollArea,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from renderer_process.tones import ToneLabel, tone_colour
from shared import messages

logger = logging.getLogger(__name__)

ControlAction = Literal["start", "stop", "restart"]

ERROR_ROW = "error"
TOOL_ROW = "tool"
_KIND_ROLE = Qt.ItemDataRole.UserRole
_ERROR_SHOWN_FOR = ("failed", "restarting", "needs-sign-in")
_ERROR_LINES = 3  # under the row; the tooltip and the label under the tree hold everything main sent
_ERROR_BOX_LINES = 8  # the label under the tree scrolls beyond this
_STARTABLE = ("stopped", "failed", "needs-sign-in")  # Start on needs-sign-in signs in
DECLINING = "declining all"


class ServersPanel(QWidget):
    control_requested = Signal(str, str)  # server, "start" | "stop" | "restart"
    reload_requested = Signal()
    policy_requested = Signal(str, bool)  # server, decline_all

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._servers: dict[str, messages.ServerInfo] = {}
        self._declining: set[str] = set()
        self._reachable = True
        self._gone_reason = ""

        self.tree = QTreeWidget(self)
        self.tree.setObjectName("servers")
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["Server / tool", "Status"])
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(False)  # error rows may hold several lines

        self.error_box = _ErrorBox(self)  # the selected server's whole error
        self.error_label = self.error_box.label

        self.start_button = _button("Start", "server_start", self)
        self.stop_button = _button("Stop", "server_stop", self)
        self.restart_button = _button("Restart", "server_restart", self)
        self.allow_button = _button("Ask again", "server_allow", self)
        self.allow_button.setToolTip("Undo “Decline all” for this server: show its requests again")
        self.reload_button = _button("Reload config", "reload", self)
        self.reload_button.setToolTip("Ask main to re-read its mcpServers config")

        actions = QHBoxLayout()
        actions.addWidget(self.start_button)
        actions.addWidget(self.stop_button)
        actions.addWidget(self.restart_button)
        actions.addStretch(1)
        more = QHBoxLayout()
        more.addWidget(self.allow_button)
        more.addStretch(1)
        more.addWidget(self.reload_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.error_box)
        layout.addLayout(actions)
        layout.addLayout(more)

        self.tree.currentItemChanged.connect(lambda _now, _before: self._update_buttons())
        self.tree.currentItemChanged.connect(lambda _now, _before: self._show_error())
        self.start_button.clicked.connect(lambda: self._control("start"))
        self.stop_button.clicked.connect(lambda: self._control("stop"))
        self.restart_button.clicked.connect(lambda: self._control("restart"))
        self.allow_button.clicked.connect(self._allow)
        self.reload_button.clicked.connect(self.reload_requested.emit)
        self._update_buttons()

    # ---- state from the window ------------------------------------------------------------

    def set_servers(self, servers: list[messages.ServerInfo]) -> None:
        # Rebuilt whole (a handful of rows); keep expanded rows and the selection across updates.
        selected = self.selected_server()
        expanded = {row.text(0) for row in self._rows() if row.isExpanded()}
        first_time = not self._servers
        self._servers = {server.name: server for server in servers}
        self.tree.blockSignals(True)
        self.tree.clear()
        for server in servers:
            row = QTreeWidgetItem(self.tree, [server.name, self._status_text(server)])
            if server.error:
                for column in (0, 1):
                    row.setToolTip(column, f"{server.status}: {server.error}")
            if server.error and server.status in _ERROR_SHOWN_FOR:
                self._add_error_row(row, server.error)
            for tool in server.tools:
                child = QTreeWidgetItem(row, [tool, ""])
                child.setData(0, _KIND_ROLE, TOOL_ROW)
            row.setExpanded(first_time or server.name in expanded)
        self.tree.blockSignals(False)
        self.tree.resizeColumnToContents(0)
        rows = self._rows()
        keep = next((row for row in rows if row.text(0) == selected), rows[0] if rows else None)
        if keep is not None:
            self.tree.setCurrentItem(keep)
        self._update_buttons()
        self._show_error()

    def set_declining(self, servers: set[str]) -> None:
        """Servers whose requests main declines for this session (the user chose "Decline all")."""
        self._declining = set(servers)
        for row in self._rows():
            server = self._servers.get(row.text(0))
            if server is not None:
                row.setText(1, self._status_text(server))
        self._update_buttons()

    def set_reachable(self, reachable: bool, gone_reason: str = "") -> None:
        """Whether main can be asked anything now; `gone_reason` replaces every status shown."""
        changed = (reachable, gone_reason) != (self._reachable, self._gone_reason)
        self._reachable = reachable
        self._gone_reason = "" if reachable else gone_reason
        if changed:
            for row in self._rows():
                server = self._servers.get(row.text(0))
                if server is not None:
                    row.setText(1, self._status_text(server))
        self.reload_button.setEnabled(reachable)
        self._update_buttons()
        self._show_error()

    def selected_server(self) -> str:
        item = self.tree.currentItem()
        while item is not None and item.parent() is not None:
            item = item.parent()
        return item.text(0) if item is not None else ""

    # ---- internals --------------------------------------------------------------------------

    def _rows(self) -> list[QTreeWidgetItem]:
        found = [self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount())]
        return [row for row in found if row is not None]

    def _status_text(self, server: messages.ServerInfo) -> str:
        if self._gone_reason:
            return self._gone_reason
        return server.status + (f" · {DECLINING}" if server.name in self._declining else "")

    def _add_error_row(self, row: QTreeWidgetItem, error: str) -> None:
        lines = [line for line in error.splitlines() if line.strip()] or [error]
        shown = "\n".join(lines[-_ERROR_LINES:])
        item = QTreeWidgetItem(row, [shown])
        item.setData(0, _KIND_ROLE, ERROR_ROW)
        item.setFirstColumnSpanned(True)
        item.setForeground(0, QBrush(tone_colour("error", self.tree.palette())))
        item.setToolTip(0, error)
        item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsSelectable)

    def _show_error(self) -> None:
        """The selected server's error, all of it, under the tree (hidden when it has none)."""
        server = self._servers.get(self.selected_server())
        shown = server is not None and server.status in _ERROR_SHOWN_FOR and not self._gone_reason
        error = server.error if shown and server is not None else None
        self.error_box.show_error(server.name if server is not None else "", error or "")

    def _update_buttons(self) -> None:
        server = self._servers.get(self.selected_server()) if self._reachable else None
        self.start_button.setEnabled(server is not None and server.status in _STARTABLE)
        self.stop_button.setEnabled(server is not None and server.status != "stopped")
        self.restart_button.setEnabled(server is not None)
        self.allow_button.setVisible(server is not None and server.name in self._declining)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.ApplicationPaletteChange and self._servers:
            self.set_servers(list(self._servers.values()))  # error rows pick their colour again
        super().changeEvent(event)

    def _control(self, action: ControlAction) -> None:
        server = self.selected_server()
        if server:
            self.control_requested.emit(server, action)

    def _allow(self) -> None:
        server = self.selected_server()
        if server:
            self.policy_requested.emit(server, False)


class _ErrorBox(QScrollArea):
    """A server's error in full: wrapped to the panel's width and selectable, as tall as the text
    up to _ERROR_BOX_LINES lines, and scrolling beyond that (a long traceback)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("server_error_box")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.label = ToneLabel("error", self)
        self.label.setObjectName("server_error")
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # stderr is never markup
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.setWidget(self.label)
        self.hide()

    def show_error(self, server: str, error: str) -> None:
        self.label.setText(error)
        self.label.setAccessibleName(f"Error of server {server}" if server else "Server error")
        self.setVisible(bool(error))
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()  # a new width wraps the text anew

    def _fit(self) -> None:
        width = self.viewport().width()
        needed = self.label.heightForWidth(width) if width > 0 else self.label.sizeHint().height()
        cap = self.label.fontMetrics().lineSpacing() * _ERROR_BOX_LINES
        height = max(min(needed, cap), self.label.fontMetrics().lineSpacing())
        if (height, height) != (self.minimumHeight(), self.maximumHeight()):
            self.setFixedHeight(height)


def _button(text: str, name: str, parent: QWidget) -> QPushButton:
    button = QPushButton(text, parent)
    button.setObjectName(name)
    return button
