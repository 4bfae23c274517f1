"""ApprovalCard: a host wants to call a tool; the user allows it once, for this session, always, or
denies it. When main offers grants (`approval.grants`), "for this session" and "always" become
"Allow as chosen" with a GrantBox (grant_box.py): which arguments, how long, one call only.

It is drawn for an invoke with `kind: "approval"` and an `approval` block; the request itself is a
plain form with one enum property `decision`, and this card answers exactly that form (accept with
`{decision}`), so main cannot tell it from any v1 window's answer. What it shows: which host, which
server and tool, the tool's title and description, its annotations as plain warnings, and the
arguments one per row with long values folded, and an optional "Reason (sent to the agent)" that
goes with a deny (`reason_for`: the result's `reason`, to the model whose call it was). Esc or
closing means cancel, which main takes as a deny. Same contract as ElicitationCard towards the window: `answered(action, content)` exactly
once, `close_silently()`, `set_waiting_text()`.
"""

import html
import json
import logging
from typing import Any, Final

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from renderer_process.grant_box import GrantBox
from renderer_process.long_text import LongText, full_text_box, preview
from shared import messages, tool_hints
from shared.denial_reason import REASON_MAX_CHARS, clean_reason
from shared.window_core import quorum_text

logger = logging.getLogger(__name__)

APPROVAL = "approval"
FOLD_CHARS: Final = 240  # a value longer than this shows folded, with "Show all"
_BUTTONS: Final = (
    ("allow-once", "Allow once", "approve_once"),
    ("allow-session", "Allow for this session", "approve_session"),
    ("allow-always", "Always allow", "approve_always"),
    ("deny", "Deny", "deny"),
)
_GRANT_BUTTONS: Final = (  # when main offers grants: the grant box says what the allow covers
    ("allow-once", "Allow once", "approve_once"),
    ("grant", "Allow as chosen", "approve_grant"),
    ("deny", "Deny", "deny"),
)


def is_approval(invoke: messages.ElicitationInvoke) -> bool:
    return invoke.kind == APPROVAL and invoke.approval is not None


def fold(text: str, limit: int = FOLD_CHARS) -> tuple[str, bool]:
    """(what to show, whether it was folded): long text keeps its start and says how much is hidden."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)", True


def value_text(value: Any) -> str:
    """An argument as a person reads it: strings as they are, everything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=None, default=str)


class FoldedValue(QWidget):
    """One argument's value; a long one folded, with a button to show all of it."""

    def __init__(self, key: str, value: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = value_text(value)
        self._short, folded = fold(self._full)
        self.label = QLabel(self._short, self)
        self.label.setObjectName(f"argument:{key}")
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # arguments come from a model: never markup
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.toggle = QToolButton(self)
        self.toggle.setObjectName(f"unfold:{key}")
        self.toggle.setText("Show all")
        self.toggle.setVisible(folded)
        self.toggle.clicked.connect(self._flip)
        self._box: QPlainTextEdit | None = None  # the whole of a very long value, made when unfolded
        row = self._rows = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label, 1)
        row.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignTop)

    def _flip(self) -> None:
        if preview(self._full)[1]:  # too long for a label to lay out at once: the capped box
            self._flip_box()
            return
        unfolded = self.label.text() == self._full
        self.label.setText(self._short if unfolded else self._full)
        self.toggle.setText("Show all" if unfolded else "Fold")

    def _flip_box(self) -> None:
        if self._box is None:
            self._box = full_text_box(self._full, f"{self.label.objectName()}_full", self)
            self._rows.insertWidget(1, self._box, 1)
            self._box.hide()
        unfolding = not self._box.isVisible()
        self._box.setVisible(unfolding)
        self.label.setVisible(not unfolding)
        self.toggle.setText("Fold" if unfolding else "Show all")


