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
    QWidget,
)
from pytestqt.qtbot import QtBot

from renderer_process import card_area
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
    assert isinstance(card, ElicitationCard) and card.isVisible(), card
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


def shown_soon(qtbot: QtBot, window: MainWindow) -> ElicitationCard:
    """The card once it is up (after a welcome, the window lets main's peers list land first)."""
    qtbot.waitUntil(lambda: window.current_card() is not None, timeout=2000)
    return shown(window)


def test_welcome_pending_is_queued_like_invokes(qtbot: QtBot, window: MainWindow) -> None:
    window.on_welcomed(welcome([invoke("p-2", 20, server="demo"), invoke("p-1", 10, server="demo")]))
    assert shown_soon(qtbot, window).invoke.response_channel == "p-1"
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


def test_reconnect_welcome_drops_what_main_no_longer_holds(qtbot: QtBot, window: MainWindow) -> None:
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    card = shown(window)
    window.on_welcomed(welcome([invoke("c-2", 2), invoke("c-9", 9)]))
    assert not card.isVisible()
    assert shown_soon(qtbot, window).invoke.response_channel == "c-2"
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
    """What the servers tree reads: (name, status, lines under it: error first, then tools)."""
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
        ("weather", "failed", ["exit code 1"]),
    ]
    weather = tree.topLevelItem(1)
    assert weather is not None and weather.toolTip(1) == "failed: exit code 1"
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


# ---- origin affinity: requests of another attached window ----------------------------------------


def from_window(
    channel: str, created_at: int, origin: str | None, **kwargs: Any
) -> messages.ElicitationInvoke:
    item = invoke(channel, created_at, **kwargs)
    return messages.ElicitationInvoke(
        request=item.request,
        response_channel=channel,
        created_at=created_at,
        expires_at=None,
        origin=origin,
    )


def peers(*others: tuple[str, str, messages.Role]) -> list[messages.PeerInfo]:
    listed = [messages.PeerInfo(window=ME, name="test", role="renderer")]
    return listed + [messages.PeerInfo(window=w, name=n, role=r) for w, n, r in others]


def elsewhere_lines(window: MainWindow) -> list[str]:
    """What the "waiting in another window" list reads (empty when it is hidden)."""
    box = find(window, QWidget, "elsewhere")
    if not box.isVisible():
        return []
    return [label.text() for label in box.findChildren(QLabel, "elsewhere_item") if label.isVisible()]


def answer_here_buttons(window: MainWindow) -> list[QPushButton]:
    box = find(window, QWidget, "elsewhere")
    return [b for b in box.findChildren(QPushButton, "answer_here") if b.isVisible()]


@pytest.mark.parametrize(
    ("origin", "listed_peers"),
    [
        (ME, peers((OTHER, "left", "renderer"))),  # our own tool call
        (None, peers((OTHER, "left", "renderer"))),  # nobody's
        (OTHER, None),  # no peers list yet: treated as gone
        (OTHER, peers()),  # its window is not attached
        (OTHER, peers((OTHER, "elicitron call", "controller"))),  # a controller cannot answer
    ],
)
def test_requests_that_are_ours_to_answer_show_as_the_card(
    window: MainWindow, origin: str | None, listed_peers: list[messages.PeerInfo] | None
) -> None:
    if listed_peers is not None:
        window.on_peers_changed(listed_peers)
    window.on_invoked(from_window("c-1", 1, origin))
    assert shown(window).invoke.response_channel == "c-1"
    assert elsewhere_lines(window) == []


