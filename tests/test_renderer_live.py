"""The renderer against a real main.

A window stopped with SIGSTOP (main detaches it after 5 s) re-attaches at once when resumed, not
after its own 3 s silence limit; and a request shows as the card only in the window whose tool
call caused it, listed as "waiting in another window" elsewhere, until that window goes."""

import signal
import time
from collections.abc import Callable, Iterator

import pytest
from kit.main import RunningMain
from kit.window import WindowProcess, start_window
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QLabel, QPlainTextEdit, QPushButton, QTreeWidget, QWidget
from pytestqt.qtbot import QtBot

from renderer_process.bridge import MainBridge
from renderer_process.main_window import MainWindow


@pytest.fixture
def bare_main(main_factory: Callable[..., RunningMain]) -> RunningMain:
    """main with no servers: enough for attaching windows."""
    return main_factory({})


@pytest.fixture
def window_process(bare_main: RunningMain) -> Iterator[WindowProcess]:
    window = start_window(bare_main.connection, "resumed")
    yield window
    window.proc.send_signal(signal.SIGCONT)
    window.end()


def test_a_window_resumed_after_sigstop_reattaches_within_seconds(
    bare_main: RunningMain, window_process: WindowProcess
) -> None:
    window_process.wait_state("connected", timeout_s=20)  # the window has its welcome
    window_process.proc.send_signal(signal.SIGSTOP)
    with bare_main.watch() as watcher:
        try:
            watcher.wait_peer("resumed", attached=False, timeout_s=15)  # main's 5 s limit
        finally:
            window_process.proc.send_signal(signal.SIGCONT)
        resumed_at = time.monotonic()
        watcher.wait_peer("resumed", role="renderer", timeout_s=10)
        back_at = time.monotonic()
    assert back_at - resumed_at < 2.0, f"main saw the window again only after {back_at - resumed_at:.1f} s"
    window_process.wait_state("connected", count=2, timeout_s=5)  # and the window knows it is attached
    assert window_process.proc.poll() is None


def open_window(qtbot: QtBot, main: RunningMain, name: str) -> tuple[MainWindow, MainBridge]:
    bridge = MainBridge(main.connection, name)
    window = MainWindow(name=name, opener=lambda _url: None)
    qtbot.addWidget(window)
    window.attach(bridge)
    window.show()
    bridge.start()
    return window, bridge


def child[T: QWidget](widget: QWidget, kind: type[T], name: str) -> T:
    found = widget.findChild(kind, name)
    assert found is not None, f"no {kind.__name__} named {name!r}"
    return found


def elsewhere_text(window: MainWindow) -> str:
    box = child(window, QWidget, "elsewhere")
    if not box.isVisible():
        return ""
    return "\n".join(
        label.text() for label in box.findChildren(QLabel, "elsewhere_item") if label.isVisible()
    )


def test_a_request_is_the_card_only_where_it_was_asked_until_that_window_goes(
    qtbot: QtBot, demo_main: RunningMain
) -> None:
    left, left_bridge = open_window(qtbot, demo_main, "left")
    right, right_bridge = open_window(qtbot, demo_main, "right")
    try:
        call = child(left, QPushButton, "call")
        qtbot.waitUntil(call.isEnabled, timeout=15_000)
        qtbot.waitUntil(lambda: child(right, QPushButton, "call").isEnabled(), timeout=15_000)
        child(left, QComboBox, "call_server").setCurrentText("demo")
        child(left, QComboBox, "call_tool").setCurrentText("book_table")
        child(left, QPlainTextEdit, "call_arguments").setPlainText('{"restaurant": "Le Cinq"}')
        qtbot.mouseClick(call, Qt.MouseButton.LeftButton)

        qtbot.waitUntil(lambda: left.current_card() is not None, timeout=15_000)
        qtbot.waitUntil(lambda: elsewhere_text(right) != "", timeout=15_000)
        assert elsewhere_text(right) == "demo: Book a table at Le Cinq? — in window “left”"
        assert right.current_card() is None

        left.close()
        left_bridge.close()  # bye: main detaches "left" and tells "right"
        qtbot.waitUntil(lambda: right.current_card() is not None, timeout=15_000)
        card = right.current_card()
        assert card is not None and child(card, QLabel, "message").text() == "Book a table at Le Cinq?"
        assert elsewhere_text(right) == ""
        with qtbot.waitSignal(right_bridge.dismissed, timeout=5_000) as dismissed:  # main took the answer
            qtbot.mouseClick(child(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
        assert (dismissed.args[0].reason, dismissed.args[0].by) == ("answered", right_bridge.window_id)
        assert right.current_card() is None
    finally:
        left_bridge.close()
        right_bridge.close()


def test_after_elicitron_stop_the_window_says_main_is_gone_and_offers_nothing_of_it(
    qtbot: QtBot, demo_main: RunningMain
) -> None:
    window, bridge = open_window(qtbot, demo_main, "after-stop")
    try:
        restart = child(window, QPushButton, "server_restart")
        tree = child(window, QTreeWidget, "servers")
        qtbot.waitUntil(lambda: tree.topLevelItemCount() > 0, timeout=15_000)  # the window's welcome
        first = tree.topLevelItem(0)
        assert first is not None
        tree.setCurrentItem(first)
        qtbot.waitUntil(restart.isEnabled, timeout=15_000)
        banner = child(window, QWidget, "main_banner")
        assert not banner.isVisible()

        stopped = demo_main.cli("stop")
        assert stopped.returncode == 0, stopped.stderr

        qtbot.waitUntil(banner.isVisible, timeout=10_000)
        text = child(window, QLabel, "main_banner_text").text()
        assert "main is not running" in text and "elicitron launch" in text
        buttons = ("server_start", "server_stop", "server_restart", "reload", "call")
        assert [name for name in buttons if child(window, QPushButton, name).isEnabled()] == []
        row = tree.topLevelItem(0)
        assert row is not None and (row.text(0), row.text(1)) == ("demo", "main not running")
    finally:
        bridge.close()
