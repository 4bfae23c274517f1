"""An open window for the `ask` figure: the renderer's own entry point, stamping every card it paints.

Runs what `python -m renderer_process` runs, with `MainWindow` replaced by a subclass that prints
one JSON line per event on stdout, with `perf_counter_ns` stamps (CLOCK_MONOTONIC, comparable
across processes): `{"ready": ns}` once welcomed, then per card `{"invoke": ns, "card": ns,
"painted": ns, "message": …}`: the bridge delivered the invoke, the card got its Show event, the
card's first paint. After the paint it declines the card (as a click on Decline would), so the
asking process ends and the next sample starts with an empty window.
"""

import json
import sys
import time
from typing import Any

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

import renderer_process.app as renderer_app
from renderer_process.card import ElicitationCard
from renderer_process.main_window import MainWindow


def _print(stamps: dict[str, Any]) -> None:
    print(json.dumps(stamps), flush=True)


class StampingWindow(MainWindow):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._invoked: dict[str, int] = {}
        self._stamps: dict[str, Any] | None = None
        self._watched: QObject | None = None
        app = QApplication.instance()
        assert app is not None
        app.installEventFilter(self)

    def attach(self, bridge: Any) -> None:
        bridge.invoked.connect(self._on_invoke_stamp)  # before the window's own slot queues the card
        super().attach(bridge)
        bridge.welcomed.connect(lambda welcome: _print({"ready": time.perf_counter_ns()}))

    def _on_invoke_stamp(self, invoke: Any) -> None:
        self._invoked[invoke.response_channel] = time.perf_counter_ns()

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind == QEvent.Type.Show and isinstance(obj, ElicitationCard) and obj is self.current_card() \
                and obj is not self._watched:
            self._watched = obj
            self._stamps = {"invoke": self._invoked.pop(obj.invoke.response_channel, None),
                            "card": time.perf_counter_ns(), "message": obj.invoke.request.params.get("message")}
        elif kind == QEvent.Type.Paint and obj is self._watched and self._stamps is not None \
                and "painted" not in self._stamps:
            self._stamps["painted"] = time.perf_counter_ns()
            _print(self._stamps)
            card = obj
            QTimer.singleShot(0, lambda: card.decline_button.click())  # after this paint completes
        return False


if __name__ == "__main__":
    renderer_app.MainWindow = StampingWindow  # type: ignore[misc]
    sys.exit(renderer_app.run(sys.argv[1:]))