def test_a_request_of_another_attached_window_is_listed_not_shown(qtbot: QtBot, window: MainWindow) -> None:
    window.on_peers_changed(peers((OTHER, "left", "renderer")))
    window.on_invoked(from_window("c-1", 1, OTHER, message="Pick a colour"))
    window.on_invoked(from_window("c-0", 0, OTHER, server="weather", message="Which city?"))
    assert window.current_card() is None
    assert queue_text(window) == ""
    assert find(window, QLabel, "elsewhere_title").text() == "2 waiting in another window"
    assert elsewhere_lines(window) == [
        "weather: Which city? — in window “left”",
        "demo: Pick a colour — in window “left”",
    ]

    qtbot.mouseClick(answer_here_buttons(window)[1], Qt.MouseButton.LeftButton)  # the demo one
    card = shown(window)
    assert card.invoke.response_channel == "c-1"
    assert elsewhere_lines(window) == ["weather: Which city? — in window “left”"]
    with qtbot.waitSignal(window.answer_ready, timeout=1000) as answered:
        qtbot.mouseClick(find(card, QPushButton, "decline"), Qt.MouseButton.LeftButton)
    assert answered.args == ["c-1", "decline", None]
    assert window.current_card() is None  # the other window's request stays listed, not modal


def test_when_the_origin_window_detaches_its_requests_come_here_oldest_first(window: MainWindow) -> None:
    third = "0190a000-0000-7000-8000-00000000000c"
    window.on_peers_changed(peers((OTHER, "left", "renderer"), (third, "right", "renderer")))
    window.on_invoked(from_window("c-3", 3, OTHER))
    window.on_invoked(from_window("c-1", 1, OTHER))
    window.on_invoked(from_window("c-2", 2, third))
    assert window.current_card() is None and len(elsewhere_lines(window)) == 3

    window.on_peers_changed(peers((third, "right", "renderer")))  # "left" is gone
    assert shown(window).invoke.response_channel == "c-1"
    assert queue_text(window) == "1 more waiting (demo: 1)"
    assert elsewhere_lines(window) == ["demo: hi — in window “right”"]
    shown(window).reject()
    assert shown(window).invoke.response_channel == "c-3"


def test_dismissals_remove_requests_from_the_other_window_list(window: MainWindow) -> None:
    window.on_peers_changed(peers((OTHER, "left", "renderer")))
    window.on_invoked(from_window("c-1", 1, OTHER))
    window.on_invoked(from_window("c-2", 2, OTHER))
    window.on_dismissed(messages.ElicitationDismiss(response_channel="c-1", reason="answered", by=OTHER))
    assert elsewhere_lines(window) == ["demo: hi — in window “left”"]
    window.on_dismissed(messages.ElicitationDismiss(response_channel="c-2", reason="expired"))
    assert elsewhere_lines(window) == []
    assert not find(window, QWidget, "elsewhere").isVisible()
    window.on_peers_changed(peers())  # nothing comes back once dismissed
    assert window.current_card() is None


def test_a_new_window_does_not_pop_up_a_request_another_window_is_showing(
    qtbot: QtBot, window: MainWindow
) -> None:
    # main sends `peers` right after `welcome`; they are handled in the same turn of the loop.
    window.on_welcomed(welcome([from_window("p-1", 1, OTHER), from_window("p-2", 2, None)]))
    window.on_peers_changed(peers((OTHER, "left", "renderer")))
    assert shown_soon(qtbot, window).invoke.response_channel == "p-2"
    assert elsewhere_lines(window) == ["demo: hi — in window “left”"]


# ---- dismiss wording ------------------------------------------------------------------------------


def test_cancelled_by_the_server_is_shown_only_briefly(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(card_area, "BRIEF_MS", 150)  # a few seconds in real life
    window.on_invoked(invoke("c-1", 1))
    window.on_dismissed(messages.ElicitationDismiss(response_channel="c-1", reason="cancelled"))
    assert window.statusBar().currentMessage() == "demo: cancelled by the server"
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "", timeout=2000)

    window.on_invoked(invoke("c-2", 2))
    window.on_dismissed(messages.ElicitationDismiss(response_channel="c-2", reason="server-closed"))
    assert window.statusBar().currentMessage() == "demo: server closed"


# ---- servers panel: status, errors, control, reload ------------------------------------------------


