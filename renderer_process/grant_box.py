"""GrantBox: on an approval card, what an allow covers besides the call on the card (a grant).

One compact row: which arguments (these exact ones, arguments like these, any) × how long (this
session, an hour, until a date, always) × one call only; the pattern main proposed for "arguments
like these", one editable glob per argument; and one line that says what the grant will cover
(shared/grant_text.py, the words `elicitron rules` and the Remembered panel use). Shown only when
main offers grants (`approval.grants`); a pattern that does not cover the call on the card says so
and cannot be sent (`ready()` is False).
"""

import datetime
from typing import Final

from PySide6.QtCore import QDate, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDateEdit,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from renderer_process.remember import DEFAULT_UNTIL_DAYS, end_of_day_ms
from shared import grant_pattern, grant_text, messages
from shared.messages import GrantArguments, GrantDuration

ARGUMENT_TITLES: Final[dict[str, str]] = {"exact": "these exact arguments", "pattern": "arguments like these",
                                          "any": "any arguments"}
DURATION_TITLES: Final[dict[str, str]] = {"session": "for this session", "hour": "for an hour",
                                          "until": "until…", "always": "always"}


class GrantBox(QWidget):
    changed = Signal()  # the choice or its summary changed

    def __init__(self, info: messages.ApprovalInfo, offer: messages.GrantOffer, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("grant")
        self._info = info
        self.arguments = QComboBox(self)
        self.arguments.setObjectName("grant_arguments")
        for scope in offer.arguments:
            self.arguments.addItem(ARGUMENT_TITLES.get(scope, scope), scope)
        self.duration = QComboBox(self)
        self.duration.setObjectName("grant_duration")
        for duration in offer.durations:
            self.duration.addItem(DURATION_TITLES.get(duration, duration), duration)
        self.until = QDateEdit(self)
        self.until.setObjectName("grant_until")
        self.until.setCalendarPopup(True)
        self.until.setMinimumDate(QDate.currentDate())
        self.until.setDate(QDate.currentDate().addDays(DEFAULT_UNTIL_DAYS))
        self.single_use = QCheckBox("one call only", self)
        self.single_use.setObjectName("grant_single_use")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Or allow", self))
        row.addWidget(self.arguments)
        row.addWidget(self.duration)
        row.addWidget(self.until)
        row.addWidget(self.single_use)
        row.addStretch(1)

        self.pattern = QWidget(self)  # one glob per argument, as main proposed it
        self.pattern.setObjectName("grant_pattern")
        globs = QFormLayout(self.pattern)
        globs.setContentsMargins(0, 0, 0, 0)
        self.globs: dict[str, QLineEdit] = {}
        for name in info.arguments:
            edit = QLineEdit(offer.pattern.get(name, ""), self.pattern)
            edit.setObjectName(f"pattern:{name}")
            edit.setToolTip("* matches anything, ? one character; the whole value must match")
            edit.textChanged.connect(self._update)
            label = QLabel(f"{name} like", self.pattern)
            label.setTextFormat(Qt.TextFormat.PlainText)
            globs.addRow(label, edit)
            self.globs[name] = edit

        self.summary = QLabel(self)
        self.summary.setObjectName("grant_summary")
        self.summary.setTextFormat(Qt.TextFormat.PlainText)  # argument values come from a model: never markup
        self.summary.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.pattern)
        layout.addWidget(self.summary)
        for combo in (self.arguments, self.duration):
            combo.currentIndexChanged.connect(self._update)
        self.until.dateChanged.connect(self._update)
        self.single_use.toggled.connect(self._update)
        self._update()

    def choice(self) -> messages.GrantChoice:
        scope: GrantArguments = self.arguments.currentData()
        duration: GrantDuration = self.duration.currentData()
        return messages.GrantChoice(
            arguments=scope, duration=duration, single_use=self.single_use.isChecked(),
            pattern=self._pattern() if scope == "pattern" else None,
            until=self._until_ms() if duration == "until" else None)

    def decision(self) -> messages.ApprovalDecision:
        """The decision that goes with the grant (what a v1 reader of the audit sees)."""
        return "allow-session" if self.duration.currentData() == "session" else "allow-always"

    def ready(self) -> bool:
        """False while the pattern does not cover the call on the card (main would refuse it)."""
        return self.arguments.currentData() != "pattern" or not grant_pattern.uncovered(self._pattern(),
                                                                                        self._info.arguments)

    def _pattern(self) -> dict[str, str]:
        return {name: edit.text() for name, edit in self.globs.items()}

    def _until_ms(self) -> int:
        picked = self.until.date()
        return end_of_day_ms(datetime.date(picked.year(), picked.month(), picked.day()))

    def _update(self) -> None:
        choice = self.choice()
        self.pattern.setVisible(choice.arguments == "pattern" and bool(self.globs))
        self.until.setVisible(choice.duration == "until")
        missed = grant_pattern.uncovered(self._pattern(), self._info.arguments) if choice.arguments == "pattern" else []
        if missed:
            self.summary.setText(f"The pattern does not cover this call: {', '.join(missed)}")
        else:
            self.summary.setText(grant_text.covers(self._info.tool, choice.arguments, choice.pattern,
                                                   grant_text.duration_text(choice.duration, choice.until),
                                                   choice.single_use))
        self.changed.emit()
