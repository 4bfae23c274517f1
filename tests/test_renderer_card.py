"""ElicitationCard as a user meets it: what each field shows, when Accept works, what is answered."""

import datetime
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, Qt, QUrl
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QDateTimeEdit,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QWidget,
)
from pytestqt.qtbot import QtBot

from renderer_process import fields, form_body
from renderer_process.card import ElicitationCard
from renderer_process.screenshot import grab_widget
from renderer_process.time_left import now_ms
from shared import messages


def invoke_for(
    params: dict[str, Any], server: str = "demo", channel: str = "ch-1"
) -> messages.ElicitationInvoke:
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server=server, params=params),
        response_channel=channel,
        created_at=1,
        expires_at=None,
        origin=None,
    )


def form(
    properties: dict[str, Any], required: list[str] | None = None, message: str = "Please fill in"
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return {"mode": "form", "message": message, "requestedSchema": schema}


class Answers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, action: str, content: Any) -> None:
        self.calls.append((action, content))


OpenCard = Callable[..., tuple[ElicitationCard, "Answers"]]


@pytest.fixture
def open_card(qtbot: QtBot) -> OpenCard:
    def make(params: dict[str, Any], **kwargs: Any) -> tuple[ElicitationCard, Answers]:
        card = ElicitationCard(invoke_for(params), **kwargs)
        qtbot.addWidget(card)
        answers = Answers()
        card.answered.connect(answers)
        card.show()
        qtbot.waitExposed(card)
        return card, answers

    return make


def find[T: QObject](card: ElicitationCard, kind: type[T], name: str) -> T:
    widget = card.findChild(kind, name)
    assert widget is not None, f"no {kind.__name__} named {name!r}"
    return widget


def accept_button(card: ElicitationCard) -> QPushButton:
    return find(card, QPushButton, "accept")


def press_accept(qtbot: QtBot, card: ElicitationCard) -> None:
    qtbot.mouseClick(accept_button(card), Qt.MouseButton.LeftButton)


def type_into(qtbot: QtBot, edit: QLineEdit, text: str) -> None:
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Delete)
    qtbot.keyClicks(edit, text)


# ---- header, message, labels ---------------------------------------------------------------


def test_form_names_the_server_and_shows_message_titles_and_descriptions(open_card: OpenCard) -> None:
    card, _ = open_card(
        form(
            {
                "name": {"type": "string", "title": "Your name", "description": "As on your passport"},
                "nick": {"type": "string"},
            },
            required=["name"],
            message="Who are you?",
        )
    )
    assert "demo" in card.windowTitle()
    assert "<b>demo</b>" in find(card, QLabel, "header").text()
    assert find(card, QLabel, "message").text() == "Who are you?"
    assert find(card, QLabel, "label:name").text() == "Your name *"
    assert find(card, QLabel, "label:nick").text() == "nick"  # no title: the key
    assert find(card, QLabel, "description:name").text() == "As on your passport"


def test_server_text_is_never_rendered_as_markup(open_card: OpenCard) -> None:
    card, _ = open_card(form({"x": {"type": "string", "title": "<i>x</i>"}}, message="<b>bold?</b>"))
    assert find(card, QLabel, "message").textFormat() == Qt.TextFormat.PlainText
    assert find(card, QLabel, "label:x").textFormat() == Qt.TextFormat.PlainText


# ---- strings -------------------------------------------------------------------------------


def test_a_required_field_is_marked_not_flagged_until_accept_is_pressed(qtbot: QtBot, open_card: OpenCard) -> None:
    # Issue 37, item 8: the card opened with Accept disabled and "is required" in red under a field
    # nobody had typed in yet. Now the field is marked; pressing Accept says what is missing there,
    # focuses it, and sends nothing.
    card, answers = open_card(form({"name": {"type": "string", "title": "Name"}, "note": {"type": "string"}},
                                   ["name"]))
    qtbot.waitExposed(card)
    edit, error, problems = find(card, QLineEdit, "field:name"), find(card, QLabel, "error:name"), \
        find(card, QLabel, "problems")
    assert find(card, QLabel, "label:name").text() == "Name *" and edit.accessibleName() == "Name (required)"
    assert not error.isVisible() and not problems.isVisible()
    assert accept_button(card).isEnabled()
    find(card, QLineEdit, "field:note").setFocus()
    press_accept(qtbot, card)
    assert answers.calls == [] and card.isVisible()
    assert error.isVisible() and error.text() == "is required"
    assert problems.isVisible() and problems.text() == "To accept: Name: is required"
    qtbot.waitUntil(lambda: card.focusWidget() is edit, timeout=2000)
    assert not accept_button(card).isEnabled()  # until the field is filled in
    type_into(qtbot, edit, "Ada")
    assert accept_button(card).isEnabled() and not error.isVisible() and not problems.isVisible()
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"name": "Ada"})]


