"""A program's question on the card: named as a program, yes/no drawn as a confirm (pytest-qt)."""

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QLabel, QPushButton, QScrollArea
from pytestqt.qtbot import QtBot

from renderer_process.card import ElicitationCard
from shared import messages

YES_NO = {"mode": "form", "message": "Deploy 1.4 to prod?",
          "requestedSchema": {"type": "object", "properties": {"answer": {"type": "boolean", "title": "Yes"}},
                              "required": ["answer"]}}
FORM = {"mode": "form", "message": "Which tag?",
        "requestedSchema": {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}}


def question(params: dict[str, Any], asker: messages.AskerInfo | None) -> messages.ElicitationInvoke:
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server=asker.name if asker else "demo", params=params),
        response_channel="ch-1", created_at=1, expires_at=None, origin=None,
        kind="question" if asker else None, asker=asker)


def shown(qtbot: QtBot, invoke: messages.ElicitationInvoke) -> tuple[ElicitationCard, list[tuple[str, Any]]]:
    card = ElicitationCard(invoke)
    qtbot.addWidget(card)
    answers: list[tuple[str, Any]] = []
    card.answered.connect(lambda action, content: answers.append((action, content)))
    card.show()
    qtbot.waitExposed(card)
    return card, answers


def button(card: ElicitationCard, name: str) -> QPushButton:
    found = card.findChild(QPushButton, name)
    assert found is not None
    return found


def test_a_program_is_named_with_its_pid_and_machine_and_offers_no_server_policy(qtbot: QtBot) -> None:
    asker = messages.AskerInfo(name="deploy.sh", pid=4242, machine="build-7")
    card, _answers = shown(qtbot, question(FORM, asker))
    header = card.findChild(QLabel, "header")
    assert header is not None and header.text() == "<b>deploy.sh (pid 4242 on build-7)</b> asks for input:"
    assert card.windowTitle() == "deploy.sh (pid 4242 on build-7) asks for input"
    assert not button(card, "decline_all").isVisible()  # declining all from a server is a server policy
    # "&Decline": Alt+D declines (the & marks the shortcut, not shown as such)
    assert button(card, "accept").text() == "Accept" and button(card, "decline").text().replace("&", "") == "Decline"


def test_a_yes_no_question_is_a_confirm_yes_accepts_true_no_declines(qtbot: QtBot) -> None:
    asker = messages.AskerInfo(name="deploy.sh", pid=4242)
    card, answers = shown(qtbot, question(YES_NO, asker))
    yes, no = button(card, "accept"), button(card, "decline")
    assert (yes.text(), no.text(), yes.isEnabled()) == ("Yes", "No", True)
    checkbox = card.findChild(QCheckBox, "field:answer")
    assert checkbox is not None and not checkbox.isVisible()
    assert all(not area.isVisible() for area in card.findChildren(QScrollArea))
    qtbot.mouseClick(yes, Qt.MouseButton.LeftButton)
    assert answers == [("accept", {"answer": True})]

    card, answers = shown(qtbot, question(YES_NO, asker))
    qtbot.mouseClick(button(card, "decline"), Qt.MouseButton.LeftButton)
    assert answers == [("decline", None)]


def test_a_servers_request_of_the_same_shape_stays_a_plain_form(qtbot: QtBot) -> None:
    card, _answers = shown(qtbot, question(YES_NO, None))
    header = card.findChild(QLabel, "header")
    assert header is not None and header.text() == "<b>demo</b> asks for input:"
    checkbox = card.findChild(QCheckBox, "field:answer")
    assert checkbox is not None and checkbox.isVisible() and not checkbox.isChecked()
    assert button(card, "accept").text() == "Accept" and button(card, "decline_all").isVisible()
