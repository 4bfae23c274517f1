"""MainWindow fed through its slots, as the bridge would: queue, dismissals, servers, tool calls."""

from typing import Any

import pytest
from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
)
from pytestqt.qtbot import QtBot

from renderer_process.card import ElicitationCard
from renderer_process.main_window import MainWindow
from shared import messages

ME = "0190a000-0000-7000-8000-00000000000a"
OTHER = "0190a000-0000-7000-8000-00000000000b"


def invoke(
    channel: str, created_at: int, server: str = "demo", message: str = "hi"
) -> messages.ElicitationInvoke:
    params = {
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}},
    }
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server=server, params=params),
        response_channel=channel,
        created_at=created_at,
        expires_at=None,
        origin=None,
    )


def welcome(pending: list[messages.ElicitationInvoke] | None = None) -> messages.Welcome:
    servers = [
        messages.ServerInfo(name="demo", status="ready", tools=["ask_form", "ask_url"]),
        messages.ServerInfo(name="weather", status="failed", tools=[], error="exit code 1"),
    ]
    return messages.Welcome(session="s", window=ME, servers=servers, pending=pending or [])


def find[T: QObject](parent: QObject, kind: type[T], name: str) -> T:
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


def shown(window: MainWindow) -> ElicitationCard:
    card = window.current_card()
    assert card is not None and card.isVisible()
    return card


def queue_text(window: MainWindow) -> str:
    label = find(window, QLabel, "queue")
    return label.text() if label.isVisible() else ""


def test_oldest_request_first_and_the_rest_counted_by_server(window: MainWindow) -> None:
    window.on_invoked(invoke("c-newer", 300, message="newer"))
    assert shown(window).invoke.response_channel == "c-newer"  # nothing older known yet
    window.on_invoked(invoke("c-old", 100, server="weather"))
    window.on_invoked(invoke("c-mid", 200))
    window.on_invoked(invoke("c-mid", 200))  # duplicate delivery is ignored
    assert window.queued_count() == 2
    assert queue_text(window) == "2 more waiting (weather: 1, demo: 1)"
    assert find(shown(window), QLabel, "waiting").text() == "2 more waiting (weather: 1, demo: 1)"

    shown(window).reject()  # user presses Esc on the current card
    assert shown(window).invoke.response_channel == "c-old"
    assert queue_text(window) == "1 more waiting (demo: 1)"
    shown(window).reject()
    assert shown(window).invoke.response_channel == "c-mid"
    assert queue_text(window) == ""
    shown(window).reject()
    assert window.current_card() is None