def test_string_lengths_gate_accept_and_explain_why(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"name": {"type": "string", "minLength": 3, "maxLength": 5}}, ["name"]))
    edit = find(card, QLineEdit, "field:name")
    type_into(qtbot, edit, "ab")
    assert not accept_button(card).isEnabled()
    assert "at least 3 characters" in find(card, QLabel, "error:name").text()
    type_into(qtbot, edit, "abcdefgh")
    assert edit.text() == "abcde"  # maxLength stops typing
    assert accept_button(card).isEnabled()
    assert not find(card, QLabel, "problems").isVisible()
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"name": "abcde"})]
    assert not card.isVisible()


def test_cleared_optional_string_is_omitted_not_sent_empty(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"note": {"type": "string", "default": "hello"}}))
    edit = find(card, QLineEdit, "field:note")
    assert edit.text() == "hello"
    type_into(qtbot, edit, "")
    assert accept_button(card).isEnabled()
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {})]


def test_required_string_with_empty_default_sends_empty(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"note": {"type": "string", "default": ""}}, ["note"]))
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"note": ""})]


@pytest.mark.parametrize(
    ("fmt", "bad", "good"),
    [("email", "not-an-email", "ada@example.com"), ("uri", "no scheme", "https://example.com/x")],
)
def test_email_and_uri_formats_are_validated(
    qtbot: QtBot, open_card: OpenCard, fmt: str, bad: str, good: str
) -> None:
    card, answers = open_card(form({"v": {"type": "string", "format": fmt}}, ["v"]))
    edit = find(card, QLineEdit, "field:v")
    type_into(qtbot, edit, bad)
    assert not accept_button(card).isEnabled()
    assert f"not a valid {fmt}" in find(card, QLabel, "error:v").text()
    type_into(qtbot, edit, good)
    assert accept_button(card).isEnabled()
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"v": good})]


# ---- numbers -------------------------------------------------------------------------------


def test_integer_is_sent_as_int_and_range_is_enforced(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"age": {"type": "integer", "minimum": 18, "maximum": 130}}, ["age"]))
    edit = find(card, QLineEdit, "field:age")
    type_into(qtbot, edit, "12")
    assert not accept_button(card).isEnabled()
    assert "at least 18" in find(card, QLabel, "error:age").text()
    type_into(qtbot, edit, "42.5")
    assert not accept_button(card).isEnabled()
    assert "whole number" in find(card, QLabel, "error:age").text()
    type_into(qtbot, edit, "abc")
    assert not accept_button(card).isEnabled()
    type_into(qtbot, edit, "42")
    assert accept_button(card).isEnabled()
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"age": 42})]
    assert type(answers.calls[0][1]["age"]) is int


def test_number_accepts_decimals_and_honours_maximum(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"t": {"type": "number", "minimum": -1.5, "maximum": 2.5}}, ["t"]))
    edit = find(card, QLineEdit, "field:t")
    type_into(qtbot, edit, "3")
    assert not accept_button(card).isEnabled()
    type_into(qtbot, edit, "nan")
    assert not accept_button(card).isEnabled()
    type_into(qtbot, edit, "-1.25")
    assert accept_button(card).isEnabled()
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"t": -1.25})]


def test_falsy_number_defaults_are_shown_and_kept(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(
        form({"n": {"type": "integer", "default": 0}, "x": {"type": "number", "default": 0.0}})
    )
    assert find(card, QLineEdit, "field:n").text() == "0"
    assert find(card, QLineEdit, "field:x").text() == "0.0"
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"n": 0, "x": 0.0})]
    assert type(answers.calls[0][1]["n"]) is int


def test_cleared_optional_number_is_omitted(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"n": {"type": "integer", "default": 7}}))
    type_into(qtbot, find(card, QLineEdit, "field:n"), "")
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {})]


# ---- booleans ------------------------------------------------------------------------------


def test_boolean_defaults_and_toggle(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(
        form({"yes": {"type": "boolean", "default": True}, "no": {"type": "boolean", "default": False}})
    )
    yes, no = find(card, QCheckBox, "field:yes"), find(card, QCheckBox, "field:no")
    assert yes.isChecked() and not no.isChecked()
    qtbot.mouseClick(yes, Qt.MouseButton.LeftButton)
    assert not yes.isChecked()
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"yes": False, "no": False})]


