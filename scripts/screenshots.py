"""Take the README's screenshots of the argument form and of the tray notification.

Run through `scripts/screenshots`, which starts a virtual X screen with a panel that has a system
tray (Xvfb + icewm) when it can; without one, only the argument form is taken (offscreen). Both
come from the real window against a real main with the demo server and the typed-tools server
of the test suite; nothing here is part of the test run.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEventLoop, QObject, QRect, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QCheckBox, QComboBox, QLineEdit, QListWidget, QPushButton

from renderer_process.bridge import MainBridge
from renderer_process.main_window import MainWindow
from renderer_process.screenshot import grab_widget

OUT = ROOT / "tests" / "screenshots"


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Run the Qt loop until `predicate` holds; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    loop = QEventLoop()
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: timed out waiting for {what}")
        QTimer.singleShot(50, loop.quit)
        loop.exec()


def child[T: QObject](parent: QObject, kind: type[T], name: str) -> T:
    found = parent.findChild(kind, name)
    if found is None:
        raise SystemExit(f"screenshots: no {kind.__name__} named {name!r}")
    return found


def start_main(work: Path) -> tuple[subprocess.Popen[bytes], Path, dict[str, str]]:
    config = work / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "demo": {"command": sys.executable, "args": [str(ROOT / "main_process" / "demo_server.py")]},
        "typed": {"command": sys.executable, "args": [str(ROOT / "tests" / "typed_tools_server.py")]},
    }}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(work / "config"),
           "XDG_DATA_HOME": str(work / "data"), "XDG_STATE_HOME": str(work / "state")}
    connection = work / "run" / "c.json"
    proc = subprocess.Popen([sys.executable, "-m", "cli_process", "main", "--connection", str(connection),
                             "--config", str(config)], env=env, cwd=ROOT, stdin=subprocess.DEVNULL)
    return proc, connection, env


def servers_ready(window: MainWindow) -> bool:
    tree = window.servers_panel.tree
    rows = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    return len(rows) == 2 and all(row is not None and row.text(1) == "ready" for row in rows)


def argument_form(connection: Path) -> Path:
    bridge = MainBridge(connection, "readme")
    window = MainWindow(name="readme", tray_factory=lambda _parent: None)
    window.attach(bridge)
    window.resize(1100, 940)
    window.show()
    bridge.start()
    wait_until(lambda: servers_ready(window), 60, "the servers")
    child(window, QComboBox, "call_server").setCurrentText("typed")
    child(window, QComboBox, "call_tool").setCurrentText("show_result")
    wait_until(lambda: window.findChild(QLineEdit, "field:city") is None
               and child(window, QPushButton, "call").isEnabled(), 15, "show_result")
    child(window, QPushButton, "call").click()
    wait_until(lambda: window.result_view.heading.text() == "typed/show_result", 15, "the result")
    child(window, QComboBox, "call_tool").setCurrentText("plan_trip")
    wait_until(lambda: window.findChild(QLineEdit, "field:city") is not None, 15, "the form")
    child(window, QLineEdit, "field:city").setText("Lisbon")
    child(window, QLineEdit, "field:nights").setText("3")
    child(window, QCheckBox, "field:pets").setChecked(True)
    child(window, QListWidget, "field:extras").item(0).setCheckState(Qt.CheckState.Checked)
    child(window, QLineEdit, "field:contact").setText("ada@")  # shows how a problem reads
    path = grab_widget(window, OUT / "argument-form.png")
    bridge.close()
    window.close()
    return path


def tray_notification(connection: Path, env: dict[str, str]) -> Path:
    bridge = MainBridge(connection, "tray")
    window = MainWindow(name="tray")  # the real system tray of this (virtual) desktop
    if not window.tray.available:
        raise SystemExit("screenshots: this desktop has no system tray")
    window.attach(bridge)
    window.show()
    bridge.start()
    wait_until(lambda: servers_ready(window), 60, "the servers")
    window.keep_in_tray.setChecked(True)
    window.close()  # into the tray
    call = subprocess.Popen([sys.executable, "-m", "cli_process", "call", "demo", "book_table",
                             '{"restaurant": "Le Cinq"}', "--connection", str(connection)],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: window.waiting_count() == 1, 30, "the request")
        wait_until(lambda: any(w.isVisible() and w.metaObject().className() == "QBalloonTip"
                               for w in QApplication.topLevelWidgets()), 10, "the notification")
        balloon = next(
            w for w in QApplication.topLevelWidgets() if w.metaObject().className() == "QBalloonTip"
        )
        screen = QGuiApplication.primaryScreen()
        inside = balloon.frameGeometry().center()

        def painted() -> bool:  # the X server shows the balloon (the desktop behind it is black)
            pixel = screen.grabWindow(0, inside.x(), inside.y(), 1, 1).toImage().pixelColor(0, 0)
            return pixel.lightness() > 64

        wait_until(painted, 10, "the notification on screen")
        shot = screen.grabWindow(0)
        size = screen.geometry()
        # The lower right corner: the notification and the panel's tray with our icon.
        frame = balloon.frameGeometry().united(QRect(size.width() - 420, size.height() - 40, 420, 40))
        frame = frame.adjusted(-24, -24, 24, 0).intersected(size)
        path = OUT / "tray-notification.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not shot.copy(frame).save(str(path), "PNG"):
            raise SystemExit(f"screenshots: could not write {path}")
        return path
    finally:
        call.terminate()
        call.wait(timeout=10)
        bridge.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["form", "tray"], help="take one of the two")
    args = parser.parse_args()
    app = QApplication([sys.argv[0]])
    app.setApplicationName("Elicitron")
    taken: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="eli-shots-", dir="/tmp") as tmp:
        proc, connection, env = start_main(Path(tmp))
        try:
            wait_until(connection.exists, 30, "main")
            if args.only in (None, "form"):
                taken.append(argument_form(connection))
            if args.only in (None, "tray"):
                if QGuiApplication.platformName() == "xcb":
                    taken.append(tray_notification(connection, env))
                else:
                    print("screenshots: no X screen with a tray: no notification picture", file=sys.stderr)
        finally:
            subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                           env=env, cwd=ROOT, capture_output=True, check=False, timeout=60)
            proc.wait(timeout=30)
    for path in taken:
        print(f"screenshots: wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
