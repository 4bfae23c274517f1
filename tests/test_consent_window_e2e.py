"""The real window (bridge + MainWindow, pytest-qt offscreen) against a real main and the demo
server: a host's call waits for the approval card, and "Remember my answer" lives in the
Remembered panel of every window until it is revoked there."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from consent_kit import ConsentMain, ConsentMains, WireHost, demo, started_mains, text_of
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QLabel, QPushButton
from pytestqt.qtbot import QtBot

from renderer_process.approval_card import ApprovalCard
from renderer_process.bridge import MainBridge
from renderer_process.card import ElicitationCard
from renderer_process.main_window import MainWindow
from renderer_process.screenshot import grab_widget


@pytest.fixture
def consent_mains(tmp_path: Path) -> Iterator[ConsentMains]:
    yield from started_mains(tmp_path)




def open_window(qtbot: QtBot, main: ConsentMain, name: str) -> tuple[MainWindow, MainBridge]:
    bridge = MainBridge(main.connection, name)
    window = MainWindow(name=name, opener=lambda _url: None)
    qtbot.addWidget(window)
    window.attach(bridge)
    window.resize(900, 620)
    window.show()
    bridge.start()
    qtbot.waitUntil(lambda: bridge.is_welcomed, timeout=15_000)
    return window, bridge


def remembered_rows(window: MainWindow) -> list[str]:
    return window.remembered_panel.rows()


@pytest.mark.screenshot
def test_a_hosts_call_waits_until_the_window_allows_it(qtbot: QtBot, consent_mains: ConsentMains,
                                                       screenshot_dir: Path) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window, bridge = open_window(qtbot, main, "approver")
    host = WireHost(main, name="Claude Desktop")
    try:
        call = host.call("demo", "cancel_booking", {"restaurant": "Le Cinq"})
        qtbot.waitUntil(lambda: isinstance(window.current_card(), ApprovalCard), timeout=15_000)
        card = window.current_card()
        assert card is not None
        header = card.findChild(QLabel, "header")
        assert header is not None and "Claude Desktop" in header.text() and "cancel_booking" in header.text()
        warnings = card.findChild(QLabel, "warnings")
        assert warnings is not None and "May delete or overwrite things." in warnings.text()
        argument = card.findChild(QLabel, "argument:restaurant")
        assert argument is not None and argument.text() == "Le Cinq"
        grab_widget(card, screenshot_dir / "approval-card.png")
        allow = card.findChild(QPushButton, "approve_once")
        assert allow is not None
        qtbot.mouseClick(allow, Qt.MouseButton.LeftButton)
        assert text_of(host.result(call)) == "cancelled the booking at Le Cinq"
        assert window.current_card() is None
    finally:
        bridge.close()


@pytest.mark.screenshot
def test_a_remembered_answer_shows_in_every_window_and_revoking_it_there_asks_again(
        qtbot: QtBot, consent_mains: ConsentMains, screenshot_dir: Path) -> None:
    main = consent_mains({"demo": demo()})
    left, left_bridge = open_window(qtbot, main, "left")
    right, right_bridge = open_window(qtbot, main, "right")
    caller = main.peer(name="cli", role="controller")
    try:
        assert remembered_rows(left) == [] and remembered_rows(right) == []
        first = caller.call_tool("demo", "book_table", {"restaurant": "Septime"})
        qtbot.waitUntil(lambda: isinstance(left.current_card(), ElicitationCard), timeout=15_000)
        card = left.current_card()
        assert card is not None
        scope = card.findChild(QComboBox, "remember_scope")
        assert scope is not None
        scope.setCurrentText("Remember always")
        accept = card.findChild(QPushButton, "accept")
        assert accept is not None
        qtbot.mouseClick(accept, Qt.MouseButton.LeftButton)
        assert caller.expect_topic(first)["result"]["isError"] is False
        expected = "demo: “Book a table at Septime?” → accept (name, party_size, outdoor, budget, cuisine) · always"
        qtbot.waitUntil(lambda: remembered_rows(right) == [expected], timeout=10_000)  # pushed live
        qtbot.waitUntil(lambda: remembered_rows(left) == [expected], timeout=10_000)

        second = caller.call_tool("demo", "book_table", {"restaurant": "Septime"})
        reply = caller.expect_topic(second)  # answered by the rule: no card anywhere
        assert '"name": "Ada"' in text_of(reply["result"])
        assert left.current_card() is None and right.current_card() is None
        box = right.remembered_panel.parentWidget()  # the "Remembered" box: its content is the same every run
        assert box is not None
        grab_widget(box, screenshot_dir / "remembered-panel.png")

        right.remembered_panel.select(right.remembered_panel.rule_ids()[0])
        revoke = right.findChild(QPushButton, "rule_revoke")
        assert revoke is not None and revoke.isEnabled()
        qtbot.mouseClick(revoke, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: remembered_rows(left) == [] and remembered_rows(right) == [], timeout=10_000)
        status = right.findChild(QLabel, "remembered_status")
        assert status is not None and status.text().startswith("Revoked r-")

        third = caller.call_tool("demo", "book_table", {"restaurant": "Septime"})
        qtbot.waitUntil(lambda: left.current_card() is not None or right.current_card() is not None,
                        timeout=15_000)
        shown = left.current_card() or right.current_card()
        assert shown is not None
        decline = shown.findChild(QPushButton, "decline")
        assert decline is not None
        qtbot.mouseClick(decline, Qt.MouseButton.LeftButton)
        assert '"action": "decline"' in text_of(caller.expect_topic(third)["result"])
    finally:
        left_bridge.close()
        right_bridge.close()
