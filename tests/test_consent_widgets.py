"""The consent layer's widgets, offscreen, fed as the bridge would: the approval card, "Remember my
answer" on form cards, and the Remembered panel."""

import datetime
from typing import Any

import pytest
from PySide6.QtCore import QDate, Qt
from PySide6.QtWidgets import QComboBox, QDateEdit, QLabel, QLineEdit, QListWidget, QPushButton, QToolButton
from pytestqt.qtbot import QtBot

from renderer_process.approval_card import FOLD_CHARS, ApprovalCard, fold
from renderer_process.card import ElicitationCard, offers_for
from renderer_process.main_window import MainWindow
from renderer_process.remember import end_of_day_ms
from renderer_process.remembered_panel import RememberedPanel
from shared import messages
from shared.denial_reason import REASON_MAX_CHARS

ME = "0190a000-0000-7000-8000-00000000000a"
HOST = "0190a000-0000-7000-8000-0000000000ff"


def approval(arguments: dict[str, Any], annotations: dict[str, Any] | None = None,
             channel: str = "c-approval") -> messages.ElicitationInvoke:
    from main_process.consent.approvals import approval_params  # what main sends, exactly

    info = messages.ApprovalInfo(server="files", tool="write_file", arguments=arguments, title="Write a file",
                                 description="Writes text to a path.", annotations=annotations)
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server="files", params=approval_params("Claude Desktop", info)),
        response_channel=channel, created_at=1, expires_at=None, origin=HOST, kind="approval",
        via="Claude Desktop", approval=info)


def form(channel: str = "c-form") -> messages.ElicitationInvoke:
    params = {"mode": "form", "message": "Your name?",
              "requestedSchema": {"type": "object", "properties": {"name": {"type": "string", "default": "Ada"}}}}
    return messages.ElicitationInvoke(request=messages.ElicitationRequest(server="demo", params=params),
                                      response_channel=channel, created_at=2, expires_at=None, origin=None)


def find(parent: Any, kind: type, name: str) -> Any:
    widget = parent.findChild(kind, name)
    assert widget is not None, f"no {kind.__name__} named {name!r}"
    return widget


@pytest.fixture
def window(qtbot: QtBot) -> MainWindow:
    win = MainWindow(window_id=ME, name="test", opener=lambda _url: None)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    return win


def test_an_approval_shows_who_calls_what_with_warnings_and_folded_arguments(qtbot: QtBot) -> None:
    text = "x" * (FOLD_CHARS + 50)
    card = ApprovalCard(approval({"path": "/tmp/notes.txt", "text": text, "mode": {"append": True}}))
    qtbot.addWidget(card)
    assert find(card, QLabel, "header").text() == "<b>Claude Desktop</b> wants to call <b>write_file</b> on <b>files</b>"
    assert find(card, QLabel, "about").text() == "Write a file\nWrites text to a path."
    warnings = find(card, QLabel, "warnings").text()
    assert "may delete or overwrite things" in warnings and "does not say whether" in warnings  # no annotations
    assert find(card, QLabel, "argument:path").text() == "/tmp/notes.txt"
    assert find(card, QLabel, "argument:mode").text() == '{"append": true}'
    folded = find(card, QLabel, "argument:text")
    assert folded.text() == "x" * FOLD_CHARS + "… (50 more characters)"
    qtbot.mouseClick(find(card, QToolButton, "unfold:text"), Qt.MouseButton.LeftButton)
    assert folded.text() == text
    assert not find(card, QToolButton, "unfold:path").isVisibleTo(card)
    assert find(card, QPushButton, "approve_session").toolTip() == (
        "Run files/write_file now and whenever Claude Desktop calls it again until main stops; another host is "
        "still asked")
    with qtbot.waitSignal(card.answered) as answered:
        qtbot.mouseClick(find(card, QPushButton, "approve_session"), Qt.MouseButton.LeftButton)
    assert answered.args == ["accept", {"decision": "allow-session"}]


