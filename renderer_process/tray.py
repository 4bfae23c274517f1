"""The tray icon (with the number of requests waiting) and desktop notifications.

Production uses a real QSystemTrayIcon when the desktop has a tray
(`QSystemTrayIcon.isSystemTrayAvailable()`); its `showMessage` is the desktop notification and
its `messageClicked` / `activated` bring the window and its card forward. Without a tray (some
desktops, and Qt's offscreen platform) there is no icon, and a request asks the window manager
for attention instead (`QApplication.alert`). The window gets its icon through a factory, so a
test can hand in a QSystemTrayIcon of its own and watch what is asked of it.
"""

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from renderer_process.icon import app_icon

logger = logging.getLogger(__name__)

NOTIFICATION_MS = 15_000
_MESSAGE_CHARS = 200

TrayFactory = Callable[[QObject], QSystemTrayIcon | None]


def system_tray(parent: QObject) -> QSystemTrayIcon | None:
    """The desktop's tray icon, or None where there is no tray."""
    if not QSystemTrayIcon.isSystemTrayAvailable():
        logger.info("no system tray on this desktop: no tray icon, notifications ask for attention")
        return None
    return QSystemTrayIcon(parent)


class Tray(QObject):
    """Owns the tray icon, if any: its number, tooltip and menu, and the notifications."""

    show_requested = Signal()  # a notification or the icon was clicked, or "Show" chosen
    quit_requested = Signal()

    def __init__(
        self, icon: QSystemTrayIcon | None, keep_in_tray: QAction, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.icon = icon
        self._count = 0
        if icon is None:
            return
        self._menu = QMenu()
        show = QAction("Show Elicitron", self._menu)
        show.triggered.connect(self.show_requested)
        quit_action = QAction("Quit this window", self._menu)
        quit_action.triggered.connect(self.quit_requested)
        self._menu.addAction(show)
        self._menu.addAction(keep_in_tray)
        self._menu.addSeparator()
        self._menu.addAction(quit_action)
        icon.setContextMenu(self._menu)
        icon.activated.connect(self._on_activated)
        icon.messageClicked.connect(self.show_requested)
        self.set_waiting(0)
        icon.show()

    @property
    def available(self) -> bool:
        return self.icon is not None

    def set_waiting(self, count: int) -> None:
        self._count = count
        if self.icon is None:
            return
        self.icon.setIcon(app_icon(count))
        waiting = "nothing waiting" if count == 0 else f"{count} request{'s' if count != 1 else ''} waiting"
        self.icon.setToolTip(f"Elicitron — {waiting}")

    def notify(self, title: str, message: str) -> bool:
        """A desktop notification; False when there is no tray to show it."""
        if self.icon is None:
            return False
        if len(message) > _MESSAGE_CHARS:
            message = message[: _MESSAGE_CHARS - 1] + "…"
        self.icon.showMessage(title, message, app_icon(self._count), NOTIFICATION_MS)
        return True

    def _on_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger, QSystemTrayIcon.ActivationReason.DoubleClick):
            self.show_requested.emit()
