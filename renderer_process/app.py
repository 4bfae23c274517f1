"""Start one renderer window: QApplication + MainBridge + MainWindow, until the window closes."""

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QApplication

from renderer_process.bridge import MainBridge
from renderer_process.icon import app_icon
from renderer_process.main_window import MainWindow
from shared.connection_file import resolve_connection_path
from shared.person import person_at_machine

logger = logging.getLogger(__name__)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m renderer_process", description="Open one Elicitron window."
    )
    parser.add_argument(
        "--connection",
        help="main's connection file (default: $ELICITRON_CONNECTION, then the platform default)",
    )
    parser.add_argument("--name", default=person_at_machine(),
                        help="name main shows for this window (default: you@this-machine)")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser.parse_args(argv)


def run(argv: Sequence[str] | None = None, *, bridge_class: type[MainBridge] = MainBridge) -> int:
    """`bridge_class`: a subclass may watch the bridge (tests/kit/window_probe.py reports its state)."""
    args = parse_args(argv)
    # The pid in each line: windows `launch --detach` opened share one log file (cli_process/detached_window.py).
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("Elicitron")
    QApplication.setWindowIcon(app_icon())

    bridge = bridge_class(resolve_connection_path(args.connection), args.name)
    # <user config dir>/elicitron/window.ini: the window's own options ("keep in the tray").
    settings = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "elicitron", "window")
    window = MainWindow(name=args.name, settings=settings)
    window.attach(bridge)
    app.aboutToQuit.connect(bridge.close)  # the bye goes out on every normal exit (also "Quit" in the tray)
    # Ctrl-C / SIGTERM: close the window first (an open card is left pending for other windows,
    # never answered), then quit. The bridge's timer lets Python see the signal.
    def close_and_quit() -> None:
        window.close()
        app.quit()

    def on_signal(_signum: int, _frame: object) -> None:
        # Python runs this between any two bytecodes, possibly mid-way through a bridge send;
        # quitting from there tore the socket down under it (and lost the bye). From the event
        # loop, no bridge code is running.
        QTimer.singleShot(0, close_and_quit)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    window.show()
    bridge.start()  # an unreadable connection file is not fatal: the window shows it and retries
    code = app.exec()
    logger.info("window closed")
    return code
