"""The real renderer (bridge + window + card, pytest-qt offscreen) against a real main subprocess."""

import json
from pathlib import Path

import pytest
from kit.main import RunningMain
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QWidget,
)
from pytestqt.qtbot import QtBot

from renderer_process.bridge import MainBridge
from renderer_process.main_window import MainWindow
from renderer_process.screenshot import grab_widget


def child[T: QWidget](widget: QWidget, kind: type[T], name: str) -> T:
    found = widget.findChild(kind, name)
    assert found is not None, f"no {kind.__name__} named {name!r}"
    return found


@pytest.mark.screenshot
def test_card_from_a_real_server_is_edited_accepted_and_the_server_sees_the_edit(
    qtbot: QtBot, demo_main: RunningMain, screenshot_dir: Path
) -> None:
    bridge = MainBridge(demo_main.connection, "e2e-window")
    window = MainWindow(name="e2e-window")
    qtbot.addWidget(window)
    window.attach(bridge)
    window.resize(900, 600)
    window.show()
    bridge.start()
    try:
        call_button = child(window, QPushButton, "call")
        qtbot.waitUntil(call_button.isEnabled, timeout=15_000)  # servers listed with their tools
        child(window, QComboBox, "call_server").setCurrentText("demo")
        child(window, QComboBox, "call_tool").setCurrentText("book_table")
        child(window, QPlainTextEdit, "call_arguments").setPlainText('{"restaurant": "Le Cinq"}')
        qtbot.mouseClick(call_button, Qt.MouseButton.LeftButton)

        qtbot.waitUntil(lambda: window.current_card() is not None, timeout=15_000)
        card = window.current_card()
        assert card is not None
        assert "demo" in child(card, QLabel, "header").text()
        assert child(card, QLabel, "message").text() == "Book a table at Le Cinq?"
        name = child(card, QLineEdit, "field:name")
        assert name.text() == "Ada"  # the schema's default
        assert child(card, QCheckBox, "field:outdoor").isChecked() is False
        name.clear()
        qtbot.keyClicks(name, "Grace Hopper")
        accept = child(card, QPushButton, "accept")
        assert accept.isEnabled()
        form = card.findChild(QScrollArea)
        assert form is not None
        # The picture after the card has laid itself out again (the cleared name's error line came
        # and went): the whole form, no scroll bars.
        qtbot.waitUntil(lambda: not form.verticalScrollBar().isVisible()
                        and not form.horizontalScrollBar().isVisible(), timeout=5_000)
        grab_widget(card, screenshot_dir / "card.png")
        grab_widget(window, screenshot_dir / "window.png")
        qtbot.mouseClick(accept, Qt.MouseButton.LeftButton)

        results = child(window, QPlainTextEdit, "results")
        qtbot.waitUntil(lambda: "Grace Hopper" in results.toPlainText(), timeout=15_000)
        line = next(ln for ln in results.toPlainText().splitlines() if "Grace Hopper" in ln)
        answer = json.loads(line[line.index("{"):])
        assert answer["action"] == "accept"
        assert answer["content"]["name"] == "Grace Hopper" and answer["content"]["party_size"] == 2
        assert window.current_card() is None
    finally:
        bridge.close()
