"""The editable part of a form card: one row per property, and whether the answer is valid.

Validity uses shared.schema, the same rules main applies to every accepted answer, so Accept is
enabled exactly when main would take the content.
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
    """Fields built from a supported requestedSchema; emits `validity_changed` after each edit."""

    validity_changed = Signal(bool)

    def __init__(self, schema: Mapping[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._schema = schema
        self._required: list[str] = list(schema.get("required", []))
        self.fields: dict[str, Field] = {}
        self._titles: dict[str, str] = {}
        self._errors: dict[str, QLabel] = {}
        self._valid = False
        self.content: dict[str, Any] = {}
        self.problems: list[str] = []

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
        field.changed.connect(self.refresh)

    @property
    def is_valid(self) -> bool:
        return self._valid

    def first_field(self) -> QWidget | None:
        """The widget that should hold the focus when the form appears (None for an empty form)."""
        first = next(iter(self.fields.values()), None)
        return first.focus_widget if first is not None else None

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
        for key, label in self._errors.items():
            label.setText(per_field.get(key, ""))
            label.setVisible(key in per_field)
        self.content = content
        self.problems = problems
        valid = not problems
        if valid != self._valid:
            self._valid = valid
            self.validity_changed.emit(valid)


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
