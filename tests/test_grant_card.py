"""The Qt approval card's grant (renderer_process/grant_box.py), offscreen, fed as the bridge would:
which arguments × how long × one call only, the proposed pattern editable, and the one line that
says what the grant will cover; what the window sends."""

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QLabel, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot

from main_process.consent.approvals import approval_params, grant_offer  # what main sends, exactly
from renderer_process.approval_card import ApprovalCard
from renderer_process.main_window import MainWindow
from shared import messages

ARGUMENTS = {"path": "/home/ada/notes/today.md", "lines": 10}


def approval(channel: str = "c-grant", offered: bool = True) -> messages.ElicitationInvoke:
    info = messages.ApprovalInfo(server="files", tool="read_file", arguments=ARGUMENTS,
                                 grants=grant_offer(ARGUMENTS) if offered else None)
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server="files", params=approval_params("Claude", info)),
        response_channel=channel, created_at=1, expires_at=None, origin="host-1", kind="approval", via="Claude",
        approval=info)


def find(parent: Any, kind: type, name: str) -> Any:
    widget = parent.findChild(kind, name)
    assert widget is not None, f"no {kind.__name__} named {name!r}"
    return widget


def pick(combo: QComboBox, value: str) -> None:
    combo.setCurrentIndex(combo.findData(value))


@pytest.fixture
def window(qtbot: QtBot) -> MainWindow:
    win = MainWindow(window_id="0190a000-0000-7000-8000-00000000000a", name="test", opener=lambda _url: None)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    return win


def shown_card(window: MainWindow, invoke: messages.ElicitationInvoke) -> ApprovalCard:
    window.on_invoked(invoke)
    card = window.current_card()
    assert isinstance(card, ApprovalCard)
    return card


def test_the_card_offers_grants_and_says_in_one_line_what_the_grant_covers(qtbot: QtBot, window: MainWindow) -> None:
    card = shown_card(window, approval())
    buttons = [button.objectName() for button in card.findChildren(QPushButton)]
    assert buttons == ["approve_once", "approve_grant", "deny"]
    arguments, duration = find(card, QComboBox, "grant_arguments"), find(card, QComboBox, "grant_duration")
    assert [arguments.itemText(i) for i in range(arguments.count())] == [
        "these exact arguments", "arguments like these", "any arguments"]
    assert [duration.itemText(i) for i in range(duration.count())] == [
        "for this session", "for an hour", "until…", "always"]
    summary = find(card, QLabel, "grant_summary")
    assert summary.text() == "Allows read_file with exactly the approved arguments, for this session"
    assert not find(card, QLineEdit, "pattern:path").isVisibleTo(card)

    pick(arguments, "pattern")  # the pattern main proposed, editable
    path = find(card, QLineEdit, "pattern:path")
    assert path.isVisibleTo(card) and path.text() == "/home/ada/notes/*"
    assert find(card, QLineEdit, "pattern:lines").text() == "10"
    path.setText("/etc/*")  # does not cover the call on the card: said, and not sendable
    assert summary.text() == "The pattern does not cover this call: path"
    assert not find(card, QPushButton, "approve_grant").isEnabled()
    path.setText("/home/ada/*")
    pick(duration, "hour")
    find(card, QCheckBox, "grant_single_use").setChecked(True)
    assert summary.text() == ("Allows read_file with lines like “10”, path like “/home/ada/*”, for an hour, "
                              "one call only")

    with qtbot.waitSignal(window.answer_granted) as sent:
        qtbot.mouseClick(find(card, QPushButton, "approve_grant"), Qt.MouseButton.LeftButton)
    assert sent.args == ["c-grant", "accept", {"decision": "allow-always"}, messages.GrantChoice(
        arguments="pattern", duration="hour", pattern={"path": "/home/ada/*", "lines": "10"}, single_use=True)]


def test_a_session_grant_goes_with_allow_session_and_allow_once_sends_no_grant(qtbot: QtBot,
                                                                               window: MainWindow) -> None:
    card = shown_card(window, approval("c-session"))
    with qtbot.waitSignal(window.answer_granted) as sent:
        qtbot.mouseClick(find(card, QPushButton, "approve_grant"), Qt.MouseButton.LeftButton)
    assert sent.args == ["c-session", "accept", {"decision": "allow-session"},
                         messages.GrantChoice(arguments="exact", duration="session")]
    once = shown_card(window, approval("c-once"))
    with qtbot.waitSignal(window.answer_ready) as plain:
        qtbot.mouseClick(find(once, QPushButton, "approve_once"), Qt.MouseButton.LeftButton)
    assert plain.args == ["c-once", "accept", {"decision": "allow-once"}]


def test_a_main_that_offers_no_grants_gets_todays_four_choices(qtbot: QtBot, window: MainWindow) -> None:
    card = shown_card(window, approval("c-v1", offered=False))
    assert [button.objectName() for button in card.findChildren(QPushButton)] == [
        "approve_once", "approve_session", "approve_always", "deny"]
    assert card.findChild(QComboBox, "grant_arguments") is None


def test_the_remembered_panels_show_grants_in_the_cards_words(qtbot: QtBot) -> None:
    from renderer_process.remembered_panel import RememberedPanel
    from web_process.remembered import rule_row

    rules = [
        messages.RuleInfo(id="r-1", source="user", kind="tool", server="files", scope="session", created_at=1,
                          created_by="laptop", tool="read_file", decision="allow", host="Claude", arguments="exact"),
        messages.RuleInfo(id="r-2", source="user", kind="tool", server="files", scope="always", created_at=2,
                          created_by="laptop", tool="read_file", decision="allow", arguments="pattern",
                          pattern={"path": "/home/ada/*"}, single_use=True),
        messages.RuleInfo(id="r-3", source="user", kind="tool", server="files", scope="always", created_at=3,
                          created_by="laptop", tool="write_file", decision="allow", arguments="any"),
    ]
    panel = RememberedPanel()
    qtbot.addWidget(panel)
    panel.set_rules(rules)
    assert panel.rows() == [
        "files: tool read_file with exactly the approved arguments → allow (Claude only) · this session",
        "files: tool read_file with path like “/home/ada/*” → allow, one call only · always",
        "files: tool write_file with any arguments → allow · always"]
    assert [rule_row(rule)["what"] for rule in rules] == [row.split(": ", 1)[1].rsplit(" · ", 1)[0]
                                                          for row in panel.rows()]  # the web page's list: the same
