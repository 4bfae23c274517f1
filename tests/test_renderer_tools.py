"""The call panel's argument form, built from a tool's inputSchema, and the readable result.

Most tests drive MainWindow through its slots (as the bridge would) with the tools/list answer a
server would give; the last ones call a real server's tools through a real main."""

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from kit.main import RunningMain
from kit.zygote import launched
from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QTreeWidget,
    QWidget,
)
from pytestqt.qtbot import QtBot
from typed_tools_server import PLAN_TRIP
from typed_tools_server import png as small_png

from renderer_process.bridge import MainBridge
from renderer_process.main_window import MainWindow
from shared import messages

TYPED_SERVER = Path(__file__).resolve().parent / "typed_tools_server.py"
ME = "0190a000-0000-7000-8000-00000000000a"

TOOLS = [
    {"name": "plan_trip", "title": "Plan a trip", "description": "Plan a stay.", "inputSchema": PLAN_TRIP},
    {"name": "search", "description": "Search with filters.",
     "inputSchema": {"type": "object", "properties": {"filters": {"type": "object"}}}},
    {"name": "ping", "inputSchema": {"type": "object"}, "annotations": {"title": "Ping the server"}},
]


def find[T: QObject](parent: QObject, kind: type[T], name: str) -> T:
    widget = parent.findChild(kind, name)
    assert widget is not None, f"no {kind.__name__} named {name!r}"
    return widget


def visible_text(window: QWidget, name: str) -> str:
    label = find(window, QLabel, name)
    return label.text() if label.isVisible() else ""


class Main:
    """Answers the window's requests as main would: tools/list from `tools`, calls recorded."""

    def __init__(self, window: MainWindow, tools: list[dict[str, Any]]) -> None:
        self.window = window
        self.tools = tools
        self.tool_lists: list[tuple[str, str, dict[str, Any]]] = []
        self.calls: list[tuple[str, str, str, dict[str, Any]]] = []
        self.answer_lists = True
        window.mcp_requested.connect(self._on_mcp)
        window.call_requested.connect(lambda *args: self.calls.append(args))

    def _on_mcp(self, channel: str, server: str, method: str, params: dict[str, Any]) -> None:
        assert method == "tools/list"
        self.tool_lists.append((channel, server, params))
        if self.answer_lists:
            self.window.on_replied(channel, messages.ChannelReply(result={"tools": self.tools}))


def welcome(tools: list[str]) -> messages.Welcome:
    servers = [messages.ServerInfo(name="typed", status="ready", tools=tools)]
    return messages.Welcome(session="s", window=ME, servers=servers, pending=[])


@pytest.fixture
def window(qtbot: QtBot) -> MainWindow:
    win = MainWindow(window_id=ME, name="test", opener=lambda _url: None, tray_factory=lambda _parent: None)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    return win


def choose(window: MainWindow, tool: str) -> None:
    find(window, QComboBox, "call_tool").setCurrentText(tool)


def press_call(qtbot: QtBot, window: MainWindow) -> tuple[str, str, str, dict[str, Any]]:
    with qtbot.waitSignal(window.call_requested, timeout=1000) as called:
        qtbot.mouseClick(find(window, QPushButton, "call"), Qt.MouseButton.LeftButton)
    assert called.args is not None
    channel, server, tool, arguments = called.args
    return channel, server, tool, arguments


def test_the_form_shows_title_description_and_typed_fields(window: MainWindow) -> None:
    main = Main(window, TOOLS)
    window.on_welcomed(welcome(["plan_trip", "search", "ping"]))
    assert [server for _, server, _ in main.tool_lists] == ["typed"]  # asked once, for the shown server
    assert visible_text(window, "tool_title") == "Plan a trip"
    assert visible_text(window, "tool_description") == "Plan a stay."
    assert not find(window, QPlainTextEdit, "call_arguments").isVisible()
    assert find(window, QLabel, "label:city").text() == "City *"
    assert find(window, QLabel, "label:budget").text() == "Budget per night (EUR)"
    room = find(window, QComboBox, "field:room")
    assert [room.itemText(i) for i in range(room.count())] == ["—", "single", "double", "suite"]
    assert room.currentText() == "double"  # the tool's default
    assert find(window, QListWidget, "field:extras").count() == 3
    assert find(window, QCheckBox, "field:arrival:set").isVisible()
    assert find(window, QLineEdit, "field:city").accessibleName() == "City (required)"
    assert visible_text(window, "arguments_problems") == ""  # marked, not flagged before anything was typed


