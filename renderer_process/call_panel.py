"""The tool-call panel: pick a server and tool, type JSON arguments, press Call.

It only checks the input and emits `call_requested`; it never talks to main itself.
"""

import json
import logging
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from shared import messages

logger = logging.getLogger(__name__)


class CallPanel(QWidget):
    call_requested = Signal(str, str, object)  # server, tool, arguments dict

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._tools: dict[str, list[str]] = {}

        self.server_combo = QComboBox(self)
        self.server_combo.setObjectName("call_server")
        self.tool_combo = QComboBox(self)
        self.tool_combo.setObjectName("call_tool")
        self.arguments = QPlainTextEdit(self)
        self.arguments.setObjectName("call_arguments")
        self.arguments.setPlaceholderText('JSON object, e.g. {"name": "Ada"}  (empty = {})')
        self.arguments.setMaximumHeight(90)
        self.call_button = QPushButton("Call", self)
        self.call_button.setObjectName("call")
        self.error = QLabel(self)
        self.error.setObjectName("call_error")
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b00020;")
        self.error.hide()

        form = QFormLayout()
        form.addRow("Server", self.server_combo)
        form.addRow("Tool", self.tool_combo)
        form.addRow("Arguments", self.arguments)
        row = QHBoxLayout()
        row.addWidget(self.error, 1)
        row.addWidget(self.call_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addLayout(row)

        self.server_combo.currentTextChanged.connect(self._fill_tools)
        self.call_button.clicked.connect(self._on_call)
        self.arguments.textChanged.connect(self.error.hide)
        self._update_button()

    def set_servers(self, servers: list[messages.ServerInfo]) -> None:
        chosen_server, chosen_tool = self.server_combo.currentText(), self.tool_combo.currentText()
        self._tools = {server.name: list(server.tools) for server in servers}
        self.server_combo.blockSignals(True)  # refill without a flurry of tool refills
        self.server_combo.clear()
        self.server_combo.addItems(list(self._tools))
        if chosen_server in self._tools:
            self.server_combo.setCurrentText(chosen_server)
        self.server_combo.blockSignals(False)
        self._fill_tools(self.server_combo.currentText())
        if chosen_tool in self._tools.get(self.server_combo.currentText(), []):
            self.tool_combo.setCurrentText(chosen_tool)

    def _fill_tools(self, server: str) -> None:
        self.tool_combo.clear()
        self.tool_combo.addItems(self._tools.get(server, []))
        self._update_button()

    def _update_button(self) -> None:
        self.call_button.setEnabled(bool(self.server_combo.currentText() and self.tool_combo.currentText()))

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    def _on_call(self) -> None:
        server, tool = self.server_combo.currentText(), self.tool_combo.currentText()
        if not (server and tool):
            self.show_error("Choose a server and a tool first.")
            return
        text = self.arguments.toPlainText().strip()
        try:
            arguments: Any = json.loads(text) if text else {}
        except json.JSONDecodeError as exc:
            self.show_error(
                f"Arguments are not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})."
            )
            return
        if not isinstance(arguments, dict):
            self.show_error('Arguments must be a JSON object, like {"key": "value"}.')
            return
        self.show_error("")
        self.call_requested.emit(server, tool, arguments)
