"""The real Elicitron window, reporting what it does: `python -m kit.window_probe [--exit-after-card]
RENDERER-ARGS`.

Runs exactly what `python -m renderer_process` runs (`renderer_process.app.run`), with an observer
beside it that prints one JSON line on stdout per event, each stamped `at` with
`time.perf_counter_ns()` (CLOCK_MONOTONIC, comparable across processes):

    started   this script's first line          imported  Qt and the renderer imported
    state     the connection state the window shows (`state`)
    welcome   main welcomed the window
    card      a card was shown and is its window's current card (`channel`, `server`)
    painted   that card's first paint, i.e. it was really drawn (`channel`)

The card is found by an application-wide event filter, so nothing of how the window schedules its
cards is assumed. With --exit-after-card the window closes itself after its first card is painted
(closing drops the card silently: the request stays pending) and the process exits.
"""

import time

STARTED = time.perf_counter_ns()  # before the imports below, which the cold start measures

import json
import sys
from functools import partial
from typing import Any

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

import renderer_process.app as renderer_app
from renderer_process.card import ElicitationCard
from renderer_process.main_window import MainWindow

IMPORTED = time.perf_counter_ns()
PAINT_WAIT_MS = 3000  # a card that never paints (it should) still ends an --exit-after-card run


def emit(event: str, at: int | None = None, **fields: Any) -> None:
    print(json.dumps({"event": event, "at": at if at is not None else time.perf_counter_ns(), **fields}),
          flush=True)


class CardObserver(QObject):
    def __init__(self, exit_after_card: bool) -> None:
        super().__init__()
        self._exit_after_card = exit_after_card
        self._unpainted: dict[int, str] = {}  # id(card) -> channel, shown but not yet painted
        self._windows: dict[int, MainWindow] = {}  # id(card) -> its window, until it is painted
        self._exiting = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.Show and isinstance(watched, ElicitationCard):
            window = watched.parentWidget()
            if isinstance(window, MainWindow) and window.current_card() is watched:
                channel = watched.invoke.response_channel
                emit("card", channel=channel, server=watched.invoke.request.server)
                self._unpainted[id(watched)] = channel
                self._windows[id(watched)] = window
                if self._exit_after_card:
                    QTimer.singleShot(PAINT_WAIT_MS, partial(self._exit, window))
        elif kind == QEvent.Type.Paint and id(watched) in self._unpainted:
            emit("painted", channel=self._unpainted.pop(id(watched)))
            painted_in = self._windows.pop(id(watched))
            if self._exit_after_card:
                QTimer.singleShot(0, partial(self._exit, painted_in))  # after this paint completes
        return False

    def _exit(self, window: MainWindow) -> None:
        if self._exiting:
            return
        self._exiting = True
        window.close()  # its closeEvent drops the card silently; app.quit() alone would answer cancel
        QApplication.quit()


class ObservedBridge(renderer_app.MainBridge):
    """The renderer's own bridge, reporting its state and its welcome."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state_changed.connect(lambda state: emit("state", state=state))
        self.welcomed.connect(lambda _welcome: emit("welcome"))


if __name__ == "__main__":
    argv = sys.argv[1:]
    exit_after_card = "--exit-after-card" in argv
    if exit_after_card:
        argv.remove("--exit-after-card")
    emit("started", at=STARTED)
    emit("imported", at=IMPORTED)
    app = QApplication([sys.argv[0]])  # the one renderer_app.run will use
    observer = CardObserver(exit_after_card)
    app.installEventFilter(observer)
    sys.exit(renderer_app.run(argv, bridge_class=ObservedBridge))
