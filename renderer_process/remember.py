"""'Remember my answer' on a form card: not at all, for this session, always, or until a date.

A form card built with `Offers(remember=True)` puts the box just above its answer buttons and
reads it (`choice_for(action)`) when it is answered. The choice goes to main as the result's `remember` extension field: the next time the same server asks the same
question, main answers it the same way without asking, until the rule is revoked (Remembered panel,
`elicitron rules revoke`) or its date passes. Only accept and decline are remembered.
"""

import datetime
from typing import Final

from PySide6.QtCore import QDate, Qt
from PySide6.QtWidgets import QComboBox, QDateEdit, QHBoxLayout, QLabel, QWidget

from shared import messages

_CHOICES: Final = (
    ("Don't remember", None),
    ("Remember for this session", "session"),
    ("Remember always", "always"),
    ("Remember until…", "until"),
)
DEFAULT_UNTIL_DAYS: Final = 7


class RememberBox(QWidget):
    def __init__(self, server: str, parent: QWidget | None = None, *, asker: bool = False) -> None:
        """`server`: who asks; `asker`: a program (`elicitron ask`), whose remembered answers are
        its own and never answer a server of that name."""
        super().__init__(parent)
        self.setObjectName("remember")
        self.scope = QComboBox(self)
        self.scope.setObjectName("remember_scope")
        for text, scope in _CHOICES:
            self.scope.addItem(text, scope)
        who = f"the program {server}" if asker else f"the server {server}"
        self.scope.setToolTip(f"Next time {who} asks exactly this, answer the same way without asking. "
                              "Revoke it any time in the Remembered panel.")
        self.until = QDateEdit(self)
        self.until.setObjectName("remember_until")
        self.until.setCalendarPopup(True)
        self.until.setMinimumDate(QDate.currentDate())
        self.until.setDate(QDate.currentDate().addDays(DEFAULT_UNTIL_DAYS))
        self.until.hide()
        label = QLabel(f"Remember my answer to {who}:", self)
        label.setObjectName("remember_label")
        label.setTextFormat(Qt.TextFormat.PlainText)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(label)
        row.addWidget(self.scope)
        row.addWidget(self.until)
        row.addStretch(1)
        self.scope.currentIndexChanged.connect(lambda _i: self.until.setVisible(self.scope.currentData() == "until"))

    def choice_for(self, action: str) -> messages.Remember | None:
        """What to remember with this answer: None for a cancel (only accept and decline are
        remembered) or when "Don't remember" is chosen."""
        scope = self.scope.currentData()
        if scope is None or action not in ("accept", "decline"):
            return None
        if scope != "until":
            return messages.Remember(scope=scope)
        picked = self.until.date()
        day = datetime.date(picked.year(), picked.month(), picked.day())
        return messages.Remember(scope="until", until=end_of_day_ms(day))


def end_of_day_ms(day: datetime.date) -> int:
    """The last millisecond of `day`, local time: "until May 3" includes May 3."""
    last = datetime.datetime.combine(day, datetime.time(23, 59, 59, 999_000)).astimezone()
    return int(last.timestamp() * 1000)

