"""The tool-call panel: pick a server and a tool, fill in its arguments, press Call.

The arguments are a form built from the tool's inputSchema (tool_form.ToolForm), or JSON. The
panel learns the schemas through `tools_wanted(server)`, which the window turns into a
`tools/list` request; it asks for the selected server's tools when it needs them and again
after a `servers` update changes that server's tool names. It only checks the input and emits
`call_requested`; it never talks to main itself.
"""

import logging
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from renderer_process.tones import ToneLabel
from renderer_process.tool_form import ToolForm
from shared import messages

logger = logging.getLogger(__name__)

LOADING = "Loading the tool's arguments…"


class CallPanel(QWidget):
    call_requested = Signal(str, str, object)  # server, tool, arguments dict
    tools_wanted = Signal(str)  # server whose tools (with their schemas) the panel needs

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._names: dict[str, list[str]] = {}  # server -> tool names, from main's servers list
        self._ready: set[str] = set()
        self._details: dict[str, dict[str, dict[str, Any]]] = {}  # server -> name -> tools/list entry
        self._details_for: dict[str, tuple[str, ...]] = {}  # the names a server had when asked
        self._asking: dict[str, tuple[str, ...]] = {}  # tools/list in flight, with those names
        self._failed: dict[str, str] = {}
        self._connected = True

        self.server_combo = QComboBox(self)
        self.server_combo.setObjectName("call_server")
        self.server_combo.setAccessibleName("Server")
        self.tool_combo = QComboBox(self)
        self.tool_combo.setObjectName("call_tool")
        self.tool_combo.setAccessibleName("Tool")
        self.tool_form = ToolForm(self)
        self.call_button = QPushButton("Call", self)
        self.call_button.setObjectName("call")
        self.error = ToneLabel("error", self)
        self.error.setObjectName("call_error")
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setWordWrap(True)
        self.error.hide()

        form = QFormLayout()
        form.addRow("Server", self.server_combo)
        form.addRow("Tool", self.tool_combo)
        row = QHBoxLayout()
        row.addWidget(self.error, 1)
        row.addStretch(0)  # the button keeps its size while the error line is hidden
        row.addWidget(self.call_button, 0, Qt.AlignmentFlag.AlignRight)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addWidget(self.tool_form, 1)
        layout.addLayout(row)

        self.server_combo.currentTextChanged.connect(self._fill_tools)
        self.tool_combo.currentTextChanged.connect(lambda _name: self._show_tool())
        self.call_button.clicked.connect(self._on_call)
        self.tool_form.changed.connect(self._on_form_changed)
        self._update_button()

    # ---- what main says --------------------------------------------------------------------

    def set_servers(self, servers: list[messages.ServerInfo]) -> None:
        chosen_server, chosen_tool = self.server_combo.currentText(), self.tool_combo.currentText()
        self._names = {server.name: list(server.tools) for server in servers}
        self._ready = {server.name for server in servers if server.status == "ready"}
        for gone in set(self._details) - set(self._names):
            del self._details[gone]
        self.server_combo.blockSignals(True)  # refill without a flurry of tool refills
        self.server_combo.clear()
        self.server_combo.addItems(list(self._names))
        if chosen_server in self._names:
            self.server_combo.setCurrentText(chosen_server)
        self.server_combo.blockSignals(False)
        self.tool_combo.blockSignals(True)
        self._fill_tool_names(self.server_combo.currentText())
        if chosen_tool in self._names.get(self.server_combo.currentText(), []):
            self.tool_combo.setCurrentText(chosen_tool)
        self.tool_combo.blockSignals(False)
        self._want_tools()
        self._show_tool()

    def set_tools(self, server: str, tools: list[dict[str, Any]]) -> None:
        """The server's tools/list answer (all pages)."""
        self._details_for[server] = self._asking.pop(server, tuple(self._names.get(server, [])))
        self._details[server] = {str(t.get("name")): t for t in tools if isinstance(t, dict)}
        self._failed.pop(server, None)
        self._want_tools()  # its names changed while we asked: ask again
        if server == self.server_combo.currentText():
            self._show_tool()

    def set_tools_failed(self, server: str, message: str) -> None:
        self._asking.pop(server, None)
        self._failed[server] = message
        if server == self.server_combo.currentText():
            self._show_tool()

    def set_connected(self, connected: bool) -> None:
        """Without main nothing can be called: everything is disabled until it is back."""
        self._connected = connected
        self.server_combo.setEnabled(connected)
        self.tool_combo.setEnabled(connected)
        self.tool_form.setEnabled(connected)
        if connected:
            self._want_tools()
        self._update_button()

    def asking(self) -> list[str]:
        """Servers whose tools/list is in flight."""
        return list(self._asking)

    # ---- internals --------------------------------------------------------------------------

    def _want_tools(self) -> None:
        server = self.server_combo.currentText()
        names = tuple(self._names.get(server, []))
        fresh = server in self._details and self._details_for.get(server) == names
        if not server or server not in self._ready or fresh or server in self._asking or not self._connected:
            return
        if server in self._failed and self._details_for.get(server) == names:
            return  # it failed for these names; a names change (or a restart) asks again
        self._asking[server] = names
        self._details_for[server] = names
        self.tools_wanted.emit(server)

    def _fill_tools(self, server: str) -> None:
        self._fill_tool_names(server)
        self._want_tools()
        self._show_tool()

    def _fill_tool_names(self, server: str) -> None:
        self.tool_combo.clear()
        self.tool_combo.addItems(self._names.get(server, []))

    def _show_tool(self) -> None:
        server, name = self.server_combo.currentText(), self.tool_combo.currentText()
        details = self._details.get(server, {})
        if not name:
            self.tool_form.show_tool(None)
        elif name in details:
            self.tool_form.show_tool(details[name])
        elif server in self._failed:
            self.tool_form.show_tool(
                {"name": name},
                f"Arguments as JSON: the tool's details are unavailable ({self._failed[server]}).",
            )
        elif server in self._asking:
            self.tool_form.show_tool({"name": name}, LOADING)
        else:
            self.tool_form.show_tool({"name": name}, "Arguments as JSON.")
        self._update_button()

    def _on_form_changed(self) -> None:
        self.error.hide()
        self._update_button()

    def _update_button(self) -> None:
        # Enabled whenever a tool is chosen: pressing it with arguments that don't fit says why
        # (the form's problems are listed under it all along).
        chosen = bool(self.server_combo.currentText() and self.tool_combo.currentText())
        self.call_button.setEnabled(self._connected and chosen)

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    def _on_call(self) -> None:
        server, tool = self.server_combo.currentText(), self.tool_combo.currentText()
        if not (server and tool):
            self.show_error("Choose a server and a tool first.")
            return
        arguments, problem = self.tool_form.arguments()
        if arguments is None:
            self.show_error(problem)
            return
        self.show_error("")
        self.call_requested.emit(server, tool, arguments)