def test_failed_and_restarting_servers_show_their_error_under_the_row(window: MainWindow) -> None:
    tree = find(window, QTreeWidget, "servers")
    stderr_tail = (
        "Traceback (most recent call last):\n  File x\n    import foo\nImportError: no module named foo"
    )
    window.on_servers_changed(
        [
            messages.ServerInfo(name="a", status="starting", tools=[]),
            messages.ServerInfo(name="b", status="ready", tools=["t"]),
            messages.ServerInfo(name="c", status="restarting", tools=[], error="exit code 3"),
            messages.ServerInfo(name="d", status="failed", tools=[], error=stderr_tail),
            messages.ServerInfo(name="e", status="stopped", tools=[]),
        ]
    )
    assert tree_rows(tree) == [
        ("a", "starting", []),
        ("b", "ready", ["t"]),
        ("c", "restarting", ["exit code 3"]),
        ("d", "failed", ["  File x\n    import foo\nImportError: no module named foo"]),  # last 3 lines
        ("e", "stopped", []),
    ]
    d_row = tree.topLevelItem(3)
    assert d_row is not None and d_row.toolTip(0) == f"failed: {stderr_tail}"


def select_server(window: MainWindow, name: str) -> None:
    tree = find(window, QTreeWidget, "servers")
    row = next(item for item in children(tree.invisibleRootItem()) if item.text(0) == name)
    tree.setCurrentItem(row)


def test_start_stop_restart_act_on_the_selected_server_and_replies_are_logged(
    qtbot: QtBot, window: MainWindow
) -> None:
    window.on_welcomed(welcome())  # demo ready, weather failed
    start, stop, restart = (find(window, QPushButton, f"server_{a}") for a in ("start", "stop", "restart"))
    select_server(window, "demo")
    assert (start.isEnabled(), stop.isEnabled(), restart.isEnabled()) == (False, True, True)
    with qtbot.waitSignal(window.control_requested, timeout=1000) as requested:
        qtbot.mouseClick(restart, Qt.MouseButton.LeftButton)
    channel, server, action = requested.args
    assert (server, action) == ("demo", "restart")
    window.on_replied(channel, messages.ChannelReply(control=messages.ServerControlReport(server="demo",
                                                                                         status="ready")))
    results = find(window, QPlainTextEdit, "results")
    assert results.toPlainText().splitlines()[-2:] == ["→ restart demo", "restart demo: ok (demo: ready)"]

    select_server(window, "weather")
    assert (start.isEnabled(), stop.isEnabled()) == (True, True)
    with qtbot.waitSignal(window.control_requested, timeout=1000) as requested:
        qtbot.mouseClick(start, Qt.MouseButton.LeftButton)
    assert requested.args[1:] == ["weather", "start"]
    error = messages.CallError(code=-32602, message="unknown server 'weather'")
    window.on_replied(requested.args[0], messages.ChannelReply(error=error))
    assert results.toPlainText().endswith("start weather: error -32602: unknown server 'weather'")

    window.on_servers_changed([messages.ServerInfo(name="weather", status="stopped", tools=[])])
    assert (start.isEnabled(), stop.isEnabled()) == (True, False)  # the selection survives updates


def test_reload_config_asks_main_and_logs_what_changed(qtbot: QtBot, window: MainWindow) -> None:
    window.on_welcomed(welcome())
    with qtbot.waitSignal(window.reload_requested, timeout=1000) as requested:
        qtbot.mouseClick(find(window, QPushButton, "reload"), Qt.MouseButton.LeftButton)
    done = messages.ReloadReport(added=["notes"], removed=[], changed=["demo"], unchanged=["weather"])
    window.on_replied(requested.args[0], messages.ChannelReply(reload=done))
    assert find(window, QPlainTextEdit, "results").toPlainText().splitlines()[-2:] == [
        "→ reload config",
        "reload config: ok (added: notes; removed: none; changed: demo; unchanged: weather)",
    ]


# ---- notices ---------------------------------------------------------------------------------------


def test_notices_show_in_the_status_bar_and_the_results_log_with_their_level(window: MainWindow) -> None:
    window.on_noticed(
        messages.Notice(
            level="warning", message="unsupported requestedSchema: 'x' is an object", server="demo"
        )
    )
    expected = "[warning] demo: unsupported requestedSchema: 'x' is an object"
    assert window.statusBar().currentMessage() == expected
    window.on_noticed(messages.Notice(level="info", message="config reloaded"))
    assert window.statusBar().currentMessage() == "[info] config reloaded"
    assert find(window, QPlainTextEdit, "results").toPlainText().splitlines()[-2:] == [
        expected,
        "[info] config reloaded",
    ]