# ---- single select -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prop", "labels", "pick", "sent"),
    [
        ({"type": "string", "enum": ["r", "g"]}, ["r", "g"], "g", "g"),
        (
            {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
            ["Red", "Green"],
            "Green",
            "g",
        ),
        (
            {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
            ["Red", "Green"],
            "Green",
            "g",
        ),
        ({"type": "integer", "enum": [1, 2]}, ["1", "2"], "2", 2),
    ],
    ids=["enum", "enumNames", "oneOf", "integer-enum"],
)
def test_single_select_shows_labels_and_sends_values(
    qtbot: QtBot, open_card: OpenCard, prop: dict[str, Any], labels: list[str], pick: str, sent: Any
) -> None:
    card, answers = open_card(form({"c": prop}, ["c"]))
    combo = find(card, QComboBox, "field:c")
    shown = [combo.itemText(i) for i in range(combo.count())]
    assert shown == ["—", *labels]  # required without default: the user must choose
    press_accept(qtbot, card)
    assert answers.calls == [] and find(card, QLabel, "error:c").text() == "is required"
    combo.setCurrentIndex(combo.findText(pick))
    assert accept_button(card).isEnabled()
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"c": sent})]
    assert type(answers.calls[0][1]["c"]) is type(sent)


def test_optional_select_can_be_left_empty_and_default_is_preselected(
    qtbot: QtBot, open_card: OpenCard
) -> None:
    card, answers = open_card(
        form(
            {
                "size": {"type": "string", "enum": ["s", "m"], "default": "m"},
                "mood": {"type": "string", "enum": ["ok", "meh"]},
                "fixed": {"type": "string", "enum": ["a", "b"], "default": "a"},
            },
            ["fixed"],
        )
    )
    size, mood = find(card, QComboBox, "field:size"), find(card, QComboBox, "field:mood")
    fixed = find(card, QComboBox, "field:fixed")
    assert size.currentText() == "m" and size.itemText(0) == "—"
    assert mood.currentText() == "—"
    assert [fixed.itemText(i) for i in range(fixed.count())] == ["a", "b"]  # required + default: no "—"
    size.setCurrentIndex(0)
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"fixed": "a"})]


# ---- multi select --------------------------------------------------------------------------


def checked_labels(widget: QListWidget) -> list[str]:
    return [
        widget.item(i).text()
        for i in range(widget.count())
        if widget.item(i).checkState() == Qt.CheckState.Checked
    ]


def check(widget: QListWidget, label: str, on: bool = True) -> None:
    item = widget.findItems(label, Qt.MatchFlag.MatchExactly)[0]
    item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)


def test_multi_select_with_titles_and_item_limits(qtbot: QtBot, open_card: OpenCard) -> None:
    prop = {
        "type": "array",
        "items": {
            "anyOf": [
                {"const": "a", "title": "Apple"},
                {"const": "b", "title": "Banana"},
                {"const": "c", "title": "Cherry"},
            ]
        },
        "minItems": 1,
        "maxItems": 2,
        "default": ["b"],
    }
    card, answers = open_card(form({"fruit": prop}, ["fruit"]))
    widget = find(card, QListWidget, "field:fruit")
    assert checked_labels(widget) == ["Banana"]
    assert accept_button(card).isEnabled()
    check(widget, "Apple")
    check(widget, "Cherry")
    assert not accept_button(card).isEnabled()
    assert "at most 2" in find(card, QLabel, "error:fruit").text()
    check(widget, "Banana", on=False)
    check(widget, "Cherry", on=False)
    check(widget, "Apple", on=False)
    assert not accept_button(card).isEnabled()
    assert "at least 1" in find(card, QLabel, "error:fruit").text()
    check(widget, "Cherry")
    check(widget, "Apple")
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"fruit": ["a", "c"]})]  # in option order


def test_multi_select_empty_default_is_kept(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"tags": {"type": "array", "items": {"enum": ["x", "y"]}, "default": []}}))
    assert checked_labels(find(card, QListWidget, "field:tags")) == []
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"tags": []})]


# ---- dates ---------------------------------------------------------------------------------


def test_date_default_shown_with_calendar_and_sent_iso(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(
        form({"day": {"type": "string", "format": "date", "default": "2024-02-29"}}, ["day"])
    )
    edit = find(card, QDateEdit, "field:day")
    assert edit.calendarPopup()
    assert edit.date().toString("yyyy-MM-dd") == "2024-02-29"
    assert find(card, QCheckBox, "field:day:set").isChecked()
    edit.setDate(edit.date().addDays(1))
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"day": "2024-03-01"})]


