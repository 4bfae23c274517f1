"""RequestNotifier: a desktop notification for new requests while the user is not looking at us.

Only while no window of this program is active (another program has the focus, or the window was
closed into the tray), and once per request: its server and question, or "N requests waiting" with
their servers. Without a tray the desktop is asked for attention instead.
"""

import logging

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QWidget

from renderer_process.card import URL
from renderer_process.long_text import preview
from renderer_process.tray import Tray
from shared import messages

logger = logging.getLogger(__name__)


class RequestNotifier(QObject):
    def __init__(self, tray: Tray, window: QWidget) -> None:
        super().__init__(window)
        self._tray = tray
        self._window = window  # what the desktop is asked to draw attention to, without a tray
        self._notified: set[str] = set()  # channels a notification was shown for

    def announce(self, invokes: list[messages.ElicitationInvoke]) -> None:
        """Notify about requests not yet announced, when the user is not looking at us."""
        new = [item for item in invokes if item.response_channel not in self._notified]
        if not new or _user_is_here():
            return
        self._notified.update(item.response_channel for item in new)
        first = new[0]
        if len(new) == 1:
            what = "you to open a link" if first.request.params.get("mode") == URL else "for input"
            title = f"{first.request.server} asks {what}"
            message = preview(str(first.request.params.get("message", "")))[0] or "A request is waiting."
        else:
            servers = sorted({item.request.server for item in new})
            title = f"{len(new)} requests waiting"
            message = "From " + ", ".join(servers)
        if not self._tray.notify(title, message):
            QApplication.alert(self._window)  # no tray: at least ask the desktop for attention
        logger.info("notified: %s", title)

    def keep_only(self, open_channels: set[str]) -> None:
        """Forget the requests main no longer holds (after a welcome's replay)."""
        self._notified &= open_channels


def _user_is_here() -> bool:
    # Any active window of ours (the window, its card) means the user sees the request already.
    return QApplication.activeWindow() is not None