# ---- decline all from a server -----------------------------------------------------------------------


def test_decline_all_sends_the_policy_declines_this_card_and_can_be_undone(
    qtbot: QtBot, window: MainWindow
) -> None:
    window.on_welcomed(welcome())
    policies: list[tuple[str, bool]] = []
    window.policy_requested.connect(lambda server, decline: policies.append((server, decline)))
    answers: list[Any] = []
    window.answer_ready.connect(lambda *args: answers.append(args))
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    qtbot.mouseClick(find(shown(window), QPushButton, "decline_all"), Qt.MouseButton.LeftButton)
    assert policies == [("demo", True)]
    assert answers == [("c-1", "decline", None)]
    assert (
        shown(window).invoke.response_channel == "c-2"
    )  # already queued: main resolves it, still answerable
    tree = find(window, QTreeWidget, "servers")
    assert tree_rows(tree)[0][:2] == ("demo", "ready · declining all")

    shown(window).reject()
    select_server(window, "demo")
    allow = find(window, QPushButton, "server_allow")
    assert allow.isVisible()
    qtbot.mouseClick(allow, Qt.MouseButton.LeftButton)
    assert policies == [("demo", True), ("demo", False)]
    assert tree_rows(tree)[0][:2] == ("demo", "ready")
    assert not allow.isVisible()


# ---- URL mode completion -----------------------------------------------------------------------------


def url_invoke(channel: str, elicitation_id: str, server: str = "demo") -> messages.ElicitationInvoke:
    params = {
        "mode": "url",
        "message": "Sign in",
        "url": "https://example.com/",
        "elicitationId": elicitation_id,
    }
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server=server, params=params),
        response_channel=channel,
        created_at=1,
        expires_at=None,
        origin=None,
    )


def complete(elicitation_id: str, server: str = "demo") -> messages.ElicitationComplete:
    return messages.ElicitationComplete(server=server, elicitation_id=elicitation_id)


def test_completion_closes_the_matching_url_card_only(window: MainWindow) -> None:
    answers: list[Any] = []
    window.answer_ready.connect(lambda *args: answers.append(args))
    window.on_invoked(url_invoke("c-1", "e-1"))
    window.on_invoked(invoke("c-2", 2))
    card = shown(window)
    window.on_completed(complete("e-unknown"))
    window.on_completed(complete("e-1", server="weather"))  # same id, other server
    assert shown(window) is card
    window.on_completed(complete("e-1"))
    assert not card.isVisible()
    assert window.statusBar().currentMessage() == "demo: the linked page reported it is done"
    assert shown(window).invoke.response_channel == "c-2"
    window.on_completed(complete("e-1"))  # repeated: nothing else closes
    assert shown(window).invoke.response_channel == "c-2"
    assert answers == []


def test_an_accepted_url_waits_for_the_browser_until_completion(qtbot: QtBot, window: MainWindow) -> None:
    waiting = find(window, QWidget, "url_waiting")
    window.on_invoked(url_invoke("c-1", "e-1"))
    window.on_invoked(url_invoke("c-2", "e-2"))
    with qtbot.waitSignal(window.answer_ready, timeout=1000):
        qtbot.mouseClick(find(shown(window), QPushButton, "accept"), Qt.MouseButton.LeftButton)
    assert waiting.isVisible()
    assert find(window, QLabel, "url_waiting_text").text() == "Waiting for the browser: demo — Sign in"
    window.on_completed(complete("e-9"))  # unknown: ignored
    assert waiting.isVisible() and shown(window).invoke.response_channel == "c-2"
    window.on_completed(complete("e-1"))
    assert not waiting.isVisible()
    assert shown(window).invoke.response_channel == "c-2"  # the other URL card is untouched
    window.on_completed(complete("e-1"))
    assert shown(window).invoke.response_channel == "c-2"