def test_optional_date_can_stay_empty_and_required_one_must_be_set(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(
        form(
            {"start": {"type": "string", "format": "date"}, "end": {"type": "string", "format": "date"}},
            ["start"],
        )
    )
    start_set = find(card, QCheckBox, "field:start:set")
    assert not start_set.isChecked() and not find(card, QDateEdit, "field:start").isEnabled()
    press_accept(qtbot, card)  # nothing is picked for the user
    assert answers.calls == [] and find(card, QLabel, "error:start").text() == "is required"
    qtbot.mouseClick(start_set, Qt.MouseButton.LeftButton)
    assert find(card, QDateEdit, "field:start").isEnabled()
    assert accept_button(card).isEnabled()
    press_accept(qtbot, card)
    [(action, content)] = answers.calls
    assert action == "accept" and list(content) == ["start"]  # the unset optional "end" is omitted
    datetime.date.fromisoformat(content["start"])


def test_date_time_default_round_trips_with_a_zone(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(
        form({"at": {"type": "string", "format": "date-time", "default": "2024-05-01T10:30:00Z"}}, ["at"])
    )
    edit = find(card, QDateTimeEdit, "field:at")
    assert edit.calendarPopup()
    expected_local = datetime.datetime(2024, 5, 1, 10, 30, tzinfo=datetime.UTC).astimezone()
    assert edit.dateTime().toString("yyyy-MM-dd HH:mm") == expected_local.strftime("%Y-%m-%d %H:%M")
    press_accept(qtbot, card)
    [(_action, content)] = answers.calls
    sent = datetime.datetime.fromisoformat(content["at"])
    assert sent.tzinfo is not None
    assert sent == datetime.datetime(2024, 5, 1, 10, 30, tzinfo=datetime.UTC)


# ---- every type at once, and the ways out ----------------------------------------------------


EVERY_TYPE = form(
    {
        "name": {"type": "string", "default": ""},
        "age": {"type": "integer", "default": 0},
        "ratio": {"type": "number", "default": 0},
        "ok": {"type": "boolean", "default": False},
        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "default": []},
        "day": {"type": "string", "format": "date", "default": "2025-01-31"},
    },
    ["name", "age", "ratio", "ok", "color", "tags", "day"],
)


def test_every_falsy_default_is_prefilled_and_kept(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(EVERY_TYPE)
    assert accept_button(card).isEnabled()
    press_accept(qtbot, card)
    assert answers.calls == [
        (
            "accept",
            {"name": "", "age": 0, "ratio": 0, "ok": False, "color": "red", "tags": [], "day": "2025-01-31"},
        )
    ]


def test_escape_cancels_once(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(EVERY_TYPE)
    qtbot.keyClick(card, Qt.Key.Key_Escape)
    assert answers.calls == [("cancel", None)]
    assert not card.isVisible()
    card.close()
    assert answers.calls == [("cancel", None)]  # exactly once


def test_closing_the_dialog_cancels(open_card: OpenCard) -> None:
    card, answers = open_card(EVERY_TYPE)
    card.close()
    assert answers.calls == [("cancel", None)]


def test_decline_sends_no_content(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"name": {"type": "string", "default": "Ada"}}))
    qtbot.mouseClick(find(card, QPushButton, "decline"), Qt.MouseButton.LeftButton)
    qtbot.mouseClick(find(card, QPushButton, "cancel"), Qt.MouseButton.LeftButton)
    assert answers.calls == [("decline", None)]


# ---- keyboard, focus, accessibility ----------------------------------------------------------


def test_enter_accepts_only_a_valid_answer_and_not_in_the_first_moment(
    qtbot: QtBot, open_card: OpenCard
) -> None:
    card, answers = open_card(form({"n": {"type": "integer", "minimum": 1}}, required=["n"]))
    edit = find(card, QLineEdit, "field:n")
    qtbot.keyClicks(edit, "5")
    qtbot.keyClick(edit, Qt.Key.Key_Return)  # typed ahead, as the card appeared: not an answer
    assert answers.calls == []
    qtbot.waitUntil(lambda: card.enter_armed, timeout=2000)
    type_into(qtbot, edit, "0")  # below the minimum
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert answers.calls == [] and card.isVisible()
    type_into(qtbot, edit, "7")
    qtbot.keyClick(edit, Qt.Key.Key_Enter)  # the keypad's Enter too
    assert answers.calls == [("accept", {"n": 7})]
    assert not card.isVisible()


def test_enter_on_a_focused_button_presses_that_button(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"name": {"type": "string", "default": "Ada"}}))
    qtbot.waitUntil(lambda: card.enter_armed, timeout=2000)
    decline = find(card, QPushButton, "decline")
    decline.setFocus()
    qtbot.keyClick(decline, Qt.Key.Key_Return)
    assert answers.calls == [("decline", None)]


