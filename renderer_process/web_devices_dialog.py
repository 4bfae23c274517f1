"""Window ▸ Web devices…: the browsers paired with this machine's web window, Revoke, and Pair.

The list is read from the web window's directory with shared/web_devices.py (the renderer never
loads the web window). Changing it is the CLI's: Pair runs `elicitron pair --web --name NAME` and
shows the one-time link with its QR code (segno draws it as PNG), Revoke runs `elicitron devices
revoke ID`, each as a child process (QProcess, so the window stays responsive), and what the CLI
says when it refuses (no web window running, say) is shown as it said it.
"""

import io
import sys
import time
from collections.abc import Callable
from pathlib import Path

import segno
from PySide6.QtCore import QProcess, Qt
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from shared.web_devices import read_paired_devices

QR_SCALE = 4  # pixels per module: a pairing link's code is about 200 px square


def qr_pixmap(link: str) -> QPixmap:
    """The QR code of `link` as segno draws it (PNG), with its quiet zone."""
    png = io.BytesIO()
    segno.make(link).save(png, kind="png", scale=QR_SCALE)
    pixmap = QPixmap()
    pixmap.loadFromData(png.getvalue(), "PNG")
    return pixmap


class WebDevicesDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, web_dir: Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Web devices")
        self.web_dir = web_dir
        self.devices = QTreeWidget(self)
        self.devices.setObjectName("web_devices")
        self.devices.setHeaderLabels(["Name", "Paired", "Last seen"])
        self.devices.setRootIsDecorated(False)
        self.devices.setAccessibleName("Paired web devices")
        self.revoke_button = QPushButton("Revoke", self)
        self.revoke_button.setObjectName("revoke_device")
        self.name = QLineEdit(self)
        self.name.setPlaceholderText("name (default: yours and the browser's)")
        self.name.setAccessibleName("Name of the browser to pair")
        self.pair_button = QPushButton("Pair a browser", self)
        self.pair_button.setObjectName("pair_device")
        self.link = QLabel(self)
        self.link.setObjectName("pair_link")
        self.link.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.link.setWordWrap(True)
        self.qr = QLabel(self)
        self.qr.setObjectName("pair_qr")
        self.qr.setAccessibleName("QR code of the pairing link")
        self.said = QLabel(self)
        self.said.setObjectName("web_devices_said")
        self.said.setWordWrap(True)
        # One QProcess for the dialog's life, started again for each command: deleting one from
        # its own `finished` (deleteLater) crashed PySide6 now and then (SIGBUS in ~QObject).
        self._cli = QProcess(self)
        self._cli.finished.connect(self._finished)
        self._cli.errorOccurred.connect(self._failed_to_start)
        self._busy = False
        self._on_output: Callable[[str], None] = self.said.setText

        pair_row = QHBoxLayout()
        pair_row.addWidget(self.name)
        pair_row.addWidget(self.pair_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.devices)
        layout.addWidget(self.revoke_button, alignment=Qt.AlignmentFlag.AlignRight)
        layout.addLayout(pair_row)
        layout.addWidget(self.link)
        layout.addWidget(self.qr, alignment=Qt.AlignmentFlag.AlignHCenter)
        layout.addWidget(self.said)
        self.pair_button.clicked.connect(self._pair)
        self.revoke_button.clicked.connect(self._revoke)
        self.devices.itemSelectionChanged.connect(self._enable)
        self.refresh()

    def refresh(self) -> None:
        self.devices.clear()
        for device in read_paired_devices(self.web_dir):
            seen = _when(device.last_seen) if device.last_seen is not None else "never"
            item = QTreeWidgetItem([device.name, _when(device.paired_at), seen])
            item.setData(0, Qt.ItemDataRole.UserRole, device.id)
            self.devices.addTopLevelItem(item)
        for column in range(self.devices.columnCount()):
            self.devices.resizeColumnToContents(column)
        if not self.devices.topLevelItemCount():
            self.said.setText("No browser is paired yet.")
        self._enable()

    def _enable(self) -> None:
        idle = not self._busy
        self.revoke_button.setEnabled(idle and bool(self.devices.selectedItems()))
        self.pair_button.setEnabled(idle)

    def _pair(self) -> None:
        self.link.clear()
        self.qr.clear()
        name = self.name.text().strip()  # none: the browser is named as it pairs ("ana's Chrome on Android")
        self._run(["pair", "--web", *(["--name", name] if name else [])], self._show_link)

    def _show_link(self, printed: str) -> None:
        link = printed.strip().splitlines()[0] if printed.strip() else ""
        self.link.setText(link)
        self.qr.setPixmap(qr_pixmap(link))
        self.said.setText("Open the link in the browser, or scan the code, within 5 minutes; it works once.")

    def _revoke(self) -> None:
        items = self.devices.selectedItems()
        if items:
            self._run(["devices", "revoke", str(items[0].data(0, Qt.ItemDataRole.UserRole))], self.said.setText)

    def _run(self, args: list[str], on_output: Callable[[str], None]) -> None:
        web_dir = ["--web-dir", str(self.web_dir)] if self.web_dir is not None else []
        self._on_output = on_output
        self.said.setText("…")
        self._busy = True
        self._enable()
        self._cli.start(sys.executable, ["-m", "cli_process", *args, *web_dir])

    def _failed_to_start(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:  # no `finished` follows
            self._busy = False
            self.said.setText(f"cannot run the elicitron command: {self._cli.errorString()}")
            self._enable()

    def _finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        out = bytes(self._cli.readAllStandardOutput().data()).decode(errors="replace")
        err = bytes(self._cli.readAllStandardError().data()).decode(errors="replace").strip()
        self._busy = False
        if code == 0:
            self.refresh()
            self._on_output(out.strip())
        else:  # the CLI's own one line: what is wrong and what to do
            self.said.setText(err.splitlines()[-1].removeprefix("elicitron: ") if err else f"exit code {code}")
            self._enable()


def _when(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch_s))
