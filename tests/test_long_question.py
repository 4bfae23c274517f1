"""A huge question cannot stall the window (issue 24, finding 17): a 200 KB question of newlines
took a card ~19 s to show, the window stopped answering main and main detached it. A card shows a
bounded preview and the whole text a click away (renderer_process/long_text.py); across real
processes, a program asks it and the real window shows it while staying attached."""

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from conftest import WindowFactory
from kit.env import child_env
from kit.main import RunningMain
from kit.paths import PYTHON, ROOT
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QPushButton, QToolButton
from pytestqt.qtbot import QtBot

from renderer_process.approval_card import ApprovalCard
from renderer_process.card import ElicitationCard
from renderer_process.long_text import FULL_TEXT_MAX_HEIGHT, MAX_CHARS, MAX_LINES, preview
from shared import messages

NEWLINES = "\n" * 200_000 + "Deploy?"
ONE_WORD = "x" * 200_000


def invoke_for(message: str) -> messages.ElicitationInvoke:
    params = {"mode": "form", "message": message,
              "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}
    return messages.ElicitationInvoke(request=messages.ElicitationRequest(server="demo", params=params),
                                      response_channel="ch-long", created_at=1, expires_at=None, origin=None)


def test_a_preview_is_bounded_in_lines_and_characters() -> None:
    assert preview("short\ntext") == ("short\ntext", False)
    shown, cut = preview(NEWLINES)
    assert cut and shown == "…"
    shown, cut = preview("line\n" * 100)
    assert cut and shown.count("\n") == MAX_LINES - 1 and shown.endswith("line…")
    shown, cut = preview(ONE_WORD)
    assert cut and len(shown) == MAX_CHARS + 1
    assert preview("a\u2028b\rc", max_lines=2) == ("a\u2028b…", True)  # Qt breaks lines there too


@pytest.mark.parametrize("message", [NEWLINES, ONE_WORD, ("word " * 40 + "\n") * 4000],
                         ids=["newlines", "one-word", "paragraphs"])
def test_a_card_with_a_huge_message_shows_a_bounded_preview_and_the_whole_text_on_request(
    qtbot: QtBot, message: str
) -> None:
    card = ElicitationCard(invoke_for(message))
    qtbot.addWidget(card)
    card.show()
    qtbot.waitExposed(card)
    label = card.findChild(QLabel, "message")
    assert label is not None
    assert len(label.text()) <= MAX_CHARS + 1 and label.text().count("\n") < MAX_LINES
    assert card.height() < 1000  # the answer and its buttons stay on screen
    show_all = card.findChild(QPushButton, "message_show_all")
    assert show_all is not None and show_all.isVisible() and f"{len(message):,} characters" in show_all.text()
    qtbot.mouseClick(show_all, Qt.MouseButton.LeftButton)
    full = card.findChild(QPlainTextEdit, "message_full")
    assert full is not None and full.isVisible() and full.isReadOnly()
    assert full.toPlainText() == message and full.height() <= FULL_TEXT_MAX_HEIGHT
    assert not label.isVisible() and show_all.text() == "Show less"
    qtbot.mouseClick(show_all, Qt.MouseButton.LeftButton)
    assert label.isVisible() and not full.isVisible()


def test_a_short_message_shows_whole_without_a_show_all(qtbot: QtBot) -> None:
    card = ElicitationCard(invoke_for("Book a table?"))
    qtbot.addWidget(card)
    card.show()
    label = card.findChild(QLabel, "message")
    assert label is not None and label.text() == "Book a table?"
    show_all = card.findChild(QPushButton, "message_show_all")
    assert show_all is not None and not show_all.isVisible()


def test_an_approvals_huge_argument_unfolds_into_a_capped_box(qtbot: QtBot) -> None:
    approval = messages.ApprovalInfo(server="files", tool="write_file", arguments={"text": NEWLINES},
                                     description="Writes\n" * 5000)
    invoke = messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server="files", params={
            "mode": "form", "message": "approve?", "requestedSchema": {"type": "object", "properties": {
                "decision": {"type": "string", "enum": ["allow-once", "deny"]}}}}),
        response_channel="ch-approval", created_at=1, expires_at=None, origin=None, kind="approval",
        approval=approval, via="Claude Desktop")
    card = ApprovalCard(invoke)
    qtbot.addWidget(card)
    card.show()
    about = card.findChild(QLabel, "about")
    assert about is not None and about.text().count("\n") < MAX_LINES
    unfold = card.findChild(QToolButton, "unfold:text")
    assert unfold is not None
    qtbot.mouseClick(unfold, Qt.MouseButton.LeftButton)
    full = card.findChild(QPlainTextEdit, "argument:text_full")
    assert full is not None and full.isVisible() and full.toPlainText() == NEWLINES


# ---- across real processes -----------------------------------------------------------------------


def test_a_program_asking_a_200_kb_question_of_newlines_leaves_the_window_attached(
    main_factory: Callable[..., RunningMain], windows: WindowFactory
) -> None:
    main = main_factory({})
    window = windows(main.connection, "long-window")
    main.wait_peer("long-window", role="renderer")
    window.wait_event("welcome", timeout_s=60)
    program = ("import asyncio, sys; from asker_process import ask; "
               "asyncio.run(ask(sys.stdin.read(), timeout=300, name='huge-asker', connection=sys.argv[1]))")
    asker = subprocess.Popen(
        [PYTHON, "-c", program, str(main.connection)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        env=child_env(main.home), cwd=ROOT)
    try:
        assert asker.stdin is not None
        asker.stdin.write(NEWLINES)
        asker.stdin.close()
        card = window.wait_card(timeout_s=120)
        window.wait_event("painted", lambda e: e["channel"] == card["channel"], timeout_s=120)
        status: dict[str, Any] = main.status()
        assert [p["name"] for p in status["peers"] if p["role"] == "renderer"] == ["long-window"]
        assert len(status["pending"]) == 1
        # Never detached meanwhile: main logs a detach when it happens (the window was silent
        # while it laid the card out), and a detached window says hello again.
        assert "detached renderer 'long-window'" not in main.stderr.text(), main.stderr.tail()
        assert len([e for e in window.events() if e["event"] == "welcome"]) == 1, window.events()
    finally:
        asker.kill()
        asker.wait(timeout=30)
