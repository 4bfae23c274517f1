"""The line across the top of the window about main: gone (and how to start it), lost, or a file to fix.

`Reachability` (no Qt) keeps what the bridge said of main (connected, missing, why its connection
file cannot be used) and words the banner; `ConnectionBanner` only shows that text.
"""

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QWidget

from renderer_process.connection_status import CONNECTED
from shared.command_name import elicitron_command

MAIN_GONE_TEXT = (
    "main is not running: it was stopped (elicitron stop), or has not been started. Its servers "
    "are stopped too, and no request can reach this window. To start it again, run "
    "`{command} launch --no-window`; this window reconnects by itself."
)
MAIN_LOST_TEXT = "Lost contact with main; reconnecting… Nothing can be sent to it until it answers."
FILE_PROBLEM_TEXT = "This window cannot use its connection file: {problem}. It tries again every second."


@dataclass
class Reachability:
    """What the window knows of main's reachability, and the banner it calls for."""

    connected: bool = False
    main_missing: bool = False
    file_problem: str = ""  # why the connection file cannot be used, if it cannot

    def set_state(self, state: str) -> None:
        self.connected = state == CONNECTED

    def welcomed(self) -> None:
        self.connected = True
        self.main_missing = False

    @property
    def why_not(self) -> str:
        """Why the servers cannot be acted on beyond "not connected", for the servers panel."""
        return "main not running" if self.main_missing else ""

    def banner_text(self, attached_once: bool) -> str:
        if self.connected:
            return ""
        if self.file_problem:
            return FILE_PROBLEM_TEXT.format(problem=self.file_problem.rstrip("."))
        if self.main_missing:
            return MAIN_GONE_TEXT.format(command=elicitron_command())
        if attached_once:  # contact was lost
            return MAIN_LOST_TEXT
        return ""  # still connecting for the first time: the status bar says so


class ConnectionBanner(QFrame):
    """A line across the top of the window, hidden while it has nothing to say."""

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
