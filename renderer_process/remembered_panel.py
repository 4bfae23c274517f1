"""The Remembered panel: every rule main applies before asking, kept current by main's `rules` push.

One row per rule, wrapped to the panel's width: what it answers or allows and its scope; who made
it and when in its tooltip. Remembered answers and
approvals (made in a window) can be revoked, one or all; config rules are shown read-only (they
change only in the config file). The panel emits `revoke_requested(ids, revoke_all)` and shows what
main reported back (`on_reply`); the list itself changes when main pushes the new rules, in every
window at once.
"""

import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from shared import messages
from shared.rule_text import describe, scope_text, when, who

logger = logging.getLogger(__name__)

_ID_ROLE = Qt.ItemDataRole.UserRole
_READ_ONLY = "config rule: change it in the config file"


class RememberedPanel(QWidget):
    revoke_requested = Signal(object, bool)  # list of rule ids, revoke_all

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rules: dict[str, messages.RuleInfo] = {}
        self.list = QListWidget(self)
        self.list.setObjectName("remembered")
        self.list.setWordWrap(True)  # a narrow column wraps a long question instead of cutting it
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.empty = QLabel("Nothing remembered: every request is asked.", self)
        self.empty.setObjectName("remembered_empty")
        self.status = QLabel(self)
        self.status.setObjectName("remembered_status")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.status.hide()
        self.revoke_button = QPushButton("Revoke", self)
        self.revoke_button.setObjectName("rule_revoke")
        self.revoke_button.setToolTip("Forget the selected rule: its requests are asked again")
        self.revoke_all_button = QPushButton("Revoke all", self)
        self.revoke_all_button.setObjectName("rule_revoke_all")
        self.revoke_all_button.setToolTip("Forget every remembered answer and approval (config rules stay)")
        buttons = QHBoxLayout()
        buttons.addWidget(self.revoke_button)
        buttons.addStretch(1)
        buttons.addWidget(self.revoke_all_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.empty)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.status)
        layout.addLayout(buttons)
        self.list.currentItemChanged.connect(lambda _now, _before: self._update_buttons())
        self.revoke_button.clicked.connect(self._revoke_selected)
        self.revoke_all_button.clicked.connect(lambda: self.revoke_requested.emit([], True))
        self.set_rules([])

    def set_rules(self, rules: list[messages.RuleInfo]) -> None:
        selected = self.selected_rule()
        self._rules = {rule.id: rule for rule in rules}
        self.list.blockSignals(True)
        self.list.clear()
        for rule in rules:
            row = QListWidgetItem(f"{who(rule)}: {describe(rule)} · {scope_text(rule)}", self.list)
            row.setData(_ID_ROLE, rule.id)
            tip = f"{rule.id}: {describe(rule)}\nmade by {rule.created_by}, {when(rule.created_at)}"
            if rule.source == "config":
                tip += f"\n{_READ_ONLY}"
            if rule.source == "config" or not rule.applies:
                row.setForeground(QBrush(QColor("#666666")))
            row.setToolTip(tip)
            if rule.id == selected:
                self.list.setCurrentItem(row)
        self.list.blockSignals(False)
        self.empty.setVisible(not rules)
        self.list.setVisible(bool(rules))
        self._update_buttons()

    def rule_ids(self) -> list[str]:
        return list(self._rules)

    def rows(self) -> list[str]:
        """The rows as shown, top to bottom."""
        return [self.list.item(index).text() for index in range(self.list.count())]

    def selected_rule(self) -> str | None:
        item = self.list.currentItem()
        return item.data(_ID_ROLE) if item is not None else None

    def select(self, rule_id: str) -> None:
        for index in range(self.list.count()):
            item = self.list.item(index)
            if item.data(_ID_ROLE) == rule_id:
                self.list.setCurrentItem(item)

    def on_reply(self, _channel: str, reply: messages.ChannelReply) -> None:
        """main's answer to a revoke (any window's replies pass by; only `revoked` ones are ours)."""
        report = reply.revoked
        if report is None:
            return
        lines = [f"Revoked {', '.join(report.revoked)}." if report.revoked else "Nothing was revoked."]
        lines += [f"Not revoked: {problem}" for problem in report.refused]
        self.status.setText("\n".join(lines))
        self.status.setStyleSheet("color: #b00020;" if report.refused else "")
        self.status.show()

    def _update_buttons(self) -> None:
        rule = self._rules.get(self.selected_rule() or "")
        self.revoke_button.setEnabled(rule is not None and rule.source == "user")
        self.revoke_button.setToolTip(_READ_ONLY if rule is not None and rule.source == "config"
                                      else "Forget the selected rule: its requests are asked again")
        self.revoke_all_button.setEnabled(any(r.source == "user" for r in self._rules.values()))

    def _revoke_selected(self) -> None:
        rule_id = self.selected_rule()
        if rule_id is not None and rule_id in self._rules and self._rules[rule_id].source == "user":
            self.revoke_requested.emit([rule_id], False)
