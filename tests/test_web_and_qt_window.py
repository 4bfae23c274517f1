"""One request in a Qt window and a browser at once (issue 27): the first answer wins, the other
window's card is dismissed, both ways round. The real renderer (bridge + window + card, pytest-qt
offscreen) and Debian's chromium on a real `elicitron web`, both on one real main with the demo
server. Skipped (with the reason) where /usr/bin/chromium is missing; CI installs it."""

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit, QPushButton
from pytestqt.qtbot import QtBot
from web_kit import WebWindow, chromium, chromium_missing, demo_web_window, pair

from renderer_process.bridge import MainBridge
from renderer_process.main_window import MainWindow

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.slow, pytest.mark.skipif(chromium_missing() is not None,
                                                   reason=chromium_missing() or "")]

TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def web() -> Iterator[WebWindow]:
    with demo_web_window("eli-webqt-") as window:
        yield window


@pytest.fixture
def page(web: WebWindow) -> "Iterator[Page]":
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 360, "height": 780})
        page = context.new_page()
        pair(page, web, "phone beside qt", TIMEOUT_MS)
        yield page
        context.close()


@pytest.fixture
def window(qtbot: QtBot, web: WebWindow) -> Iterator[MainWindow]:
    bridge = MainBridge(web.main.connection, "qt beside the phone")
    shown = MainWindow(name="qt beside the phone")
    qtbot.addWidget(shown)
    shown.attach(bridge)
    shown.show()
    bridge.start()
    try:
        qtbot.waitUntil(lambda: bridge.is_welcomed, timeout=TIMEOUT_MS)
        yield shown
    finally:
        bridge.close()


def _content(reply: dict[str, Any]) -> dict[str, Any]:
    answer = json.loads(reply["result"]["content"][0]["text"])
    assert answer["action"] == "accept", answer
    content = answer["content"]
    assert isinstance(content, dict)
    return content


def test_the_browser_answers_first_and_the_qt_card_is_dismissed(
        qtbot: QtBot, web: WebWindow, page: "Page", window: MainWindow) -> None:
    host = web.main.peer("web-qt-host", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "Chez Deux"})
    qtbot.waitUntil(lambda: window.current_card() is not None, timeout=TIMEOUT_MS)
    page.get_by_text("Book a table at Chez Deux?").wait_for(timeout=TIMEOUT_MS)

    page.get_by_label("Name on the booking (required)").fill("Phone")
    page.get_by_label("Guests (required)").fill("3")
    page.get_by_role("button", name="Accept").click()

    content = _content(host.expect_topic(channel, timeout_s=15))
    assert (content["name"], content["party_size"]) == ("Phone", 3)
    qtbot.waitUntil(lambda: window.current_card() is None, timeout=TIMEOUT_MS)
    page.get_by_text("Nothing is waiting for you.").wait_for(timeout=TIMEOUT_MS)


def test_the_qt_window_answers_first_and_the_browser_card_is_dismissed(
        qtbot: QtBot, web: WebWindow, page: "Page", window: MainWindow) -> None:
    host = web.main.peer("web-qt-host-2", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "Chez Qt"})
    page.get_by_text("Book a table at Chez Qt?").wait_for(timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: window.current_card() is not None, timeout=TIMEOUT_MS)
    card = window.current_card()
    assert card is not None
    name = card.findChild(QLineEdit, "field:name")
    assert name is not None
    name.clear()
    qtbot.keyClicks(name, "Desk")
    accept = card.findChild(QPushButton, "accept")
    assert accept is not None and accept.isEnabled()
    qtbot.mouseClick(accept, Qt.MouseButton.LeftButton)

    assert _content(host.expect_topic(channel, timeout_s=15))["name"] == "Desk"
    page.get_by_text("Nothing is waiting for you.").wait_for(timeout=TIMEOUT_MS)
    assert page.locator("#cards article").count() == 0
    assert window.current_card() is None
