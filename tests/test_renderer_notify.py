"""Notifications, the tray icon and the waiting count, as a user meets them.

Qt's offscreen platform has no system tray, so the window gets a QSystemTrayIcon of the test's
own: a real one whose `showMessage` calls are recorded (that is the desktop notification being
requested) and whose `messageClicked` the test emits as the platform would on a click."""

import warnings
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, QSettings
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QSystemTrayIcon
from pytestqt.qtbot import QtBot

from renderer_process.main_window import MainWindow
from shared import messages

ME = "0190a000-0000-7000-8000-00000000000a"


class RecordingTray(QSystemTrayIcon):
    def __init__(self, parent: QObject) -> None:
        super().__init__(parent)
        self.messages: list[tuple[str, str]] = []
        self.icons: list[QIcon] = []

    def showMessage(self, title: str, message: str, *_rest: Any) -> None:
        self.messages.append((title, message))


def invoke(
    channel: str, message: str = "Book a table for two?", server: str = "demo"
) -> messages.ElicitationInvoke:
    params = {"mode": "form", "message": message,
              "requestedSchema": {"type": "object", "properties": {"n": {"type": "integer", "default": 2}}}}
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server=server, params=params),
        response_channel=channel, created_at=1, expires_at=None, origin=None,
    )


def leave_the_window() -> None:
    """What the platform does when the user switches to another program."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        QApplication.setActiveWindow(None)  # type: ignore[arg-type]


@pytest.fixture
def settings(tmp_path: Path) -> QSettings:
    return QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def trays() -> list[RecordingTray]:
    return []


@pytest.fixture
def make_window(qtbot: QtBot, settings: QSettings, trays: list[RecordingTray]) -> Any:
    def make() -> MainWindow:
        def factory(parent: QObject) -> RecordingTray:
            trays.append(RecordingTray(parent))
            return trays[-1]

        window = MainWindow(window_id=ME, name="test", opener=lambda _u: None, settings=settings,
                            tray_factory=factory)
        qtbot.addWidget(window)
        window.show()
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow, timeout=2000)
        return window

    return make


def test_a_request_while_another_program_has_the_focus_is_notified_and_the_click_raises_the_card(
    qtbot: QtBot, make_window: Any, trays: list[RecordingTray]
) -> None:
    window = make_window()
    leave_the_window()
    assert QApplication.activeWindow() is None
    window.on_invoked(invoke("c-1", "Book a table at Le Cinq?"))
    assert trays[0].messages == [("demo asks for input", "Book a table at Le Cinq?")]
    window.on_invoked(invoke("c-1", "Book a table at Le Cinq?"))  # delivered again: not notified again
    assert len(trays[0].messages) == 1

    trays[0].messageClicked.emit()  # the user clicks the notification
    card = window.current_card()
    assert card is not None
    qtbot.waitUntil(lambda: QApplication.activeWindow() is card, timeout=2000)
    assert card.isVisible() and window.isVisible()


def test_no_notification_while_the_user_is_in_the_window(
    make_window: Any, trays: list[RecordingTray]
) -> None:
    window = make_window()
    window.on_invoked(invoke("c-1"))
    assert trays[0].messages == []
    assert window.current_card() is not None


def test_closed_into_the_tray_it_stays_attached_notifies_and_comes_back_with_the_card(
    qtbot: QtBot, make_window: Any, trays: list[RecordingTray], settings: QSettings
) -> None:
    window = make_window()
    answers: list[Any] = []
    window.answer_ready.connect(lambda *args: answers.append(args))
    option = window.keep_in_tray
    assert option.isEnabled() and not option.isChecked()
    option.trigger()  # Window ▸ Keep running in the tray when closed
    assert settings.value("window/keepInTray", type=bool) is True

    window.close()
    assert not window.isVisible()
    window.on_invoked(invoke("c-1", "Which city?", server="weather"))
    assert trays[0].messages == [("weather asks for input", "Which city?")]
    card = window.current_card()
    assert card is not None and not card.isVisible()  # waits for the click, not popping up alone
    assert trays[0].toolTip() == "Elicitron — 1 request waiting"

    trays[0].activated.emit(QSystemTrayIcon.ActivationReason.Trigger)  # a click on the tray icon
    qtbot.waitUntil(lambda: window.isVisible() and card.isVisible(), timeout=2000)
    assert answers == []  # going to the tray and back answered nothing


def test_the_option_is_remembered(make_window: Any) -> None:
    first = make_window()
    first.keep_in_tray.trigger()
    second = make_window()  # a later window, same settings file
    assert second.keep_in_tray.isChecked()


def test_without_a_tray_the_option_is_off_and_closing_closes(qtbot: QtBot, settings: QSettings) -> None:
    settings.setValue("window/keepInTray", True)
    window = MainWindow(window_id=ME, name="test", settings=settings, tray_factory=lambda _p: None)
    qtbot.addWidget(window)
    window.show()
    assert not window.keep_in_tray.isEnabled() and not window.keep_in_tray.isChecked()
    window.close()
    assert not window.isVisible()


def test_the_title_and_the_tray_count_what_waits_here(
    qtbot: QtBot, make_window: Any, trays: list[RecordingTray]
) -> None:
    window = make_window()
    assert window.windowTitle() == "Elicitron — test"
    assert trays[0].toolTip() == "Elicitron — nothing waiting"
    window.on_invoked(invoke("c-1"))
    window.on_invoked(invoke("c-2"))
    assert window.windowTitle() == "Elicitron — test (2 waiting)"
    assert trays[0].toolTip() == "Elicitron — 2 requests waiting"
    card = window.current_card()
    assert card is not None
    card.reject()
    assert window.windowTitle() == "Elicitron — test (1 waiting)"
    window.on_dismissed(messages.ElicitationDismiss(response_channel="c-2", reason="expired"))
    assert window.windowTitle() == "Elicitron — test"
    assert trays[0].toolTip() == "Elicitron — nothing waiting"


def test_several_requests_replayed_at_attach_make_one_notification(
    make_window: Any, trays: list[RecordingTray]
) -> None:
    window = make_window()
    leave_the_window()
    pending = [invoke("p-1"), invoke("p-2", server="weather"), invoke("p-3")]
    window.on_welcomed(messages.Welcome(session="s", window=ME, servers=[], pending=pending))
    assert trays[0].messages == [("3 requests waiting", "From demo, weather")]
