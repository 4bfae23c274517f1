"""One input widget per requestedSchema property, each able to say what value it holds.

Every field answers two questions the card asks on each edit: `value()` (MISSING when the user
left it empty, so the key is omitted rather than sent as "") and `parse_problem()` (text that
cannot become the schema's type at all, such as "abc" in an integer field). Everything else
(lengths, ranges, formats, required keys) is judged by shared.schema, the same rules main applies.
"""

import datetime
import logging
import math
import re
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import QDate, QDateTime, QObject, Qt, QTime, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QDateTimeEdit,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QWidget,
)

from shared.schema import enum_options, multi_options

logger = logging.getLogger(__name__)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""What value() returns for a field the user left empty: its key is left out of content."""

NO_CHOICE = "—"
_INTEGER = re.compile(r"^[+-]?\d+$")
QT_INT_MAX = 2**31 - 1  # Qt takes lengths and counts as C ints: anything larger overflows


def clamp_to_qt_int(value: int, low: int = 0) -> int:
    """`value` within what a Qt int parameter takes (a schema may say `maxLength: 2**40`)."""
    return max(low, min(value, QT_INT_MAX))


def widget_max_length(prop: Mapping[str, Any], default: Any) -> int | None:
    """The longest text the QLineEdit may hold: the schema's maxLength clamped to a C int, or
    room for a default longer than QLineEdit's own 32767 limit; None keeps Qt's default."""
    value = prop.get("maxLength")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return clamp_to_qt_int(value)
    if isinstance(default, str) and len(default) > _LINE_EDIT_DEFAULT_MAX:
        return clamp_to_qt_int(len(default))
    return None


_LINE_EDIT_DEFAULT_MAX = 32767


class Field(QObject):
    """Base of the field adapters: holds the editor widget and reports edits via `changed`."""

    changed = Signal()

    def __init__(self, key: str, prop: Mapping[str, Any], required: bool, parent: QWidget) -> None:
        super().__init__(parent)
        self.key = key
        self.prop = prop
        self.required = required
        self.has_default = "default" in prop
        self.default: Any = prop.get("default")

    @property
    def widget(self) -> QWidget:
        """What the card puts in the form row."""
        raise NotImplementedError

    @property
    def focus_widget(self) -> QWidget:
        """What takes the keyboard focus when the card opens on this field."""
        return self.widget

    def describe(self, name: str, description: str) -> None:
        """Name the field for screen readers (its title) and describe it (the schema's description)."""
        self.widget.setAccessibleName(name)
        self.widget.setAccessibleDescription(description)

    def value(self) -> Any:
        raise NotImplementedError

    def parse_problem(self) -> str | None:
        return None

    def _name(self, widget: QWidget, suffix: str = "") -> None:
        widget.setObjectName(f"field:{self.key}{suffix}")


class TextField(Field):
    """Plain strings and the email/uri formats: a QLineEdit."""

    def __init__(self, key: str, prop: Mapping[str, Any], required: bool, parent: QWidget) -> None:
        super().__init__(key, prop, required, parent)
        self.edit = QLineEdit(parent)
        self._name(self.edit)
        max_length = widget_max_length(prop, self.default)
        if max_length is not None:
            self.edit.setMaxLength(max_length)
        self.edit.setPlaceholderText(_text_hint(prop))
        if self.has_default and isinstance(self.default, str):
            self.edit.setText(self.default)
        self.edit.textChanged.connect(self.changed)

    @property
    def widget(self) -> QWidget:
        return self.edit

    def value(self) -> Any:
        text = self.edit.text()
        if text:
            return text
        # Empty means "no answer"; only a required field whose server asked for "" sends "".
        return "" if self.required and self.has_default and self.default == "" else MISSING


class NumberField(Field):
    """number and integer: a QLineEdit, so an optional one can be cleared; integers stay ints."""

    def __init__(
        self, key: str, prop: Mapping[str, Any], required: bool, parent: QWidget, *, integer: bool
    ) -> None:
        super().__init__(key, prop, required, parent)
        self.integer = integer
        self.edit = QLineEdit(parent)
        self._name(self.edit)
        self.edit.setPlaceholderText(_number_hint(prop, integer))
        if self.has_default and isinstance(self.default, int | float) and not isinstance(self.default, bool):
            # int stays int (float() of a huge int overflows); a float like 3.0 shows as 3 for integers
            shown = self.default
            if integer and isinstance(shown, float) and shown.is_integer():
                shown = int(shown)
            self.edit.setText(_number_text(shown))
        self.edit.textChanged.connect(self.changed)

    @property
    def widget(self) -> QWidget:
        return self.edit

    def _parse(self) -> tuple[Any, str | None]:
        text = self.edit.text().strip()
        if not text:
            return MISSING, None
        if _INTEGER.match(text):
            try:
                return int(text), None
            except ValueError:  # Python refuses to convert more than 4300 digits
                return MISSING, "has too many digits"
        if self.integer:
            return MISSING, "must be a whole number"
        try:
            number = float(text)
        except ValueError:
            return MISSING, "must be a number"
        if not math.isfinite(number):
            return MISSING, "must be a finite number"
        return number, None

    def value(self) -> Any:
        return self._parse()[0]

    def parse_problem(self) -> str | None:
        return self._parse()[1]


class BooleanField(Field):
    """A QCheckBox; it always has an answer (checked or not), so it is never omitted."""

    def __init__(self, key: str, prop: Mapping[str, Any], required: bool, parent: QWidget) -> None:
        super().__init__(key, prop, required, parent)
        self.check = QCheckBox(parent)
        self._name(self.check)
        self.check.setChecked(self.default is True)
        self.check.toggled.connect(self.changed)

    @property
    def widget(self) -> QWidget:
        return self.check

    def value(self) -> Any:
        return self.check.isChecked()


class SingleSelectField(Field):
    """enum, enum+enumNames and oneOf: a QComboBox; a "—" entry stands for no choice."""

    def __init__(self, key: str, prop: Mapping[str, Any], required: bool, parent: QWidget) -> None:
        super().__init__(key, prop, required, parent)
        options = enum_options(prop) or []
        self.combo = QComboBox(parent)
        self._name(self.combo)
        # Values stay in Python (not Qt item data) so 1, 1.0 and "1" keep their types.
        self.values: list[Any] = []
        default_known = self.has_default and any(_same(v, self.default) for v, _ in options)
        if not required or not default_known:  # never pick for the user unless the server did
            self.combo.addItem(NO_CHOICE)
            self.values.append(MISSING)
        for option_value, label in options:
            self.combo.addItem(label)
            self.values.append(option_value)
        if default_known:
            self.combo.setCurrentIndex(next(i for i, v in enumerate(self.values) if _same(v, self.default)))
        self.combo.currentIndexChanged.connect(self.changed)

    @property
    def widget(self) -> QWidget:
        return self.combo

    def value(self) -> Any:
        index = self.combo.currentIndex()
        return self.values[index] if 0 <= index < len(self.values) else MISSING


class MultiSelectField(Field):
    """Arrays of enum / anyOf items: a QListWidget of check boxes; always sends its list."""

    def __init__(self, key: str, prop: Mapping[str, Any], required: bool, parent: QWidget) -> None:
        super().__init__(key, prop, required, parent)
        self.list = QListWidget(parent)
        self._name(self.list)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.values: list[Any] = []
        chosen = self.default if isinstance(self.default, list) else []
        for option_value, label in multi_options(prop):
            item = QListWidgetItem(label, self.list)
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
            checked = any(_same(option_value, c) for c in chosen)
            item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
            self.values.append(option_value)
        rows = max(1, min(len(self.values), 6))
        row_height = max(self.list.sizeHintForRow(0), self.list.fontMetrics().height() + 4)
        self.list.setFixedHeight(row_height * rows + 2 * self.list.frameWidth() + 4)  # no scrolling for ≤ 6
        self.list.itemChanged.connect(lambda _item: self.changed.emit())

    @property
    def widget(self) -> QWidget:
        return self.list

    def value(self) -> Any:
        return [
            v
            for row, v in enumerate(self.values)
            if self.list.item(row).checkState() == Qt.CheckState.Checked
        ]


class _DateLikeField(Field):
    """date and date-time: an editor plus a "set" box, so no date is ever sent unchosen."""

    def __init__(
        self, key: str, prop: Mapping[str, Any], required: bool, parent: QWidget, edit: QDateTimeEdit
    ) -> None:
        super().__init__(key, prop, required, parent)
        self.box = QWidget(parent)
        layout = QHBoxLayout(self.box)
        layout.setContentsMargins(0, 0, 0, 0)
        self.set_box = QCheckBox("set", self.box)
        self._name(self.set_box, ":set")
        self.edit = edit
        self._name(self.edit)
        self.edit.setCalendarPopup(True)
        layout.addWidget(self.set_box)
        layout.addWidget(self.edit, 1)
        self.set_box.setChecked(self._show_default())
        self.edit.setEnabled(self.set_box.isChecked())
        self.set_box.toggled.connect(self.edit.setEnabled)
        self.set_box.toggled.connect(self.changed)

    def _show_default(self) -> bool:
        raise NotImplementedError

    @property
    def widget(self) -> QWidget:
        return self.box

    @property
    def focus_widget(self) -> QWidget:
        return self.set_box

    def describe(self, name: str, description: str) -> None:
        super().describe(name, description)
        self.set_box.setAccessibleName(f"{name}: set a value")
        self.edit.setAccessibleName(name)
        self.edit.setAccessibleDescription(description)


class DateField(_DateLikeField):
    def __init__(self, key: str, prop: Mapping[str, Any], required: bool, parent: QWidget) -> None:
        edit = QDateEdit(QDate.currentDate(), parent)
        edit.setDisplayFormat("yyyy-MM-dd")
        super().__init__(key, prop, required, parent, edit)
        edit.dateChanged.connect(self.changed)

    def _show_default(self) -> bool:
        if not (self.has_default and isinstance(self.default, str)):
            return False
        try:
            day = datetime.date.fromisoformat(self.default)
        except ValueError:
            logger.info("ignoring default %r of date field %r", self.default, self.key)
            return False
        self.edit.setDate(QDate(day.year, day.month, day.day))
        return True

    def value(self) -> Any:
        if not self.set_box.isChecked():
            return MISSING
        day = self.edit.date()
        return datetime.date(day.year(), day.month(), day.day()).isoformat()


class DateTimeField(_DateLikeField):
    """Shown in local time; sent as ISO 8601 with the local UTC offset (the format needs a zone)."""

    def __init__(self, key: str, prop: Mapping[str, Any], required: bool, parent: QWidget) -> None:
        now = QDateTime.currentDateTime()
        now.setTime(QTime(now.time().hour(), now.time().minute()))
        edit = QDateTimeEdit(now, parent)
        edit.setDisplayFormat("yyyy-MM-dd HH:mm")
        super().__init__(key, prop, required, parent, edit)
        edit.dateTimeChanged.connect(self.changed)

    def _show_default(self) -> bool:
        if not (self.has_default and isinstance(self.default, str)):
            return False
        try:
            moment = datetime.datetime.fromisoformat(self.default)
        except ValueError:
            logger.info("ignoring default %r of date-time field %r", self.default, self.key)
            return False
        if moment.tzinfo is not None:
            moment = moment.astimezone().replace(tzinfo=None)  # to local wall-clock time
        self.edit.setDateTime(QDateTime(moment))
        return True

    def value(self) -> Any:
        if not self.set_box.isChecked():
            return MISSING
        shown = self.edit.dateTime()
        day, clock = shown.date(), shown.time()
        local = datetime.datetime(day.year(), day.month(), day.day(), clock.hour(), clock.minute())
        return local.astimezone().isoformat()  # naive local time -> aware, with the local offset


def build_field(key: str, prop: Mapping[str, Any], required: bool, parent: QWidget) -> Field:
    """The field adapter for one property of a schema that passed shared.schema.check_schema."""
    kind = prop.get("type")
    if kind == "array":
        return MultiSelectField(key, prop, required, parent)
    if enum_options(prop) is not None:
        return SingleSelectField(key, prop, required, parent)
    if kind == "boolean":
        return BooleanField(key, prop, required, parent)
    if kind in ("number", "integer"):
        return NumberField(key, prop, required, parent, integer=kind == "integer")
    fmt = prop.get("format")
    if fmt == "date":
        return DateField(key, prop, required, parent)
    if fmt == "date-time":
        return DateTimeField(key, prop, required, parent)
    return TextField(key, prop, required, parent)


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python; a schema's default must match an option's type too.
    return type(a) is type(b) and a == b


def _number_text(number: float) -> str:
    try:
        return str(number)
    except ValueError:  # Python refuses ints of more than 4300 digits: no default shown then
        return ""


def _text_hint(prop: Mapping[str, Any]) -> str:
    hints = {"email": "name@example.com", "uri": "https://…"}
    parts = [hints[prop["format"]]] if prop.get("format") in hints else []
    low, high = prop.get("minLength"), prop.get("maxLength")
    if low is not None and high is not None:
        parts.append(f"{low} to {high} characters")
    elif low is not None:
        parts.append(f"at least {low} characters")
    elif high is not None:
        parts.append(f"at most {high} characters")
    return ", ".join(parts)


def _number_hint(prop: Mapping[str, Any], integer: bool) -> str:
    noun = "whole number" if integer else "number"
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and high is not None:
        return f"{noun}, {low} to {high}"
    if low is not None:
        return f"{noun}, at least {low}"
    if high is not None:
        return f"{noun}, at most {high}"
    return noun
