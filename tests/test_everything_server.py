"""Against the reference server @modelcontextprotocol/server-everything (npm): all 13 fields of
`trigger-elicitation-request` round-trip exactly, through the wire and through the real card."""

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kit.main import RunningMain
from kit.paths import ROOT
from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QPlainTextEdit, QPushButton, QScrollArea, QWidget
from pytestqt.qtbot import QtBot

from renderer_process.bridge import MainBridge
from renderer_process.main_window import MainWindow
from renderer_process.screenshot import grab_widget

FIELDS = ["name", "check", "firstLine", "email", "homepage", "birthdate", "integer", "number",
          "untitledSingleSelectEnum", "untitledMultipleSelectEnum", "titledSingleSelectEnum",
          "titledMultipleSelectEnum", "legacyTitledEnum"]


def everything_binary() -> str:
    path = os.environ.get("ELICITRON_EVERYTHING_SERVER") or str(
        ROOT / ".venv" / "npm" / "node_modules" / ".bin" / "mcp-server-everything")
    if not os.access(path, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail(f"server-everything is not installed at {path}; scripts/test installs it with npm")
        pytest.skip("server-everything not installed (scripts/test installs it with npm)")
    return path


@pytest.fixture
def everything_main(main_factory: Callable[..., RunningMain]) -> RunningMain:
    entry = {"command": everything_binary(), "args": ["stdio"], "urlCompletionTimeoutSeconds": 1}
    running = main_factory({"everything": entry})
    running.wait_server_ready("everything")
    return running


def raw_result(reply: dict[str, Any]) -> dict[str, Any]:
    """server-everything echoes the ElicitResult it received as `Raw result: {json}`."""
    assert "result" in reply, reply
    text = "\n".join(item["text"] for item in reply["result"]["content"] if item["type"] == "text")
    match = re.search(r"Raw result: (\{.*\})", text, re.DOTALL)
    assert match, text
    return json.loads(match.group(1))


def test_all_thirteen_fields_round_trip_exactly(everything_main: RunningMain) -> None:
    window = everything_main.peer()
    call = window.call_tool("everything", "trigger-elicitation-request", {})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    schema = invoke["request"]["params"]["requestedSchema"]
    assert sorted(schema["properties"]) == sorted(FIELDS)
    values = {
        "name": "Ada Lovelace", "check": False, "firstLine": "", "email": "ada@example.org",
        "homepage": "https://ada.example.org/", "birthdate": "1815-12-10", "integer": 1, "number": 0,
        "untitledSingleSelectEnum": "Phoebe", "untitledMultipleSelectEnum": ["Piano", "Drums", "Bass"],
        "titledSingleSelectEnum": "hero-3", "titledMultipleSelectEnum": ["fish-2", "fish-3"],
        "legacyTitledEnum": "pet-5",
    }
    window.answer(invoke, "accept", values)
    assert raw_result(window.expect_topic(call)) == {"action": "accept", "content": values}


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_reach_server_everything(everything_main: RunningMain, action: str) -> None:
    window = everything_main.peer()
    call = window.call_tool("everything", "trigger-elicitation-request", {})
    window.answer(window.expect_topic("msgElicitationTransferInvoke"), action)
    assert raw_result(window.expect_topic(call)) == {"action": action}


def child[T: QWidget](widget: QWidget, kind: type[T], name: str = "") -> T:
    found = widget.findChild(kind, name)
    assert found is not None, f"no {kind.__name__} named {name!r}"
    return found


def field(card: QWidget, key: str) -> QWidget:
    return child(card, QWidget, f"field:{key}")


def open_window(qtbot: QtBot, main: RunningMain, opened: list[QUrl]) -> tuple[MainBridge, MainWindow]:
    def opener(url: QUrl) -> bool:
        opened.append(url)
        return True

    bridge = MainBridge(main.connection, "everything-window")
    window = MainWindow(name="everything-window", opener=opener)
    qtbot.addWidget(window)
    window.attach(bridge)
    window.resize(900, 700)
    window.show()
    bridge.start()
    qtbot.waitUntil(lambda: bridge.is_welcomed, timeout=15_000)
    return bridge, window


def call_from_window(qtbot: QtBot, window: MainWindow, server: str, tool: str, arguments: dict[str, Any]) -> None:
    """What a user does: pick server and tool, type JSON arguments, press Call."""
    button = child(window, QPushButton, "call")
    qtbot.waitUntil(button.isEnabled, timeout=15_000)
    child(window, QComboBox, "call_server").setCurrentText(server)
    tools = child(window, QComboBox, "call_tool")
    qtbot.waitUntil(lambda: tools.findText(tool) >= 0, timeout=15_000)
    tools.setCurrentText(tool)
    child(window, QPlainTextEdit, "call_arguments").setPlainText(json.dumps(arguments))
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


@pytest.mark.screenshot
def test_the_real_card_shows_all_thirteen_fields_with_their_defaults(
    qtbot: QtBot, everything_main: RunningMain, screenshot_dir: Path
) -> None:
    bridge, window = open_window(qtbot, everything_main, [])
    try:
        call_from_window(qtbot, window, "everything", "trigger-elicitation-request", {})
        qtbot.waitUntil(lambda: window.current_card() is not None, timeout=15_000)
        card = window.current_card()
        assert card is not None
        for key in FIELDS:
            assert field(card, key).isVisibleTo(card), key
        accept = child(card, QPushButton, "accept")
        # name is required and has no default: marked, and pressing Accept says so and sends nothing
        qtbot.mouseClick(accept, Qt.MouseButton.LeftButton)
        problems = child(card, QLabel, "problems")
        qtbot.waitUntil(lambda: problems.text().startswith("To accept: ") and "is required" in problems.text(),
                        timeout=5_000)
        assert card.isVisible() and not accept.isEnabled()
        name = field(card, "name")
        assert isinstance(name, QLineEdit)
        qtbot.keyClicks(name, "Grace")
        qtbot.waitUntil(accept.isEnabled, timeout=5_000)
        scroll = child(card, QScrollArea)
        fields = scroll.widget()
        assert fields is not None
        scroll.setMinimumHeight(fields.sizeHint().height() + 4)  # all 13 fields in one picture
        card.resize(card.width(), card.sizeHint().height())
        grab_widget(card, screenshot_dir / "all-fields.png")
        qtbot.mouseClick(accept, Qt.MouseButton.LeftButton)
        results = child(window, QPlainTextEdit, "results")
        qtbot.waitUntil(lambda: "Raw result" in results.toPlainText(), timeout=15_000)
        text = results.toPlainText()
        raw = re.search(r"Raw result: (\{.*\})", text, re.DOTALL)
        assert raw is not None, text
        sent = json.loads(raw.group(1))
        assert sent == {"action": "accept", "content": {
            "name": "Grace", "check": False, "firstLine": "It was a dark and stormy night.", "integer": 42,
            "number": 3.14, "untitledSingleSelectEnum": "Monica", "untitledMultipleSelectEnum": ["Guitar"],
            "titledSingleSelectEnum": "hero-1", "titledMultipleSelectEnum": ["fish-1"],
            "legacyTitledEnum": "pet-1"}}
    finally:
        bridge.close()


@pytest.mark.screenshot
def test_the_url_card_opens_the_browser_only_after_accept(qtbot: QtBot, everything_main: RunningMain,
                                                          screenshot_dir: Path) -> None:
    opened: list[QUrl] = []
    bridge, window = open_window(qtbot, everything_main, opened)
    url = "http://xn--80ak6aa92e.example.com/login?next=/home"
    try:
        call_from_window(qtbot, window, "everything", "trigger-url-elicitation",
                         {"url": url, "message": "Sign in to continue"})
        qtbot.waitUntil(lambda: window.current_card() is not None, timeout=15_000)
        card = window.current_card()
        assert card is not None and card.kind == "url"
        warnings = card.findChild(QWidget, "warnings")
        assert warnings is not None and warnings.isVisibleTo(card)
        grab_widget(card, screenshot_dir / "url-card.png")
        assert opened == []
        qtbot.mouseClick(child(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
        results = child(window, QPlainTextEdit, "results")
        qtbot.waitUntil(lambda: "accept" in results.toPlainText(), timeout=15_000)
        assert opened == [QUrl(url)]
    finally:
        bridge.close()


def test_url_required_error_from_server_everything_is_presented_and_retried(everything_main: RunningMain) -> None:
    window = everything_main.peer()
    url = "https://example.com/consent"
    call = window.call_tool("everything", "trigger-url-elicitation", {"url": url, "errorPath": True})
    first = window.expect_topic("msgElicitationTransferInvoke")
    assert first["request"]["params"]["mode"] == "url"  # the server's prerequisite link
    window.answer(first, "accept")
    # The retry goes through the request path: a second URL elicitation for the same link.
    second = window.expect_topic("msgElicitationTransferInvoke", timeout_s=20)
    assert second["request"]["params"]["url"] == url and second["responseChannel"] != first["responseChannel"]
    window.answer(second, "accept")
    reply = window.expect_topic(call)
    assert "result" in reply, reply
