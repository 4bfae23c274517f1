"""Many mains, one inbox, in the windows people use (issue 35, item 2): the real Qt window (bridge +
window + card, pytest-qt offscreen) and Debian's chromium paired with a real `elicitron web`, each
attached only to main B, answer a request whose server runs under main A. A's server gets the
values, the card says which machine's main asked, and the audit row names who answered (the Qt
window's OS user, the paired device) and both machines. Two real mains on the session's private
PostgreSQL (tests/kit/postgres.py); test_team_inbox.py has the same with contract-only windows."""

import getpass
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from consent_kit import ConsentMain
from kit.peer import WirePeer
from kit.postgres import PostgresServer
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot
from team_kit import Mains, audit_rows, booked, team_on
from web_kit import DEFAULT_WEB_DIR, chromium_missing, pair, web_window

from renderer_process.bridge import MainBridge
from renderer_process.main_window import MainWindow

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator

pytestmark = pytest.mark.slow

Team = tuple[Mains, ConsentMain, ConsentMain]
TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def team(postgres: PostgresServer) -> Iterator[Team]:
    """Main A on machine "laptop-a" (its demo server asks), main B on "build-server" (the windows)."""
    with team_on(postgres, "laptop-a", "build-server") as (mains, [a, b]):
        yield mains, a, b


def caller_on(main: ConsentMain, restaurant: str) -> tuple[WirePeer, str]:
    """A controller on `main` calls the demo's book_table: its server elicits. The caller and its call."""
    caller = main.peer(name=f"caller for {restaurant}", role="controller")
    return caller, caller.call_tool("demo", "book_table", {"restaurant": restaurant})


def shown(locator: "Locator", keep_alive: WirePeer) -> None:
    """The page shows `locator`, waited for in short steps with the caller heartbeating between them
    (main lets a peer silent for 5 s go, and a loaded run can wait longer than that)."""
    from playwright.sync_api import TimeoutError as PageTimeout

    deadline = time.monotonic() + TIMEOUT_S
    while True:
        keep_alive.pump()
        try:
            locator.wait_for(timeout=500)
            return
        except PageTimeout:
            assert time.monotonic() < deadline, f"the page never showed {locator}"


def test_a_qt_window_on_another_main_answers_and_the_server_of_the_main_that_asked_gets_it(
        qtbot: QtBot, team: Team) -> None:
    mains, a, b = team
    bridge = MainBridge(b.connection, "qt on b")
    window = MainWindow(name="qt on b")
    qtbot.addWidget(window)
    window.attach(bridge)
    window.show()
    bridge.start()
    try:
        qtbot.waitUntil(lambda: bridge.is_welcomed, timeout=int(TIMEOUT_S * 1000))
        caller, call = caller_on(a, "Team Qt")

        def pumped(holds: Callable[[], bool]) -> Callable[[], bool]:
            def check() -> bool:
                caller.pump()  # the caller heartbeats while the test waits in Qt's loop
                return holds()
            return check

        qtbot.waitUntil(pumped(lambda: window.current_card() is not None), timeout=int(TIMEOUT_S * 1000))
        card = window.current_card()
        assert card is not None
        header, via = card.findChild(QLabel, "header"), card.findChild(QLabel, "via")
        assert header is not None and "demo" in header.text()
        assert via is not None and via.text() == "on laptop-a"  # another main's request: whose machine asks
        name = card.findChild(QLineEdit, "field:name")
        accept = card.findChild(QPushButton, "accept")
        assert name is not None and accept is not None
        name.clear()
        qtbot.keyClicks(name, "Qt on B")
        qtbot.mouseClick(accept, Qt.MouseButton.LeftButton)

        answer = booked(caller, call)
        assert (answer["action"], answer["content"]["name"]) == ("accept", "Qt on B")
        qtbot.waitUntil(lambda: window.current_card() is None, timeout=int(TIMEOUT_S * 1000))
        [row] = [row for row in audit_rows(b, mains.url, 1) if row["windowName"] == "qt on b"]
        assert (row["outcome"], row["answerUser"], row["machine"], row["answerMachine"]) == \
            ("accept", getpass.getuser(), "laptop-a", "build-server")
        caller.close()
    finally:
        bridge.close()


@pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
def test_a_paired_web_page_on_another_main_answers_and_the_server_of_the_main_that_asked_gets_it(
        team: Team, browser: "Browser") -> None:
    mains, a, b = team
    assert b.home is not None
    with web_window(b, Path(b.home) / DEFAULT_WEB_DIR) as web_b:
        context = browser.new_context(viewport={"width": 360, "height": 780})
        try:
            page = context.new_page()
            pair(page, web_b, "ana's phone")
            caller, call = caller_on(a, "Team Web")
            shown(page.get_by_text("Book a table at Team Web?"), caller)
            shown(page.get_by_text("on laptop-a"), caller)  # another main's request: whose machine asks
            page.get_by_label("Name on the booking (required)").fill("Phone on B")
            page.get_by_label("Guests (required)").fill("4")
            page.get_by_role("button", name="Accept").click()

            answer = booked(caller, call)
            assert answer["action"] == "accept"
            assert (answer["content"]["name"], answer["content"]["party_size"]) == ("Phone on B", 4)
            shown(page.get_by_text("Nothing is waiting for you."), caller)
            [row] = [row for row in audit_rows(b, mains.url, 1) if row["device"] == "ana's phone"]
            assert (row["outcome"], row["machine"], row["answerMachine"]) == ("accept", "laptop-a", "build-server")
            caller.close()
        finally:
            context.close()

