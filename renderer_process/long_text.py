"""Text a server or a program sent, shown within bounds, whatever its size.

A QLabel lays out all of its text at once, on the GUI thread: a 200 KB question of newlines took
a card ~19 s to show, the window stopped answering main, and main took it for gone. So a card
shows a preview, and the whole text only when asked, in a box that lays out only what is visible:

    preview(text)   at most MAX_LINES lines and MAX_CHARS characters, and whether anything was cut
    LongText        the preview in a label; when it was cut, "Show all (N lines, M characters)"
                    opens the whole text, read-only and selectable, in a scrolling box of capped
                    height (built on that click, not before)
    full_text_box   that box, for other widgets that fold text (an approval's arguments)
"""

import re
from typing import Final

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

MAX_LINES: Final = 20
MAX_CHARS: Final = 2000
FULL_TEXT_MAX_HEIGHT: Final = 320  # px: the whole text scrolls inside the card, the card stays put

# What Qt's text layout breaks lines at, besides \n (a label counts them as lines too).
_LINE_BREAK: Final = re.compile("\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
# Wrapping a line at word boundaries costs Qt seconds once a word is this long (a 200 KB token):
# such text wraps anywhere instead.
_LONG_WORD: Final = re.compile(r"\S{1000}")


def preview(text: str, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> tuple[str, bool]:
    """(what to show, whether it was cut): the start of `text`, ending in "…" when cut."""
    shown = text[:max_chars]
    for n, found in enumerate(_LINE_BREAK.finditer(shown), start=1):
        if n == max_lines:
            shown = shown[:found.start()]
            break
    if len(shown) == len(text):
        return text, False
    return shown.rstrip() + "…", True


def line_count(text: str) -> int:
    return len(_LINE_BREAK.findall(text)) + 1


def full_text_box(text: str, name: str, parent: QWidget) -> QPlainTextEdit:
    """The whole of a long text: read-only, selectable, scrolling within FULL_TEXT_MAX_HEIGHT."""
    box = QPlainTextEdit(parent)
    box.setObjectName(name)
    box.setReadOnly(True)
    if _LONG_WORD.search(text):
        box.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
    box.setPlainText(text)
    box.setMaximumHeight(FULL_TEXT_MAX_HEIGHT)
    return box


class LongText(QWidget):
    """Plain text (never markup) with a bounded preview and the whole text a click away."""

    def __init__(self, text: str, name: str, parent: QWidget | None = None, *, accessible_name: str = "") -> None:
        super().__init__(parent)
        self.full_text = text
        shown, self.cut = preview(text)
        layout = self._layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel(shown, self)
        self.label.setObjectName(name)
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # text from a server or a program: never markup
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        if accessible_name:
            self.label.setAccessibleName(accessible_name)
        layout.addWidget(self.label)
        self.full: QPlainTextEdit | None = None  # made on the first "Show all"
        self.toggle = QPushButton(self._show_all_text(), self)
        self.toggle.setObjectName(f"{name}_show_all")
        self.toggle.setFlat(True)
        self.toggle.setVisible(self.cut)
        self.toggle.clicked.connect(self._flip)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)

    def _show_all_text(self) -> str:
        lines = line_count(self.full_text)
        return f"Show all ({lines:,} line{'s' if lines != 1 else ''}, {len(self.full_text):,} characters)"

    def _flip(self) -> None:
        if self.full is None:
            full = full_text_box(self.full_text, f"{self.label.objectName()}_full", self)
            full.setAccessibleName(self.label.accessibleName() or "Whole text")
            self._layout.insertWidget(1, full)
            self.full = full
            full.hide()
        showing = not self.full.isVisible()
        self.full.setVisible(showing)
        self.label.setVisible(not showing)
        self.toggle.setText("Show less" if showing else self._show_all_text())