# ---- welcome replay with `pendingChannels` (main may send part of the pending list as invokes) ----


class WelcomeWithChannels(messages.Welcome):
    """`welcome` as main sends it with the optional `pendingChannels` (works before and after
    shared.messages.Welcome has the field)."""

    pending_channels: list[str] | None = None


def test_pending_channels_keep_a_card_whose_invoke_follows_the_welcome(
    qtbot: QtBot, window: MainWindow
) -> None:
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    card = shown(window)
    # main restarted its delivery: only c-3 inside the welcome; c-1 and c-2 come as invokes after it.
    window.on_welcomed(WelcomeWithChannels(session="s", window=ME, servers=[], pending=[invoke("c-3", 3)],
                                           pending_channels=["c-1", "c-2", "c-3"]))
    assert shown_soon(qtbot, window) is card and card.isVisible()
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    assert shown(window) is card
    assert window.queued_count() == 2
    assert queue_text(window) == "2 more waiting (demo: 2)"


def test_pending_channels_still_drop_what_main_no_longer_holds(qtbot: QtBot, window: MainWindow) -> None:
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    card = shown(window)
    window.on_welcomed(WelcomeWithChannels(session="s", window=ME, servers=[], pending=[],
                                           pending_channels=["c-2"]))
    assert not card.isVisible()
    assert shown_soon(qtbot, window).invoke.response_channel == "c-2"
    assert window.queued_count() == 0




# ---- main gone -------------------------------------------------------------------------------------


def banner_text(window: MainWindow) -> str:
    visible = find(window, QWidget, "main_banner").isVisible()
    return find(window, QLabel, "main_banner_text").text() if visible else ""


def test_lost_contact_then_main_gone_then_back(qtbot: QtBot, window: MainWindow) -> None:
    answers: list[Any] = []
    window.answer_ready.connect(lambda *args: answers.append(args))
    window.on_welcomed(welcome())
    window.on_state_changed("connected")
    window.on_invoked(invoke("c-1", 1))
    window.on_invoked(invoke("c-2", 2))
    assert banner_text(window) == ""

    window.on_state_changed("disconnected - reconnecting")  # main fell silent
    assert banner_text(window).startswith("Lost contact with main")
    assert shown(window).invoke.response_channel == "c-1"  # it may come back: the card stays
    assert not find(window, QPushButton, "reload").isEnabled()

    window.on_main_missing(True)  # its connection file is gone: it was stopped
    assert "main is not running" in banner_text(window)
    assert window.current_card() is None and window.queued_count() == 0
    assert window.statusBar().currentMessage() == "main stopped: its requests are gone"
    assert window.windowTitle() == "Elicitron — test"
    assert answers == []  # nothing was answered for the user

    window.on_main_missing(False)
    window.on_welcomed(messages.Welcome(session="s2", window=ME, servers=welcome().servers, pending=[]))
    window.on_state_changed("connected")
    assert banner_text(window) == ""
    assert find(window, QPushButton, "reload").isEnabled()


def test_a_hostile_schema_still_shows_a_card_the_user_can_decline(
    qtbot: QtBot, window: MainWindow
) -> None:
    hostile = {"mode": "form", "message": "hi", "requestedSchema": {
        "type": "object", "properties": {"x": {"type": "string", "maxLength": 2**40, "default": "ok"},
                                         "n": {"type": "integer", "minimum": "x", "default": 1}}}}
    window.on_invoked(messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server="demo", params=hostile), response_channel="c-1",
        created_at=1, expires_at=2**62, origin=None))
    card = shown(window)  # a form that cannot be accepted, or a notice if check_schema refuses it
    accept = find(card, QPushButton, "accept")
    assert card.kind in ("form", "notice") and not (accept.isVisible() and accept.isEnabled())
    with qtbot.waitSignal(window.answer_ready, timeout=1000) as answered:
        qtbot.mouseClick(find(card, QPushButton, "decline"), Qt.MouseButton.LeftButton)
    assert answered.args == ["c-1", "decline", None]
