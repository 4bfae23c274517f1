"""BrowserWait: "waiting for the browser", the URL requests accepted here whose page has not reported done.

Keyed by (server, elicitationId), the pair main's completion notice names; "Stop waiting" forgets
them all (the page may never report).
"""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from renderer_process.long_text import preview
from shared import messages


class BrowserWait(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._waits: dict[tuple[str, str], messages.ElicitationInvoke] = {}
        self.setObjectName("url_waiting")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel(self)
        self.label.setObjectName("url_waiting_text")
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.clear_button = QPushButton("Stop waiting", self)
        self.clear_button.setObjectName("url_waiting_clear")
        self.clear_button.clicked.connect(self.clear)
        layout = QHBoxLayout(self)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.clear_button)
        self.hide()

    def add(self, server: str, elicitation_id: str, invoke: messages.ElicitationInvoke) -> None:
        self._waits[(server, elicitation_id)] = invoke
        self._show()

    def complete(self, server: str, elicitation_id: str) -> bool:
        """The page reported done: True if this window was waiting for it."""
        if self._waits.pop((server, elicitation_id), None) is None:
            return False
        self._show()
        return True

    def forget(self, invoke: messages.ElicitationInvoke) -> None:
        """main did not take the answer: the request is asked again, not waited for."""
        for key, item in list(self._waits.items()):
            if item.response_channel == invoke.response_channel:
                del self._waits[key]
        self._show()

    def clear(self) -> None:
        self._waits.clear()
        self._show()

    def _show(self) -> None:
        lines = [
            f"Waiting for the browser: {item.request.server} — "
            f"{preview(str(item.request.params.get('message', '')), 1, 200)[0]}"
            for item in self._waits.values()
        ]
        self.label.setText("\n".join(lines))
        self.setVisible(bool(self._waits))