def test_call_with_an_empty_required_argument_says_so_focuses_it_and_sends_nothing(
        qtbot: QtBot, window: MainWindow) -> None:
    # Issue 37, item 8: the form said "City: is required" in red as it appeared; now only once Call is pressed.
    Main(window, TOOLS)
    window.on_welcomed(welcome(["plan_trip"]))
    qtbot.waitExposed(window)
    nights = find(window, QLineEdit, "field:nights")
    qtbot.keyClicks(nights, "3")
    assert visible_text(window, "arguments_problems") == "" and not find(window, QLabel, "error:city").isVisible()
    calls: list[Any] = []
    window.call_requested.connect(lambda *args: calls.append(args))
    qtbot.mouseClick(find(window, QPushButton, "call"), Qt.MouseButton.LeftButton)
    assert calls == []
    assert find(window, QLabel, "error:city").isVisible() and find(window, QLabel, "error:city").text() == "is required"
    assert "City: is required" in visible_text(window, "arguments_problems")
    city = find(window, QLineEdit, "field:city")
    qtbot.waitUntil(lambda: window.focusWidget() is city, timeout=2000)
    qtbot.keyClicks(city, "Lisbon")
    assert not find(window, QLabel, "error:city").isVisible()
    assert press_call(qtbot, window)[3] == {"city": "Lisbon", "nights": 3}


def test_typed_arguments_and_omitted_optionals(qtbot: QtBot, window: MainWindow) -> None:
    Main(window, TOOLS)
    window.on_welcomed(welcome(["plan_trip"]))
    qtbot.keyClicks(find(window, QLineEdit, "field:city"), "Lisbon")
    qtbot.keyClicks(find(window, QLineEdit, "field:nights"), "3")
    _, server, tool, arguments = press_call(qtbot, window)
    assert (server, tool) == ("typed", "plan_trip")
    assert arguments == {"city": "Lisbon", "nights": 3}  # defaults and empty optionals left out
    assert type(arguments["nights"]) is int

    qtbot.keyClicks(find(window, QLineEdit, "field:budget"), "120.5")
    find(window, QCheckBox, "field:pets").setChecked(True)
    find(window, QComboBox, "field:room").setCurrentText("suite")
    extras = find(window, QListWidget, "field:extras")
    extras.item(1).setCheckState(Qt.CheckState.Checked)
    _, _, _, arguments = press_call(qtbot, window)
    assert arguments == {"city": "Lisbon", "nights": 3, "budget": 120.5, "pets": True, "room": "suite",
                         "extras": ["parking"]}


def test_a_value_the_schema_refuses_blocks_the_call_and_says_why(qtbot: QtBot, window: MainWindow) -> None:
    Main(window, TOOLS)
    window.on_welcomed(welcome(["plan_trip"]))
    qtbot.keyClicks(find(window, QLineEdit, "field:city"), "Lisbon")
    qtbot.keyClicks(find(window, QLineEdit, "field:nights"), "2.5")
    assert "Nights: must be a whole number" in visible_text(window, "arguments_problems")
    find(window, QLineEdit, "field:nights").setText("31")
    assert "at most 30" in visible_text(window, "arguments_problems")
    calls: list[Any] = []
    window.call_requested.connect(lambda *args: calls.append(args))
    qtbot.mouseClick(find(window, QPushButton, "call"), Qt.MouseButton.LeftButton)
    assert calls == []  # nothing the tool would refuse is sent
    assert visible_text(window, "call_error") == "Not called: Nights: must be at most 30"