def test_alt_d_declines_from_any_field(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"name": {"type": "string"}}, required=["name"]))
    card.activateWindow()
    qtbot.waitUntil(card.isActiveWindow, timeout=2000)  # shortcuts work in the active window
    qtbot.keyClick(find(card, QLineEdit, "field:name"), Qt.Key.Key_D, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: answers.calls == [("decline", None)], timeout=2000)  # the button flashes first


def test_focus_starts_on_the_first_field(open_card: OpenCard) -> None:
    card, _ = open_card(EVERY_TYPE)
    assert card.focusWidget() is find(card, QLineEdit, "field:name")
    dated, _ = open_card(form({"when": {"type": "string", "format": "date"}, "x": {"type": "string"}}))
    assert dated.focusWidget() is find(dated, QCheckBox, "field:when:set")
    link, _ = open_card(url_params("https://example.com/"), opener=lambda _u: None)
    assert link.focusWidget() is find(link, QPushButton, "decline")  # never on "open" by default


def test_every_field_has_an_accessible_name_and_description(open_card: OpenCard) -> None:
    properties = {key: {**prop, "title": key.title(), "description": f"about {key}"}
                  for key, prop in EVERY_TYPE["requestedSchema"]["properties"].items()}
    card, _ = open_card(form(properties, ["name"]))
    assert card.form is not None
    for key, field in card.form.fields.items():
        expected = key.title() + (" (required)" if key == "name" else "")
        assert field.widget.accessibleName() == expected
        assert field.focus_widget.accessibleName().startswith(key.title())
        assert field.widget.accessibleDescription() == f"about {key}"
    assert find(card, QDateEdit, "field:day").accessibleName() == "Day"


def contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio of two colours."""
    def luminance(c: QColor) -> float:
        def channel(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.fixture
def dark_palette(qapp: QApplication) -> Iterator[QPalette]:
    light = qapp.palette()
    dark = QPalette(QColor("#353535"))  # what Fusion derives for a dark system theme
    dark.setColor(QPalette.ColorRole.WindowText, QColor("#f0f0f0"))
    dark.setColor(QPalette.ColorRole.Text, QColor("#f0f0f0"))
    dark.setColor(QPalette.ColorRole.Base, QColor("#2a2a2a"))
    yield dark
    qapp.setPalette(light)


def test_error_and_warning_text_stay_readable_when_the_system_turns_dark(
    qtbot: QtBot, qapp: QApplication, open_card: OpenCard, dark_palette: QPalette
) -> None:
    card, _ = open_card(form({"n": {"type": "integer"}}, required=["n"]))
    link, _ = open_card(url_params("http://example.com/"), opener=lambda _u: None)
    press_accept(qtbot, card)  # the empty required field's problem shows
    shown = [find(card, QLabel, "problems"), find(card, QLabel, "error:n"), find(link, QLabel, "warnings")]
    assert all(label.isVisible() for label in shown)

    def readable() -> list[float]:
        return [
            contrast(label.palette().color(QPalette.ColorRole.WindowText),
                     label.palette().color(QPalette.ColorRole.Window))
            for label in shown
        ]

    assert min(readable()) >= 4.5
    qapp.setPalette(dark_palette)  # the system switched to dark while the cards are open
    qtbot.waitUntil(
        lambda: all(label.palette().color(QPalette.ColorRole.Window).lightness() < 128 for label in shown),
        timeout=2000,
    )
    assert min(readable()) >= 4.5


# ---- time left ---------------------------------------------------------------------------------


def expiring(params: dict[str, Any], expires_at: int | None) -> messages.ElicitationInvoke:
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server="demo", params=params),
        response_channel="ch-t", created_at=1, expires_at=expires_at, origin=None,
    )


def test_the_card_shows_the_time_left_and_counts_down(qtbot: QtBot) -> None:
    card = ElicitationCard(expiring(form({"x": {"type": "string"}}), now_ms() + 90_500))
    qtbot.addWidget(card)
    card.show()
    label = find(card, QLabel, "expires")
    assert label.isVisible() and label.text() in ("Expires in 1:31", "Expires in 1:30")
    first = label.text()
    qtbot.waitUntil(lambda: label.text() != first, timeout=3000)  # the one-second tick
    assert label.text() in ("Expires in 1:30", "Expires in 1:29")


@pytest.mark.parametrize(
    ("expires_in_ms", "text"),
    [
        (None, ""),
        (29_500, "⚠ Expires in 0:30"),
        (3 * 3600_000 + 5 * 60_000, "Expires in 3 h 05 min"),
        (10 * 86_400_000, "Expires in 10 days"),
        (2**62, "Expires in more than a year"),  # a third-party main's far future: no overflow
        (-5000, "⚠ Expiring now"),
    ],
)
def test_time_left_wording(qtbot: QtBot, expires_in_ms: int | None, text: str) -> None:
    at = None if expires_in_ms is None else now_ms() + expires_in_ms + 500
    card = ElicitationCard(expiring(form({"x": {"type": "string"}}), at))
    qtbot.addWidget(card)
    card.show()
    label = find(card, QLabel, "expires")
    assert (label.text() if label.isVisible() else "") == text


# ---- hostile requests --------------------------------------------------------------------------


def test_numbers_no_widget_can_hold_reach_no_widget(qtbot: QtBot) -> None:
    """What a third-party main may pass on (main itself now refuses such schemas): the field
    widgets clamp it instead of raising OverflowError inside Qt."""
    parent = QWidget()
    qtbot.addWidget(parent)
    hostile = {"type": "string", "maxLength": 2**40, "default": "x" * 40_000}
    huge = fields.TextField("t", hostile, True, parent)
    assert huge.edit.maxLength() == fields.QT_INT_MAX and huge.value() == "x" * 40_000
    negative = fields.TextField("s", {"type": "string", "maxLength": -3}, False, parent)
    assert negative.edit.maxLength() == 32767  # Qt's own default, untouched
    number = fields.NumberField("n", {"type": "integer", "default": 10**5000}, True, parent, integer=True)
    assert number.edit.text() == "" and number.parse_problem() is None  # too long to show: not shown
    counts = fields.MultiSelectField("m", {"type": "array", "items": {"enum": ["a"]}, "maxItems": 2**40},
                                     False, parent)
    assert counts.value() == []


def test_a_long_default_is_kept_whole_and_too_many_digits_are_a_problem(
    qtbot: QtBot, open_card: OpenCard
) -> None:
    card, answers = open_card(form(
        {"text": {"type": "string", "default": "x" * 40_000}, "n": {"type": "integer"}}, ["text", "n"]
    ))
    assert len(find(card, QLineEdit, "field:text").text()) == 40_000  # not cut at QLineEdit's 32767
    n = find(card, QLineEdit, "field:n")
    n.setText("9" * 5000)  # pasted: more digits than Python converts
    assert "too many digits" in find(card, QLabel, "error:n").text()
    type_into(qtbot, n, "12")
    press_accept(qtbot, card)
    assert answers.calls == [("accept", {"text": "x" * 40_000, "n": 12})]


def test_limits_that_are_not_numbers_make_the_form_invalid_instead_of_raising(qtbot: QtBot) -> None:
    """A form body given `minimum: "x"` (check_schema may refuse it first; the body must not raise)."""
    body = form_body.FormBody({"type": "object", "properties": {"n": {"type": "integer", "minimum": "x",
                                                                      "default": 5}}, "required": ["n"]})
    qtbot.addWidget(body)
    assert not body.is_valid
    assert any("cannot be checked" in problem for problem in body.problems)


def test_a_hostile_schema_is_a_card_either_way(qtbot: QtBot, open_card: OpenCard) -> None:
    card, answers = open_card(form({"x": {"type": "string", "maxLength": 2**40, "minLength": "x"},
                                    "n": {"type": "integer", "minimum": float("nan"), "default": 10**400}}))
    assert card.isVisible() and card.kind in ("form", "notice")
    assert not (accept_button(card).isVisible() and accept_button(card).isEnabled())
    qtbot.mouseClick(find(card, QPushButton, "decline"), Qt.MouseButton.LeftButton)
    assert answers.calls == [("decline", None)]


def test_a_card_that_fails_to_build_is_a_notice_with_decline(
    qtbot: QtBot, open_card: OpenCard, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(*_args: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")  # whatever a hostile schema trips

    monkeypatch.setattr(form_body, "build_field", explode)
    card, answers = open_card(form({"x": {"type": "string"}}))
    assert card.kind == "notice"
    assert "can't be shown" in find(card, QLabel, "notice").text()
    assert not accept_button(card).isVisible()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR and "cannot build" in r.getMessage()]
    assert len([r for r in caplog.records if r.exc_info]) == 1  # the exception is logged once
    qtbot.mouseClick(find(card, QPushButton, "decline"), Qt.MouseButton.LeftButton)
    assert answers.calls == [("decline", None)]


def test_close_silently_answers_nothing(open_card: OpenCard) -> None:
    card, answers = open_card(EVERY_TYPE)
    card.close_silently()
    assert not card.isVisible()
    assert answers.calls == []


def test_unsupported_schema_shows_a_notice_with_decline_and_cancel_only(
    qtbot: QtBot, open_card: OpenCard
) -> None:
    card, answers = open_card(form({"where": {"type": "object", "properties": {}}}))
    assert card.kind == "notice"
    notice = find(card, QLabel, "notice").text()
    assert "'where'" in notice and "unsupported type" in notice
    assert not accept_button(card).isVisible()
    assert find(card, QPushButton, "decline").isVisible()
    assert find(card, QPushButton, "cancel").isVisible()
    assert not find(card, QPushButton, "decline_all").isVisible()
    qtbot.mouseClick(find(card, QPushButton, "decline"), Qt.MouseButton.LeftButton)
    assert answers.calls == [("decline", None)]


@pytest.mark.parametrize(
    "params",
    [
        form({"n": {"type": "integer"}}, required=["n"]),
        {"mode": "url", "message": "Sign in", "url": "https://example.com/", "elicitationId": "e-1"},
    ],
)
def test_decline_all_from_the_server_declines_this_card_once(
    qtbot: QtBot, open_card: OpenCard, params: dict[str, Any]
) -> None:
    card, answers = open_card(params, opener=lambda _u: None)
    declined_servers: list[str] = []
    card.decline_all_requested.connect(declined_servers.append)
    button = find(card, QPushButton, "decline_all")
    assert button.isVisible() and button.text() == "Decline all from demo for this session"
    assert button.isEnabled()  # even while the form is not valid yet
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert declined_servers == ["demo"]
    assert answers.calls == [("decline", None)]
    assert not card.isVisible()


# ---- URL mode ------------------------------------------------------------------------------


def url_params(url: str) -> dict[str, Any]:
    return {"mode": "url", "message": "Sign in to continue", "url": url, "elicitationId": "e-1"}


def test_url_card_shows_full_url_with_bold_host_and_opens_only_after_accept(
    qtbot: QtBot, open_card: OpenCard
) -> None:
    opened: list[QUrl] = []
    card, answers = open_card(
        url_params("https://login.example.com/oauth?state=1&x=%3Cy%3E"), opener=opened.append
    )
    assert "demo" in find(card, QLabel, "header").text()
    assert find(card, QLabel, "message").text() == "Sign in to continue"
    url_text = find(card, QLabel, "url").text()
    assert url_text == "https://<b>login.example.com</b>/oauth?state=1&amp;x=%3Cy%3E"
    assert "<b>login.example.com</b>" in find(card, QLabel, "host").text()
    assert not find(card, QLabel, "warnings").isVisible()
    assert opened == []
    press_accept(qtbot, card)
    assert answers.calls == [("accept", None)]
    assert opened == [QUrl("https://login.example.com/oauth?state=1&x=%3Cy%3E")]


def test_url_card_declined_or_cancelled_never_opens(qtbot: QtBot, open_card: OpenCard) -> None:
    opened: list[QUrl] = []
    card, answers = open_card(url_params("https://example.com/"), opener=opened.append)
    qtbot.mouseClick(find(card, QPushButton, "decline"), Qt.MouseButton.LeftButton)
    card2, answers2 = open_card(url_params("https://example.com/"), opener=opened.append)
    qtbot.keyClick(card2, Qt.Key.Key_Escape)
    assert answers.calls == [("decline", None)] and answers2.calls == [("cancel", None)]
    assert opened == []


@pytest.mark.parametrize(
    ("url", "warning"),
    [
        ("http://example.com/", "not encrypted"),
        ("https://xn--pple-43d.com/", "international characters"),
        ("https://\u0430pple.com/", "international characters"),  # Cyrillic a
        ("https://bank.com@evil.example/", "goes to evil.example"),
    ],
)
def test_url_card_warns_about_risky_links(open_card: OpenCard, url: str, warning: str) -> None:
    card, _ = open_card(url_params(url), opener=lambda _u: None)
    warnings = find(card, QLabel, "warnings")
    assert warnings.isVisible()
    assert warning in warnings.text()
    assert accept_button(card).isEnabled()


def test_url_card_refuses_to_open_non_web_links(open_card: OpenCard) -> None:
    card, _ = open_card(url_params("file:///etc/passwd"), opener=lambda _u: None)
    assert "Only web links" in find(card, QLabel, "warnings").text()
    assert not accept_button(card).isEnabled()


def test_grab_widget_saves_the_card_as_png(open_card: OpenCard, tmp_path: Path) -> None:
    card, _ = open_card(EVERY_TYPE)
    saved = grab_widget(card, tmp_path / "shots" / "card.png")
    image = QImage(str(saved))
    assert saved.read_bytes().startswith(b"\x89PNG")
    assert (image.width(), image.height()) == (card.width(), card.height())


def test_a_realistic_booking_form_accepts_its_defaults_as_is(qtbot: QtBot, open_card: OpenCard) -> None:
    booking = {
        "name": {"type": "string", "title": "Name on the booking", "default": "Ada", "minLength": 1},
        "party_size": {"type": "integer", "title": "Guests", "minimum": 1, "maximum": 12, "default": 2},
        "outdoor": {"type": "boolean", "title": "Sit outside", "default": False},
        "budget": {"type": "number", "title": "Budget per person (EUR)", "minimum": 0},
        "cuisine": {"type": "string", "enum": ["french", "japanese", "mexican"], "default": "french"},
    }
    params = form(booking, ["name", "party_size"])
    del params["mode"]  # MCP: a request without a mode is a form
    card, answers = open_card(params)
    assert find(card, QLabel, "label:party_size").text() == "Guests *"
    press_accept(qtbot, card)
    assert answers.calls == [
        ("accept", {"name": "Ada", "party_size": 2, "outdoor": False, "cuisine": "french"})
    ]


# ---- URL safety on the card --------------------------------------------------------------------


def test_a_numeric_host_names_the_real_address_it_opens(open_card: OpenCard) -> None:
    card, _ = open_card(url_params("https://0x7f.1/"), opener=lambda _u: None)
    assert "127.0.0.1" in find(card, QLabel, "host").text()
    warnings = find(card, QLabel, "warnings").text()
    assert "0x7f.1 is the address 127.0.0.1 written in a disguised form" in warnings
    assert "your own computer" in warnings


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://example.com/\u202egpj.exe", "⟦U+202E⟧"),  # reads as .../exe.jpg
        ("https://ex\u200bample.com/", "⟦U+200B⟧"),
        ("https://example.com/a b", "⟦U+0020⟧"),
        ("https://example.com/a\tb", "⟦U+0009⟧"),
        ("https://example.com/\nx", "⟦U+000A⟧"),
        ("https://example.com/\x00", "⟦U+0000⟧"),
    ],
)
def test_hidden_or_blank_characters_are_shown_and_the_link_cannot_be_opened(
    open_card: OpenCard, url: str, shown: str
) -> None:
    card, _ = open_card(url_params(url), opener=lambda _u: None)
    assert shown in find(card, QLabel, "url").text()
    assert "cannot be opened" in find(card, QLabel, "warnings").text()
    assert not accept_button(card).isEnabled()


def test_a_link_qt_would_refuse_is_not_offered(open_card: OpenCard) -> None:
    card, _ = open_card(url_params("https://example.com:99999999/"), opener=lambda _u: None)
    assert "not a well-formed link" in find(card, QLabel, "warnings").text()
    assert not accept_button(card).isEnabled()


def test_when_no_browser_opens_the_link_the_server_is_not_told_accept(
    qtbot: QtBot, open_card: OpenCard
) -> None:
    attempts: list[QUrl] = []

    def failing_opener(url: QUrl) -> bool:
        attempts.append(url)
        return False

    card, answers = open_card(url_params("https://example.com/login"), opener=failing_opener)
    press_accept(qtbot, card)
    assert attempts == [QUrl("https://example.com/login")]
    assert answers.calls == [] and card.isVisible()
    assert "No browser could open this link" in find(card, QLabel, "problems").text()
    assert accept_button(card).text() == "Try again"
    qtbot.mouseClick(find(card, QPushButton, "copy_link"), Qt.MouseButton.LeftButton)
    assert QApplication.clipboard().text() == "https://example.com/login"
    qtbot.mouseClick(find(card, QPushButton, "decline"), Qt.MouseButton.LeftButton)
    assert answers.calls == [("decline", None)]
