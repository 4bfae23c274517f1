"""The editable part of a form card: one row per property, and whether the answer is valid.

Validity uses shared.schema, the same rules main applies to every accepted answer, so what Accept
sends is exactly what main would take.

A problem is shown (red, under its field, and in `shown_problems`) once the user has edited that
field or tried to submit (`try_submit`), never before: an empty required field is marked (a `*`
beside its label, "(required)" in its accessible name) but not flagged while nobody has typed
yet, which read as a scolding before anything was done (issue 37).
"""

import logging
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QFormLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from renderer_process.fields import MISSING, Field, build_field
from renderer_process.tones import ToneLabel
from shared.errors import InvalidContentError
from shared.schema import property_problems, validate_content

logger = logging.getLogger(__name__)


class FormBody(QWidget):
    """Fields built from a supported requestedSchema; emits `checked` after each edit and each
    attempt to submit (what is valid and what is shown may have changed)."""

    checked = Signal()

    def __init__(self, schema: Mapping[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._schema = schema
        self._required: list[str] = list(schema.get("required", []))
        self.fields: dict[str, Field] = {}
        self._titles: dict[str, str] = {}
        self._errors: dict[str, QLabel] = {}
        self._valid = False
        self._edited: set[str] = set()  # fields the user changed: their problems show
        self._tried = False  # the user tried to submit: every problem shows
        self.content: dict[str, Any] = {}
        self.problems: list[str] = []  # every problem of the answer as it is
        self.shown_problems: list[str] = []  # those the user is shown now
        self._problem_keys: list[str] = []  # the fields with a problem, in form order

        form = QFormLayout(self)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        for key, prop in schema.get("properties", {}).items():
            self._add_row(form, str(key), prop)
        self.refresh()

    def _add_row(self, form: QFormLayout, key: str, prop: Mapping[str, Any]) -> None:
        required = key in self._required
        field = build_field(key, prop, required, self)
        self.fields[key] = field
        title = str(prop.get("title") or key)
        self._titles[key] = title

        label = QLabel(title + (" *" if required else ""), self)
        label.setObjectName(f"label:{key}")
        label.setTextFormat(Qt.TextFormat.PlainText)  # titles come from the server: never markup
        label.setBuddy(field.widget)

        cell = QWidget(self)
        # Expanding, so ExpandingFieldsGrow gives every cell the full field column and wrapped
        # descriptions are measured at that width instead of the widget's own (a checkbox's).
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        cell.setSizePolicy(policy)
        column = QVBoxLayout(cell)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        if isinstance(field.widget, QCheckBox):
            column.addWidget(field.widget, 0, Qt.AlignmentFlag.AlignLeft)  # the click area stays the box
        else:
            column.addWidget(field.widget)
        description_text = str(prop.get("description") or "")
        if description_text:
            description = _plain_label(description_text, f"description:{key}", cell)
            description.setStyleSheet("color: palette(placeholder-text);")
            column.addWidget(description)
            field.widget.setToolTip(description_text)
        field.describe(title + (" (required)" if required else ""), description_text)
        error = ToneLabel("error", cell)
        error.setObjectName(f"error:{key}")
        error.setTextFormat(Qt.TextFormat.PlainText)
        error.setWordWrap(True)
        error.hide()
        column.addWidget(error)
        self._errors[key] = error

        form.addRow(label, cell)
        field.changed.connect(lambda: self._on_edited(key))

    @property
    def is_valid(self) -> bool:
        return self._valid

    def first_field(self) -> QWidget | None:
        """The widget that should hold the focus when the form appears (None for an empty form)."""
        first = next(iter(self.fields.values()), None)
        return first.focus_widget if first is not None else None

    def _on_edited(self, key: str) -> None:
        self._edited.add(key)
        self.refresh()

    def try_submit(self) -> QWidget | None:
        """The user tries to submit: every problem shows from now on. The widget to focus (the
        first field with a problem), or None when the answer is valid."""
        self._tried = True
        self.refresh()
        if self._valid:
            return None
        key = next(iter(self._problem_keys), None)
        field = self.fields.get(key) if key is not None else next(iter(self.fields.values()), None)
        return field.focus_widget if field is not None else None

    def refresh(self) -> None:
        """Collect content from the fields and judge it; cheap enough to run on every keystroke."""
        content: dict[str, Any] = {}
        per_field: dict[str, str] = {}
        for key, field in self.fields.items():
            problem = field.parse_problem()
            value = MISSING if problem else field.value()
            if value is MISSING:
                if problem or key in self._required:
                    per_field[key] = problem or "is required"
                continue
            content[key] = value
            found = _property_problems(field.prop, value)
            if found:
                per_field[key] = "; ".join(found)
        problems = [f"{self._titles[k]}: {p}" for k, p in per_field.items()]
        if not problems:
            try:
                validate_content(self._schema, content)  # the final word: main runs exactly this
            except InvalidContentError as exc:
                problems = exc.problems
            except (TypeError, ValueError, OverflowError) as exc:
                problems = [_BROKEN_SCHEMA]
                logger.warning("cannot check an answer against this schema: %s", exc)
        shown = {key: problem for key, problem in per_field.items() if self._tried or key in self._edited}
        for key, label in self._errors.items():
            label.setText(shown.get(key, ""))
            label.setVisible(key in shown)
        self.content = content
        self.problems = problems
        self._problem_keys = list(per_field)
        if self._tried or (per_field.keys() <= self._edited and self._edited):
            self.shown_problems = problems  # each one the user's to see (the whole-answer ones too)
        else:
            self.shown_problems = [f"{self._titles[k]}: {p}" for k, p in shown.items()]
        self._valid = not problems
        self.checked.emit()


_BROKEN_SCHEMA = "the schema has limits that cannot be checked (such as a minimum that is no number)"


def _property_problems(prop: Mapping[str, Any], value: Any) -> list[str]:
    """A property's problems; a schema whose limits are not even comparable (a hostile
    `minimum: "x"`) makes the answer unacceptable instead of raising inside a Qt slot."""
    try:
        return property_problems(prop, value)
    except (TypeError, ValueError, OverflowError) as exc:
        logger.warning("cannot check a value against its property schema: %s", exc)
        return [_BROKEN_SCHEMA]


def _plain_label(text: str, name: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName(name)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    return label