def test_a_read_only_tool_says_so_and_escape_is_a_cancel(qtbot: QtBot) -> None:
    card = ApprovalCard(approval({}, {"readOnlyHint": True}))
    qtbot.addWidget(card)
    card.open()
    assert find(card, QLabel, "warnings").text() == "⚠ The server says this tool only reads: it changes nothing."
    with qtbot.waitSignal(card.answered) as answered:
        qtbot.keyClick(card, Qt.Key.Key_Escape)
    assert answered.args == ["cancel", None]


def test_fold_keeps_short_text_whole() -> None:
    assert fold("short") == ("short", False)
    assert fold("abcdef", limit=3) == ("abc… (3 more characters)", True)


def test_the_window_draws_approvals_as_approval_cards_and_answers_the_decision(
        qtbot: QtBot, window: MainWindow) -> None:
    window.on_invoked(approval({"path": "/x"}))
    card = window.current_card()
    assert isinstance(card, ApprovalCard)
    with qtbot.waitSignal(window.answer_ready) as answered:
        qtbot.mouseClick(find(card, QPushButton, "deny"), Qt.MouseButton.LeftButton)
    assert answered.args == ["c-approval", "accept", {"decision": "deny"}]


def test_a_reason_typed_on_an_approval_goes_with_a_deny_only_capped_and_on_one_line(
        qtbot: QtBot, window: MainWindow) -> None:
    window.on_invoked(approval({"path": "/etc/hosts"}, channel="c-denied"))
    card = window.current_card()
    assert isinstance(card, ApprovalCard)
    reason = find(card, QLineEdit, "deny_reason")
    assert reason.maxLength() == REASON_MAX_CHARS and reason.isVisibleTo(card)
    qtbot.keyClicks(reason, "x" * (REASON_MAX_CHARS + 20))  # the field takes no more than the wire does
    assert len(reason.text()) == REASON_MAX_CHARS
    reason.setText("not\tthat file,\u202e please")  # pasted: one line of plain text reaches main
    with qtbot.waitSignal(window.answer_explained) as answered:
        qtbot.mouseClick(find(card, QPushButton, "deny"), Qt.MouseButton.LeftButton)
    assert answered.args == ["c-denied", "accept", {"decision": "deny"}, "not that file, please"]

    window.on_invoked(approval({"path": "/tmp/x"}, channel="c-allowed"))  # typed, then allowed: nothing sent
    allowed = window.current_card()
    assert isinstance(allowed, ApprovalCard)
    find(allowed, QLineEdit, "deny_reason").setText("never mind")
    with qtbot.waitSignal(window.answer_ready) as plain:
        qtbot.mouseClick(find(allowed, QPushButton, "approve_once"), Qt.MouseButton.LeftButton)
    assert plain.args == ["c-allowed", "accept", {"decision": "allow-once"}]