def test_an_answer_is_emitted_with_its_channel_and_the_next_card_opens(
    qtbot: QtBot, window: MainWindow
) -> None:
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    card = shown(window)
    with qtbot.waitSignal(window.answer_ready, timeout=1000) as answered:
        qtbot.mouseClick(find(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
    assert answered.args == ["c-1", "accept", {"n": 1}]
    assert shown(window).invoke.response_channel == "c-2"
    assert window.queued_count() == 0


def test_welcome_pending_is_queued_like_invokes(window: MainWindow) -> None:
    window.on_welcomed(welcome([invoke("p-2", 20, server="demo"), invoke("p-1", 10, server="demo")]))
    assert shown(window).invoke.response_channel == "p-1"
    assert queue_text(window) == "1 more waiting (demo: 1)"


@pytest.mark.parametrize(
    ("reason", "by", "status"),
    [
        ("answered", OTHER, "demo: answered in another window"),
        ("cancelled", None, "demo: cancelled by the server"),
        ("expired", None, "demo: expired"),
        ("server-closed", None, "demo: server closed"),
    ],
)
def test_dismiss_closes_the_current_card_without_answering(
    qtbot: QtBot, window: MainWindow, reason: messages.DismissReason, by: str | None, status: str
) -> None:
    answers: list[Any] = []
    window.answer_ready.connect(lambda *args: answers.append(args))
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    card = shown(window)
    window.on_dismissed(messages.ElicitationDismiss(response_channel="c-1", reason=reason, by=by))
    assert not card.isVisible()
    assert window.statusBar().currentMessage() == status
    assert shown(window).invoke.response_channel == "c-2"
    assert answers == []


def test_dismiss_of_a_queued_request_removes_it_from_the_queue(window: MainWindow) -> None:
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    window.on_invoked(invoke("c-3", 3, server="weather"))
    window.on_dismissed(messages.ElicitationDismiss(response_channel="c-2", reason="cancelled"))
    assert window.queued_count() == 1
    assert queue_text(window) == "1 more waiting (weather: 1)"
    assert shown(window).invoke.response_channel == "c-1"


def test_reconnect_welcome_drops_what_main_no_longer_holds(window: MainWindow) -> None:
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    card = shown(window)
    window.on_welcomed(welcome([invoke("c-2", 2), invoke("c-9", 9)]))
    assert not card.isVisible()
    assert shown(window).invoke.response_channel == "c-2"
    assert queue_text(window) == "1 more waiting (demo: 1)"


def test_a_not_sent_answer_comes_back(qtbot: QtBot, window: MainWindow) -> None:
    window.on_invoked(invoke("c-1", 1))
    with qtbot.waitSignal(window.answer_ready, timeout=1000):
        shown(window).reject()
    assert window.current_card() is None
    window.on_refused(messages.ErrorNotice(code="not-sent", message="not connected to main", topic="c-1"))
    assert shown(window).invoke.response_channel == "c-1"
    assert "please answer again" in window.statusBar().currentMessage()


def test_refusals_and_connection_state_are_visible(window: MainWindow) -> None:
    window.on_state_changed("disconnected - reconnecting")
    assert find(window, QLabel, "state").text() == "disconnected - reconnecting"
    window.on_refused(messages.ErrorNotice(code="bad-token", message="token does not match", topic="hello"))
    assert window.statusBar().currentMessage() == "main refused hello: token does not match"


def tree_rows(tree: QTreeWidget) -> list[tuple[str, str, list[str]]]:
    """What the servers tree reads: (name, status, tool names) per server."""
    rows = []
    for server in children(tree.invisibleRootItem()):
        rows.append((server.text(0), server.text(1), [tool.text(0) for tool in children(server)]))
    return rows


def children(item: QTreeWidgetItem) -> list[QTreeWidgetItem]:
    found = [item.child(i) for i in range(item.childCount())]
    return [child for child in found if child is not None]


def test_servers_tree_shows_status_errors_and_tools(window: MainWindow) -> None:
    window.on_welcomed(welcome())
    tree = find(window, QTreeWidget, "servers")
    assert tree_rows(tree) == [
        ("demo", "ready", ["ask_form", "ask_url"]),
        ("weather", "failed: exit code 1", []),
    ]
    window.on_servers_changed([messages.ServerInfo(name="demo", status="restarting", tools=["ask_form"])])
    assert tree_rows(tree) == [("demo", "restarting", ["ask_form"])]


def test_tool_call_sends_json_arguments_and_logs_the_reply(qtbot: QtBot, window: MainWindow) -> None:
    window.on_welcomed(welcome())
    assert find(window, QComboBox, "call_server").currentText() == "demo"
    tool_combo = find(window, QComboBox, "call_tool")
    assert [tool_combo.itemText(i) for i in range(tool_combo.count())] == ["ask_form", "ask_url"]
    tool_combo.setCurrentText("ask_url")
    find(window, QPlainTextEdit, "call_arguments").setPlainText('{"who": "Ada", "n": 2}')
    with qtbot.waitSignal(window.call_requested, timeout=1000) as requested:
        qtbot.mouseClick(find(window, QPushButton, "call"), Qt.MouseButton.LeftButton)
    channel, server, tool, arguments = requested.args
    assert (server, tool, arguments) == ("demo", "ask_url", {"who": "Ada", "n": 2})
    assert channel.startswith("call-")

    results = find(window, QPlainTextEdit, "results")
    reply = messages.ChannelReply(
        result={"content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "Ada"}]}
    )
    window.on_replied(channel, reply)
    assert results.toPlainText().splitlines()[-2:] == ["demo/ask_url: hello", "Ada"]
    window.on_replied("call-someone-else", reply)  # not ours: not logged
    window.on_replied(channel, reply)  # a channel answers once
    assert results.toPlainText().count("hello") == 1


def test_tool_call_error_reply_is_logged_with_its_code(qtbot: QtBot, window: MainWindow) -> None:
    window.on_welcomed(welcome())
    with qtbot.waitSignal(window.call_requested, timeout=1000) as requested:
        qtbot.mouseClick(find(window, QPushButton, "call"), Qt.MouseButton.LeftButton)
    channel = requested.args[0]
    assert requested.args[3] == {}  # empty arguments mean {}
    window.on_replied(
        channel, messages.ChannelReply(error=messages.CallError(code=-32601, message="no such tool"))
    )
    assert (
        find(window, QPlainTextEdit, "results")
        .toPlainText()
        .endswith("demo/ask_form: error -32601: no such tool")
    )


@pytest.mark.parametrize(
    ("text", "error"), [("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object")]
)
def test_invalid_json_arguments_are_refused_inline(
    qtbot: QtBot, window: MainWindow, text: str, error: str
) -> None:
    window.on_welcomed(welcome())
    calls: list[Any] = []
    window.call_requested.connect(lambda *args: calls.append(args))
    find(window, QPlainTextEdit, "call_arguments").setPlainText(text)
    qtbot.mouseClick(find(window, QPushButton, "call"), Qt.MouseButton.LeftButton)
    label = find(window, QLabel, "call_error")
    assert label.isVisible() and error in label.text()
    assert calls == []


def test_closing_the_window_does_not_answer_for_the_user(qtbot: QtBot, window: MainWindow) -> None:
    answers: list[Any] = []
    window.answer_ready.connect(lambda *args: answers.append(args))
    window.on_invoked(invoke("c-1", 1))
    card = shown(window)
    qtbot.keyClicks(find(card, QLineEdit, "field:n"), "5")
    window.close()
    assert not card.isVisible()
    assert answers == []
