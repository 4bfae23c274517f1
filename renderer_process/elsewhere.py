"""The "waiting in another window" list: requests that belong to another attached window.

A request whose `origin` is another attached renderer (its tool call was made there) is answered
there; this window only lists it, oldest first, naming the server, its message and the window,
with an "Answer here" button that makes this window show it as its card instead.
"""

import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from renderer_process.long_text import preview
from shared.window_core import Elsewhere, elsewhere_text

logger = logging.getLogger(__name__)


class ElsewhereList(QFrame):
    answer_here = Signal(str)  # response channel

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("elsewhere")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self._title = QLabel(self)
        self._title.setObjectName("elsewhere_title")
        self._title.setStyleSheet("font-weight: bold;")
        self._rows = QVBoxLayout()
        self._rows.setContentsMargins(0, 0, 0, 0)
        layout = QVBoxLayout(self)
        layout.addWidget(self._title)
        layout.addLayout(self._rows)
        self.hide()

    def set_items(self, items: list[Elsewhere]) -> None:
        """The requests and the windows they wait in, shown in the given order; empty hides the list."""
        while self._rows.count():
            old = self._rows.takeAt(0)
            widget = old.widget() if old is not None else None
            if widget is not None:
                widget.hide()
                widget.deleteLater()
        for item in items:
            row = self._row(item)
            self._rows.addWidget(row)
            row.show()  # now, not on the layout's queued show: the list is read right away
        count = len(items)
        self._title.setText(
            f"{count} waiting in another window" if count != 1 else "1 waiting in another window"
        )
        self.setVisible(bool(items))

    def _row(self, item: Elsewhere) -> QWidget:
        invoke = item.invoke
        row = QWidget(self)
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 0, 0, 0)
        label = QLabel(elsewhere_text(item), row)
        label.setObjectName("elsewhere_item")
        label.setTextFormat(Qt.TextFormat.PlainText)  # server text is never markup
        label.setWordWrap(True)
        label.setToolTip(preview(str(invoke.request.params.get("message", "")))[0])  # a tooltip lays it all out
        button = QPushButton("Answer here", row)
        button.setObjectName("answer_here")
        button.setToolTip("Show this request in this window instead")
        channel = invoke.response_channel
        button.clicked.connect(lambda: self.answer_here.emit(channel))
        line.addWidget(label, 1)
        line.addWidget(button)
        return row
