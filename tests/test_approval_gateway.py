"""Tool-call approval for a real MCP host: mcp's own `Client` on `elicitron serve`, a real window
(pytest-qt, offscreen) answering the approval card (a deny with the reason typed on it), a real main
and the demo server."""

from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest
from consent_kit import ConsentMain, ConsentMains, demo, started_mains
from gateway_kit import Host, HostLoop, serve_params, text_of
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QLabel, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot

from renderer_process.approval_card import ApprovalCard
from renderer_process.bridge import MainBridge
from renderer_process.main_window import MainWindow

pytestmark = pytest.mark.slow  # real mains, gateways, hosts and windows


@pytest.fixture
def consent_mains(tmp_path: Path) -> Iterator[ConsentMains]:
    yield from started_mains(tmp_path)



def open_window(qtbot: QtBot, main: ConsentMain) -> MainWindow:
    bridge = MainBridge(main.connection, "approver")
    window = MainWindow(name="approver", opener=lambda _url: None)
    qtbot.addWidget(window)
    window.attach(bridge)
    window.show()
    bridge.start()
    qtbot.waitUntil(lambda: bridge.is_welcomed, timeout=15_000)
    return window


def approval_card(qtbot: QtBot, window: MainWindow) -> ApprovalCard:
    qtbot.waitUntil(lambda: isinstance(window.current_card(), ApprovalCard), timeout=20_000)
    card = window.current_card()
    assert isinstance(card, ApprovalCard)
    return card


def click(qtbot: QtBot, card: ApprovalCard, name: str) -> None:
    button = card.findChild(QPushButton, name)
    assert button is not None and button.isEnabled(), name
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_a_hosts_call_through_the_gateway_waits_for_allow_and_deny_is_a_tool_error(
        qtbot: QtBot, consent_mains: ConsentMains, hosts: HostLoop) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window = open_window(qtbot, main)
    host = Host(hosts, serve_params(main.connection, "--server", "demo"), "Claude Desktop").open()
    try:
        allowed = host.start(lambda c: c.call_tool("echo", {"text": "let me through"}))
        card = approval_card(qtbot, window)
        assert not allowed.done()  # the call waits for the window
        click(qtbot, card, "approve_once")
        result = allowed.result(30)
        assert result.is_error is not True and text_of(result) == "let me through"

        denied = host.start(lambda c: c.call_tool("echo", {"text": "not this"}))
        card = approval_card(qtbot, window)
        reason = card.findChild(QLineEdit, "deny_reason")
        assert reason is not None
        qtbot.keyClicks(reason, "use the staging server")  # typed on the card, it reaches the agent
        click(qtbot, card, "deny")
        result = denied.result(30)
        assert result.is_error is True
        assert text_of(result).startswith('The user denied this call in Elicitron (in the window "approver"): '
                                          'demo/echo was not called. The user\'s reason: "use the staging server".')
        assert result.meta is not None and result.meta["elicitron/denial"] == {
            "deniedBy": "person", "window": "approver", "reason": "use the staging server", "retry": "maybe",
            "server": "demo", "tool": "echo"}
        assert result.meta["io.modelcontextprotocol/authorization"]["remediation"] == "available"
    finally:
        host.close()


def test_a_host_that_cancels_its_call_takes_the_approval_card_back(
        qtbot: QtBot, consent_mains: ConsentMains, hosts: HostLoop) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window = open_window(qtbot, main)
    host = Host(hosts, serve_params(main.connection, "--server", "demo"), "Cursor").open()
    try:
        pending = host.start(lambda c: c.call_tool("echo", {"text": "changed my mind"}))
        approval_card(qtbot, window)
        pending.cancel()  # the host's task is cancelled: the SDK tells the gateway, the gateway main
        qtbot.waitUntil(lambda: window.current_card() is None, timeout=20_000)
        again = host.start(lambda c: c.call_tool("echo", {"text": "second try"}))
        click(qtbot, approval_card(qtbot, window), "approve_once")
        assert text_of(again.result(30)) == "second try"
    finally:
        host.close()


def test_a_grant_for_any_arguments_always_from_one_host_lets_the_next_call_through_without_a_card(
        qtbot: QtBot, consent_mains: ConsentMains, hosts: HostLoop) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window = open_window(qtbot, main)
    host = Host(hosts, serve_params(main.connection, "--server", "demo"), "VS Code").open()
    try:
        first = host.start(lambda c: c.call_tool("echo", {"text": "one"}))
        card = approval_card(qtbot, window)  # main offers grants: "always allow" is any arguments, always
        for name, value in (("grant_arguments", "any"), ("grant_duration", "always")):
            combo = card.findChild(QComboBox, name)
            assert combo is not None
            combo.setCurrentIndex(combo.findData(value))
        summary = card.findChild(QLabel, "grant_summary")
        assert summary is not None and summary.text() == "Allows echo with any arguments, always"
        click(qtbot, card, "approve_grant")
        assert text_of(first.result(30)) == "one"
        result: types.CallToolResult = host.call("echo", {"text": "two"})
        assert text_of(result) == "two" and window.current_card() is None
    finally:
        host.close()