def test_a_form_card_offers_remember_my_answer_and_the_window_sends_the_choice(
        qtbot: QtBot, window: MainWindow) -> None:
    window.on_invoked(form("c-1"))
    card = window.current_card()
    assert isinstance(card, ElicitationCard)
    scope = find(card, QComboBox, "remember_scope")
    assert [scope.itemText(i) for i in range(scope.count())] == [
        "Don't remember", "Remember for this session", "Remember always", "Remember until…"]
    until = find(card, QDateEdit, "remember_until")
    assert not until.isVisibleTo(card)
    scope.setCurrentIndex(3)
    assert until.isVisibleTo(card)
    until.setDate(QDate(2031, 5, 3))
    with qtbot.waitSignal(window.answer_remembered) as answered:
        qtbot.mouseClick(find(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
    channel, action, content, remember = answered.args
    assert (channel, action, content) == ("c-1", "accept", {"name": "Ada"})
    assert remember == messages.Remember(scope="until", until=end_of_day_ms(datetime.date(2031, 5, 3)))

    window.on_invoked(form("c-2"))  # not chosen: a plain answer, as any window sends it
    with qtbot.waitSignal(window.answer_ready) as plain:
        qtbot.mouseClick(find(window.current_card(), QPushButton, "decline"), Qt.MouseButton.LeftButton)
    assert plain.args == ["c-2", "decline", None]


def test_until_a_date_includes_that_whole_day() -> None:
    day = datetime.date(2031, 5, 3)
    last = datetime.datetime.fromtimestamp(end_of_day_ms(day) / 1000)
    assert (last.date(), last.hour, last.minute) == (day, 23, 59)


def test_the_remembered_panel_revokes_user_rules_and_shows_config_rules_read_only(qtbot: QtBot) -> None:
    panel = RememberedPanel()
    qtbot.addWidget(panel)
    panel.show()
    rules = [
        messages.RuleInfo(id="config-1", source="config", kind="tool", server="files", scope="always", created_at=1,
                          created_by="config /home/u/mcp.json", tool="read_*", decision="allow"),
        messages.RuleInfo(id="r-1", source="user", kind="answer", server="demo", scope="session", created_at=2,
                          created_by="left (w1)", message="Your name?", fields=["name"], action="accept"),
    ]
    panel.set_rules(rules)
    assert panel.rows() == ["files: tool read_* → allow · config", "demo: “Your name?” → accept (name) · this session"]
    shown = find(panel, QListWidget, "remembered")
    assert shown.item(1).toolTip().startswith("r-1: “Your name?” → accept (name)\nmade by left (w1), ")
    assert shown.item(0).toolTip().endswith("config rule: change it in the config file")
    revoke = find(panel, QPushButton, "rule_revoke")
    panel.select("config-1")
    assert not revoke.isEnabled()
    panel.select("r-1")
    with qtbot.waitSignal(panel.revoke_requested) as requested:
        qtbot.mouseClick(revoke, Qt.MouseButton.LeftButton)
    assert requested.args == [["r-1"], False]
    panel.on_reply("revoke-1", messages.ChannelReply(revoked=messages.RevokeReport(
        revoked=[], refused=["r-1: no such rule"])))
    assert find(panel, QLabel, "remembered_status").text() == "Nothing was revoked.\nNot revoked: r-1: no such rule"
    panel.set_rules(rules[:1])
    assert not find(panel, QPushButton, "rule_revoke_all").isEnabled()
    panel.set_rules([])
    assert find(panel, QLabel, "remembered_empty").isVisible()


def test_remember_says_whose_question_it_is_and_the_panel_shows_askers_hosts_and_rules_not_applying(
        qtbot: QtBot, window: MainWindow) -> None:
    window.on_invoked(form("c-server"))
    card = window.current_card()
    assert isinstance(card, ElicitationCard)
    assert find(card, QLabel, "remember_label").text() == "Remember my answer to the server demo:"
    asked = messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server="demo", params=form().request.params), response_channel="c-ask",
        created_at=3, expires_at=None, origin=None, kind="question", asker=messages.AskerInfo(name="demo", pid=7))
    question = ElicitationCard(asked, offers=offers_for(asked, remember=True))
    qtbot.addWidget(question)
    assert find(question, QLabel, "remember_label").text() == "Remember my answer to the program demo:"

    panel = RememberedPanel()
    qtbot.addWidget(panel)
    panel.set_rules([
        messages.RuleInfo(id="r-1", source="user", kind="answer", server="deploy.sh", scope="always", created_at=1,
                          created_by="w", message="Tag?", fields=["tag"], action="accept", party="asker"),
        messages.RuleInfo(id="r-2", source="user", kind="tool", server="files", scope="session", created_at=2,
                          created_by="w", tool="write_file", decision="allow", host="Claude Desktop"),
        messages.RuleInfo(id="r-3", source="user", kind="tool", server="files", scope="always", created_at=3,
                          created_by="w", tool="read_file", decision="allow", applies=False),
    ])
    assert panel.rows() == [
        "program deploy.sh: “Tag?” → accept (tag) · always",
        "files: tool write_file → allow (Claude Desktop only) · this session",
        "files: tool read_file → allow [not applying: files is another program now; asked again] · always"]