def test_json_toggle_round_trips_the_arguments(qtbot: QtBot, window: MainWindow) -> None:
    Main(window, TOOLS)
    window.on_welcomed(welcome(["plan_trip"]))
    qtbot.keyClicks(find(window, QLineEdit, "field:city"), "Porto")
    qtbot.keyClicks(find(window, QLineEdit, "field:nights"), "2")
    toggle = find(window, QCheckBox, "arguments_as_json")
    toggle.setChecked(True)
    raw = find(window, QPlainTextEdit, "call_arguments")
    assert raw.isVisible() and json.loads(raw.toPlainText()) == {"city": "Porto", "nights": 2}
    raw.setPlainText('{"city": "Faro", "nights": 4, "pets": true}')
    toggle.setChecked(False)  # back to the form, with what was typed
    assert find(window, QLineEdit, "field:city").text() == "Faro"
    assert find(window, QLineEdit, "field:nights").text() == "4"
    assert find(window, QCheckBox, "field:pets").isChecked()
    _, _, _, arguments = press_call(qtbot, window)
    assert arguments == {"city": "Faro", "nights": 4, "pets": True}

    toggle.setChecked(True)
    raw.setPlainText('{"city": "Faro", "nights": "four"}')
    toggle.setChecked(False)  # does not fit the form: stays in JSON and says so
    assert raw.isVisible() and toggle.isChecked()
    assert visible_text(window, "arguments_problems") != ""


def test_a_schema_the_form_cannot_express_falls_back_to_json(qtbot: QtBot, window: MainWindow) -> None:
    Main(window, TOOLS)
    window.on_welcomed(welcome(["plan_trip", "search", "ping"]))
    choose(window, "search")
    assert "can't be shown as a form (argument 'filters' is an object)" in visible_text(window, "tool_note")
    assert not find(window, QCheckBox, "arguments_as_json").isVisible()
    raw = find(window, QPlainTextEdit, "call_arguments")
    assert raw.isVisible()
    raw.setPlainText('{"filters": {"year": 2024}}')
    assert press_call(qtbot, window)[3] == {"filters": {"year": 2024}}

    choose(window, "ping")  # no properties: a form with nothing to fill in
    assert visible_text(window, "tool_title") == "Ping the server"
    assert visible_text(window, "no_arguments") == "This tool takes no arguments."
    assert press_call(qtbot, window)[3] == {}


def test_tools_are_fetched_again_when_main_reports_new_tool_names(window: MainWindow) -> None:
    main = Main(window, TOOLS)
    window.on_welcomed(welcome(["plan_trip"]))
    window.on_servers_changed(welcome(["plan_trip"]).servers)  # same names: nothing to fetch
    assert len(main.tool_lists) == 1
    new_tool = {"name": "new_tool", "description": "Brand new.", "inputSchema": {"type": "object"}}
    main.tools = [*TOOLS, new_tool]
    window.on_servers_changed(welcome(["plan_trip", "new_tool"]).servers)
    assert len(main.tool_lists) == 2
    choose(window, "new_tool")
    assert visible_text(window, "tool_description") == "Brand new."


def test_json_typed_while_the_schema_loads_stays_what_is_sent(qtbot: QtBot, window: MainWindow) -> None:
    main = Main(window, TOOLS)
    main.answer_lists = False
    window.on_welcomed(welcome(["plan_trip"]))
    assert visible_text(window, "tool_note") == "Loading the tool's arguments…"
    find(window, QPlainTextEdit, "call_arguments").setPlainText('{"city": "Nice", "nights": 1}')
    channel = main.tool_lists[0][0]
    window.on_replied(channel, messages.ChannelReply(result={"tools": TOOLS}))  # the schema arrives
    assert find(window, QPlainTextEdit, "call_arguments").isVisible()
    assert find(window, QCheckBox, "arguments_as_json").isChecked()
    assert press_call(qtbot, window)[3] == {"city": "Nice", "nights": 1}


def test_a_main_without_tools_list_leaves_json(window: MainWindow) -> None:
    main = Main(window, TOOLS)
    main.answer_lists = False
    window.on_welcomed(welcome(["plan_trip"]))
    refusal = messages.ErrorNotice(code="unknown-topic", message="unknown topic", topic="msgMcpRequest")
    window.on_refused(refusal)
    assert "details are unavailable (main refused it: unknown topic)" in visible_text(window, "tool_note")
    assert find(window, QPlainTextEdit, "call_arguments").isVisible()


