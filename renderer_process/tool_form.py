"""One tool's title, description and arguments: a form built from its inputSchema, or raw JSON.

The form reuses the elicitation card's field widgets (form_body.FormBody) on the schema that
tool_schema derives; "Edit as JSON" is always there for a tool that has a form, and JSON is the
only editor for a tool whose schema the form can't express (the panel says why) or whose schema
is not known (yet). Editing the JSON, even while the form is showing, makes JSON the editor: what
the user typed last is what is sent, never a hidden editor's content. As on a card, a field's
problem shows once it was edited or Call was pressed (which then focuses the first such field):
an empty required argument is marked, not flagged, before anything was typed.
"""

import json
import logging
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from renderer_process.form_body import FormBody
from renderer_process.tones import ToneLabel
from renderer_process.tool_schema import ArgumentForm, argument_form, arguments_from, with_values

logger = logging.getLogger(__name__)

_FORM_PAGE, _JSON_PAGE = 0, 1
_MAX_FORM_HEIGHT = 360


class ToolForm(QWidget):
    changed = Signal()  # the arguments or their validity changed

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._plan = ArgumentForm(schema=None)
        self._form: FormBody | None = None
        self._tool: dict[str, Any] | None = None
        self._filling = False  # our own setPlainText is not the user editing the JSON

        self.title = _label("tool_title", self)
        self.title.setStyleSheet("font-weight: bold;")
        self.description = _label("tool_description", self)
        self.description.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note = _label("tool_note", self)
        self.note.setStyleSheet("color: palette(placeholder-text);")
        self.as_json = QCheckBox("Edit as JSON", self)
        self.as_json.setObjectName("arguments_as_json")
        self.as_json.setToolTip("Type the arguments as a JSON object instead of using the form")
        self.form_area = QScrollArea(self)
        self.form_area.setObjectName("arguments_form")
        self.form_area.setWidgetResizable(True)
        self.form_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self.raw = QPlainTextEdit(self)
        self.raw.setObjectName("call_arguments")
        self.raw.setAccessibleName("Arguments as JSON")
        self.raw.setPlaceholderText('JSON object, e.g. {"name": "Ada"}  (empty = {})')
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.form_area)
        self.stack.addWidget(self.raw)
        self.problems = ToneLabel("error", self)
        self.problems.setObjectName("arguments_problems")
        self.problems.setTextFormat(Qt.TextFormat.PlainText)
        self.problems.setWordWrap(True)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.title, self.description, self.note, self.as_json, self.stack, self.problems):
            layout.addWidget(widget)
        self.as_json.toggled.connect(self._on_toggle)
        self.raw.textChanged.connect(self._on_raw_edited)
        self.show_tool(None)

    # ---- what is shown -----------------------------------------------------------------------

    def show_tool(self, tool: dict[str, Any] | None, note: str = "") -> None:
        """Show `tool` (an entry of tools/list; without `inputSchema`, only its name is known) or,
        with None, nothing but the JSON editor; `note` says why there is no form.
        Shown again for the same tool (its schema arrived or changed), JSON the user is editing stays."""
        same_tool = _name(tool) == _name(self._tool)
        keep_json = same_tool and self.json_mode and bool(self.raw.toPlainText().strip())
        if not same_tool:
            self._filling = True
            self.raw.clear()
            self._filling = False
        self._tool = tool
        known = tool is not None and "inputSchema" in tool  # else: only its name, details not (yet) known
        self._plan = argument_form(tool["inputSchema"]) if tool is not None and known else ArgumentForm(None)
        annotations = tool.get("annotations") if tool else None
        title = str(tool.get("title") or (annotations or {}).get("title") or _name(tool)) if tool else ""
        self.title.setText(title)
        self.title.setVisible(bool(title))
        description = str(tool.get("description") or "") if tool else ""
        self.description.setText(description.strip())
        self.description.setVisible(bool(description.strip()))
        if known and self._plan.schema is None:
            note = f"Arguments as JSON: this tool's arguments can't be shown as a form ({self._plan.reason})."
        self.note.setText(note)
        self.note.setVisible(bool(note))
        self._build_form(self._plan.schema)
        self.as_json.setEnabled(self._form is not None)
        self.as_json.setVisible(self._form is not None)
        self._set_json_mode(keep_json or self._form is None, fill=False)

    def _build_form(self, schema: dict[str, Any] | None) -> None:
        old = self.form_area.takeWidget()
        if old is not None:
            old.deleteLater()
        self._form = None
        if schema is None:
            return
        form = FormBody(schema)
        if not form.fields:
            form.setToolTip("This tool takes no arguments")
            empty = QLabel("This tool takes no arguments.", form)
            empty.setObjectName("no_arguments")
            form.layout().addWidget(empty)  # type: ignore[union-attr]
        self._form = form
        self.form_area.setWidget(form)
        self.form_area.setMinimumHeight(min(form.sizeHint().height() + 4, _MAX_FORM_HEIGHT))
        form.checked.connect(self._report)  # after each edit and each Call pressed on it

    @property
    def form(self) -> FormBody | None:
        """The argument form, when the tool has one (shown or not)."""
        return self._form

    @property
    def json_mode(self) -> bool:
        return self.stack.currentIndex() == _JSON_PAGE

    def first_field(self) -> QWidget | None:
        return self._form.first_field() if self._form is not None and not self.json_mode else None

    # ---- the arguments -----------------------------------------------------------------------

    def arguments(self) -> tuple[dict[str, Any] | None, str]:
        """(the call's arguments, "") or (None, why they can't be sent)."""
        if not self.json_mode and self._form is not None:
            first_problem = self._form.try_submit()
            if not self._form.is_valid:
                if first_problem is not None:
                    first_problem.setFocus(Qt.FocusReason.OtherFocusReason)
                    self.form_area.ensureWidgetVisible(first_problem)
                return None, "Not called: " + "; ".join(self._form.problems)
            return arguments_from(self._plan, self._form.content), ""
        text = self.raw.toPlainText().strip()
        try:
            arguments: Any = json.loads(text) if text else {}
        except json.JSONDecodeError as exc:
            return None, f"Arguments are not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})."
        if not isinstance(arguments, dict):
            return None, 'Arguments must be a JSON object, like {"key": "value"}.'
        return arguments, ""

    # ---- form <-> JSON ------------------------------------------------------------------------

    def _on_toggle(self, checked: bool) -> None:
        if checked == self.json_mode:
            return
        if checked:
            self._set_json_mode(True, fill=True)
            return
        arguments, problem = self.arguments()
        schema = with_values(self._plan, arguments) if arguments is not None else None
        if schema is None:  # stay in JSON and say why
            self.as_json.blockSignals(True)
            self.as_json.setChecked(True)
            self.as_json.blockSignals(False)
            self.problems.setText(problem or "These arguments don't fit the form; fix them here first.")
            self.problems.show()
            return
        self._build_form(schema)
        self._set_json_mode(False, fill=False)

    def _set_json_mode(self, on: bool, *, fill: bool) -> None:
        if on and fill and self._form is not None:
            arguments = arguments_from(self._plan, self._form.content)
            self._filling = True
            self.raw.setPlainText(json.dumps(arguments, indent=2, ensure_ascii=False) if arguments else "")
            self._filling = False
        self.stack.setCurrentIndex(_JSON_PAGE if on else _FORM_PAGE)
        self.as_json.blockSignals(True)
        self.as_json.setChecked(on and self._form is not None)
        self.as_json.blockSignals(False)
        self._report()

    def _on_raw_edited(self) -> None:
        if self._filling:
            return
        if not self.json_mode:  # typed (or set) while the form showed: the JSON is what counts now
            self._set_json_mode(True, fill=False)
        self.problems.hide()
        self.changed.emit()

    def _report(self) -> None:
        problems = self._form.shown_problems if self._form is not None and not self.json_mode else []
        self.problems.setText("To call: " + "; ".join(problems) if problems else "")
        self.problems.setVisible(bool(problems))
        self.changed.emit()

    def show_problem(self, text: str) -> None:
        self.problems.setText(text)
        self.problems.setVisible(bool(text))


def _name(tool: dict[str, Any] | None) -> str:
    return str(tool.get("name", "")) if tool else ""


def _label(name: str, parent: QWidget) -> QLabel:
    label = QLabel(parent)
    label.setObjectName(name)
    label.setTextFormat(Qt.TextFormat.PlainText)  # tool text comes from the server: never markup
    label.setWordWrap(True)
    return label
