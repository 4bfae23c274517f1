"""The renderer's own entry point (`renderer_process.app.run`), timed: prints when the first card shows.

Runs exactly what `python -m renderer_process` runs, with one change: `MainWindow` is replaced
by a subclass that watches for its first card and prints one JSON line of `perf_counter_ns`
stamps (CLOCK_MONOTONIC, comparable across processes): `started` (this script's first line),
`imported` (Qt and the renderer imported), `welcome`, `card` (an ElicitationCard got its Show
event and is the window's current_card()) and `painted` (that card's first paint event, i.e.
it was really drawn), then quits. The card is found by an application-wide event filter, so
however the window schedules its cards, nothing of its internals is assumed.
"""

import time

STARTED = time.perf_counter_ns()

import json
import sys
from typing import Any

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

import renderer_process.app as renderer_app
from renderer_process.card import ElicitationCard
from renderer_process.main_window import MainWindow

IMPORTED = time.perf_counter_ns()
PAINT_WAIT_MS = 3000


class TimedWindow(MainWindow):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stamps: dict[str, int | None] = {"started": STARTED, "imported": IMPORTED}
        self._watched: QObject | None = None
        self._reported = False
        app = QApplication.instance()
        assert app is not None
        app.installEventFilter(self)

    def attach(self, bridge: Any) -> None:
        super().attach(bridge)
        bridge.welcomed.connect(self._on_welcome_stamp)

    def _on_welcome_stamp(self, welcome: Any) -> None:
        self._stamps.setdefault("welcome", time.perf_counter_ns())

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.Show and self._watched is None and isinstance(obj, ElicitationCard):
            if obj is self.current_card():
                self._stamps["card"] = time.perf_counter_ns()
                self._watched = obj
                QTimer.singleShot(PAINT_WAIT_MS, self._report)  # no paint event at all: report without it
        elif kind == QEvent.Type.Paint and obj is self._watched and "painted" not in self._stamps:
            self._stamps["painted"] = time.perf_counter_ns()
            QTimer.singleShot(0, self._report)  # after this paint completes
        return False

    def _report(self) -> None:
        if self._reported:
            return
        self._reported = True
        self._stamps.setdefault("painted", None)
        print(json.dumps(self._stamps), flush=True)
        # Close the window first: its closeEvent drops the card silently, so the request stays
        # pending for the next sample (a bare app.quit() would let the card answer "cancel").
        self.close()
        app = QApplication.instance()
        if app is not None:
            app.quit()


if __name__ == "__main__":
    renderer_app.MainWindow = TimedWindow  # type: ignore[misc]
    sys.exit(renderer_app.run(sys.argv[1:]))