class ApprovalCard(QDialog):
    answered = Signal(str, object)  # action, content ({"decision": ...}) or None
    decline_all_requested = Signal(str)  # the window connects it on every card; an approval never emits it

    def __init__(self, invoke: messages.ElicitationInvoke, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        assert invoke.approval is not None
        self.invoke = invoke
        self.kind = APPROVAL
        self.server = invoke.request.server
        self._finished = False
        info = invoke.approval
        host = invoke.via or "A host"
        self.setObjectName("card")
        self.setModal(True)
        self.setMinimumWidth(480)
        self.setWindowTitle(f"{host} wants to call {info.tool}")

        layout = QVBoxLayout(self)
        header = QLabel(f"<b>{html.escape(host)}</b> wants to call <b>{html.escape(info.tool)}</b> "
                        f"on <b>{html.escape(info.server)}</b>", self)
        header.setObjectName("header")
        header.setTextFormat(Qt.TextFormat.RichText)
        header.setWordWrap(True)
        layout.addWidget(header)
        about = "\n".join(part for part in (info.title, info.description) if part)
        if about:  # the server's words: bounded, like a card's message
            layout.addWidget(LongText(about, "about", self))
        warnings = _plain("\n".join(f"⚠ {w}" for w in tool_hints.warnings(info.annotations)), "warnings", self)
        warnings.setStyleSheet("color: #8a4b00;")
        layout.addWidget(warnings)

        arguments = QWidget(self)
        form = QFormLayout(arguments)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        self.values: dict[str, FoldedValue] = {}
        for key, value in info.arguments.items():
            self.values[key] = FoldedValue(str(key), value, arguments)
            key_label = QLabel(str(key), arguments)
            key_label.setTextFormat(Qt.TextFormat.PlainText)
            form.addRow(key_label, self.values[key])
        if not info.arguments:
            form.addRow(QLabel("(no arguments)", arguments))
        scroll = QScrollArea(self)
        scroll.setObjectName("arguments")
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(arguments)
        scroll.setMinimumHeight(min(arguments.sizeHint().height() + 4, 360))
        layout.addWidget(QLabel("Arguments:", self))
        layout.addWidget(scroll, 1)

        reason_row = QHBoxLayout()
        reason_row.addWidget(QLabel("Reason (sent to the agent):", self))
        self.reason = QLineEdit(self)
        self.reason.setObjectName("deny_reason")
        self.reason.setMaxLength(REASON_MAX_CHARS)
        self.reason.setPlaceholderText("optional, if you deny")
        self.reason.setToolTip(f"Goes to {host} with the denial, so its agent can act on it; Allow sends nothing")
        reason_row.addWidget(self.reason, 1)
        layout.addLayout(reason_row)

        self.quorum = QLabel(self)  # "1 of 2 approvals (ana)": a config rule's quorum
        self.quorum.setObjectName("quorum")
        self.quorum.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.quorum)
        self.recount(invoke)

        self.grant: GrantBox | None = None  # what an allow covers, when main offers grants (a quorum's never)
        if info.grants is not None and invoke.quorum is None:
            self.grant = GrantBox(info, info.grants, self)
            layout.addWidget(self.grant)

        self.waiting = QLabel(self)
        self.waiting.setObjectName("waiting")
        self.waiting.hide()
        layout.addWidget(self.waiting)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.buttons: dict[str, QPushButton] = {}
        for decision, text, name in _BUTTONS if self.grant is None else _GRANT_BUTTONS:
            button = QPushButton(text, self)
            button.setObjectName(name)
            button.setAutoDefault(False)  # Enter must not decide for the user
            button.clicked.connect(lambda _checked=False, d=decision: self._decide(d))
            buttons.addWidget(button)
            self.buttons[decision] = button
        tool = f"{info.server}/{info.tool}"
        if self.grant is not None:
            self.buttons["grant"].setToolTip(f"Run {tool} now, and as the line above says without asking")
            self.grant.changed.connect(lambda: self.buttons["grant"].setEnabled(self._grant_ready()))
            self.buttons["grant"].setEnabled(self._grant_ready())
        else:
            self.buttons["allow-session"].setToolTip(f"Run {tool} now and whenever {host} calls it again until "
                                                     "main stops; another host is still asked")
            self.buttons["allow-always"].setToolTip(f"Run {tool} now and whenever any host calls it, until you "
                                                    "revoke it in the Remembered panel")
        layout.addLayout(buttons)

    @property
    def elicitation_id(self) -> str | None:
        return None

    def _decide(self, decision: str) -> None:
        if decision == "grant":
            assert self.grant is not None
            decision = self.grant.decision()
        self._finish("accept", {"decision": decision})

    def _grant_ready(self) -> bool:
        return self.grant is not None and self.grant.ready()

    def grant_for(self, action: str, content: object) -> messages.GrantChoice | None:
        """The grant chosen in the box, with "Allow as chosen"; None with any other answer."""
        if self.grant is None or action != "accept" or not isinstance(content, dict):
            return None
        decision = content.get(messages.DECISION_PROPERTY)
        return self.grant.choice() if decision in ("allow-session", "allow-always") else None

    def reason_for(self, action: str, content: object) -> str | None:
        """The reason typed, with a deny (Deny, or Esc); an allow sends none."""
        allowed = action == "accept" and isinstance(content, dict) and content.get(messages.DECISION_PROPERTY) != "deny"
        return None if allowed else clean_reason(self.reason.text())

    def recount(self, invoke: messages.ElicitationInvoke) -> None:
        """Show a quorum approval's count (hidden when the call needs one person's answer)."""
        self.invoke = invoke
        self.quorum.setText(quorum_text(invoke.quorum) if invoke.quorum is not None else "")
        self.quorum.setVisible(invoke.quorum is not None)

    def set_waiting_text(self, text: str) -> None:
        self.waiting.setText(text)
        self.waiting.setVisible(bool(text))

    def _finish(self, action: str, content: dict[str, Any] | None) -> None:
        if self._finished:
            return
        self._finished = True
        logger.info("approval %s answered %s", self.invoke.response_channel, content or action)
        self.answered.emit(action, content)
        self.done(QDialog.DialogCode.Accepted if action == "accept" else QDialog.DialogCode.Rejected)

    def reject(self) -> None:
        """Esc and the close button: a cancel, which main takes as a deny."""
        self._finish("cancel", None)
        super().reject()

    def close_silently(self) -> None:
        self._finished = True
        self.done(QDialog.DialogCode.Rejected)


def _plain(text: str, name: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(name)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    return label
