"""Show one card on this process's screen and print where its parts are, as JSON (for
tests/test_first_hour_card_screen.py, run with QT_QPA_PLATFORM=offscreen:configfile=<a screen>).

argv[1]: a file holding a `msgElicitationTransferInvoke` body as main sent it (msgpack, camelCase)."""

import json
import sys
from pathlib import Path

import msgspec
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QPushButton, QScrollArea, QWidget

from renderer_process.card import ElicitationCard
from shared import messages


def bottom(widget: QWidget) -> int:
    return widget.mapToGlobal(QPoint(0, widget.height())).y()


def main() -> None:
    app = QApplication([])
    invoke = msgspec.msgpack.decode(Path(sys.argv[1]).read_bytes(), type=messages.ElicitationInvoke)
    card = ElicitationCard(invoke)
    card.show()
    for _ in range(20):  # the layout settles over a few turns of the loop (no timers involved)
        app.processEvents()
    screen = card.screen().availableGeometry()
    accept = card.findChild(QPushButton, "accept")
    decline_all = card.findChild(QPushButton, "decline_all")
    scroll = card.findChild(QScrollArea)
    assert accept is not None and decline_all is not None and scroll is not None
    print(json.dumps({
        "screen": [screen.top(), screen.bottom()],
        "card": [card.mapToGlobal(QPoint(0, 0)).y(), bottom(card)],
        "accept": [accept.mapToGlobal(QPoint(0, 0)).y(), bottom(accept), accept.isVisible()],
        "declineAll": [decline_all.mapToGlobal(QPoint(0, 0)).y(), bottom(decline_all), decline_all.isVisible()],
        "formScrolls": scroll.verticalScrollBar().maximum() > 0,
    }))


if __name__ == "__main__":
    main()