def test_pages_of_tools_are_gathered(window: MainWindow) -> None:
    asked: list[dict[str, Any]] = []

    def pages(channel: str, _server: str, _method: str, params: dict[str, Any]) -> None:
        asked.append(params)
        first_page = {"tools": TOOLS[:1], "nextCursor": "p2"}
        result: dict[str, Any] = first_page if not params else {"tools": TOOLS[1:]}
        window.on_replied(channel, messages.ChannelReply(result=result))

    window.mcp_requested.connect(pages)
    window.on_welcomed(welcome(["plan_trip", "search", "ping"]))
    assert asked == [{}, {"cursor": "p2"}]
    choose(window, "ping")
    assert visible_text(window, "tool_title") == "Ping the server"


def test_the_result_shows_text_image_and_a_tree(qtbot: QtBot, window: MainWindow) -> None:
    Main(window, TOOLS)
    window.on_welcomed(welcome(["ping"]))
    channel = press_call(qtbot, window)[0]
    png = base64.b64encode(small_png(2, 2)).decode("ascii")
    result = {
        "content": [
            {"type": "text", "text": "done"},
            {"type": "image", "data": png, "mimeType": "image/png"},
        ],
        "structuredContent": {"trip": {"city": "Lisbon", "nights": 3}, "ok": True},
    }
    window.on_replied(channel, messages.ChannelReply(result=result))
    view = window.result_view
    assert view.heading.text() == "typed/ping"
    kinds = [widget.objectName() for widget in view.shown_widgets()]
    assert kinds == ["result_text", "result_image", "result_tree"]
    image = find(view, QLabel, "result_image")
    assert (image.pixmap().width(), image.pixmap().height()) == (2, 2)
    tree = find(view, QTreeWidget, "result_tree")
    trip = tree.topLevelItem(0)
    assert trip is not None and trip.text(0) == "trip" and trip.isExpanded()
    rows = [trip.child(i) for i in range(trip.childCount())]
    assert [(row.text(0), row.text(1)) for row in rows if row is not None] == [
        ("city", '"Lisbon"'), ("nights", "3")
    ]
    channel = press_call(qtbot, window)[0]
    failure = messages.CallError(code=-32001, message="timed out")
    window.on_replied(channel, messages.ChannelReply(error=failure))
    assert view.heading.text() == "typed/ping: the call failed"
    assert find(view, QLabel, "result_error").text() == "error -32001: timed out"


# ---- through a real main and a real server ----------------------------------------------------------


@pytest.fixture
def typed_main(main_factory: Any) -> RunningMain:
    running: RunningMain = main_factory({"typed": launched(TYPED_SERVER)})
    running.wait_server_ready("typed")
    return running


def test_a_tool_called_from_the_form_gets_typed_arguments(qtbot: QtBot, typed_main: RunningMain) -> None:
    bridge = MainBridge(typed_main.connection, "form-window")
    window = MainWindow(name="form-window", tray_factory=lambda _parent: None)
    qtbot.addWidget(window)
    window.attach(bridge)
    window.show()
    bridge.start()
    try:
        qtbot.waitUntil(lambda: window.findChild(QLineEdit, "field:city") is not None, timeout=15_000)
        qtbot.keyClicks(find(window, QLineEdit, "field:city"), "Lisbon")
        qtbot.keyClicks(find(window, QLineEdit, "field:nights"), "3")
        qtbot.mouseClick(find(window, QPushButton, "call"), Qt.MouseButton.LeftButton)
        view = window.result_view
        qtbot.waitUntil(lambda: view.heading.text() == "typed/plan_trip", timeout=15_000)
        received = json.loads(find(view, QLabel, "result_text").text())
        assert received == {"arguments": {"city": "Lisbon", "nights": 3},
                            "types": {"city": "string", "nights": "integer"}}

        choose(window, "show_result")
        qtbot.mouseClick(find(window, QPushButton, "call"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: view.heading.text() == "typed/show_result", timeout=15_000)
        assert find(view, QLabel, "result_image").pixmap().width() == 48
        assert find(view, QTreeWidget, "result_tree").topLevelItemCount() == 2
    finally:
        bridge.close()
