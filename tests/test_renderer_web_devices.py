"""Window ▸ Web devices… in a real Qt window (offscreen): the paired browsers read from the web
window's directory, Pair running the real `elicitron pair --web` (its link and the QR code segno
draws for that link), Revoke running the real `elicitron devices revoke`, and the CLI's refusal
shown as it said it."""

import getpass
import io
from pathlib import Path

import pytest
import segno
from kit.paths import ROOT
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QImage
from PySide6.QtWidgets import QLabel, QPushButton, QTreeWidget
from pytestqt.qtbot import QtBot

from renderer_process.main_window import MainWindow
from renderer_process.web_devices_dialog import WebDevicesDialog
from shared.web_devices import read_paired_devices
from web_process.devices import WebDir

pytestmark = pytest.mark.slow  # Pair and Revoke run the CLI

TIMEOUT_MS = 30_000


@pytest.fixture
def web_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WebDir:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the CLI the dialog starts imports the checkout
    web = WebDir(tmp_path / "web")
    web.redeem(web.new_code("desk tablet"))
    return web


def _dialog(qtbot: QtBot, web: WebDir) -> WebDevicesDialog:
    dialog = WebDevicesDialog(web_dir=web.path)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def _rows(dialog: WebDevicesDialog) -> list[list[str]]:
    tree = dialog.findChild(QTreeWidget, "web_devices")
    assert tree is not None
    items = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    return [[item.text(c) for c in range(3)] for item in items if item is not None]


def _said(dialog: WebDevicesDialog) -> str:
    label = dialog.findChild(QLabel, "web_devices_said")
    assert label is not None
    return label.text()


def test_the_dialog_lists_pairs_with_a_qr_code_and_revokes(qtbot: QtBot, web_dir: WebDir) -> None:
    web_dir.announce("http://127.0.0.1:8766")  # a web window "runs": this test's own pid is alive
    dialog = _dialog(qtbot, web_dir)
    ((name, paired, seen),) = _rows(dialog)
    assert (name, seen) == ("desk tablet", "never") and paired.startswith("20")

    dialog.name.setText("qt phone")
    pair = dialog.findChild(QPushButton, "pair_device")
    assert pair is not None
    qtbot.mouseClick(pair, Qt.MouseButton.LeftButton)
    link_label = dialog.findChild(QLabel, "pair_link")
    assert link_label is not None
    qtbot.waitUntil(lambda: link_label.text().startswith("http://127.0.0.1:8766/pair#"), timeout=TIMEOUT_MS)
    link = link_label.text()
    qr_label = dialog.findChild(QLabel, "pair_qr")
    assert qr_label is not None
    expected = QImage()
    assert expected.loadFromData(_png(link), "PNG")
    shown = qr_label.pixmap().toImage().convertToFormat(expected.format())
    assert shown == expected  # the code segno draws for the link shown above it
    assert "within 5 minutes" in _said(dialog)
    assert web_dir.redeem(link.split("#", 1)[1])[0].name == "qt phone"  # and the link pairs
    dialog.refresh()
    assert [row[0] for row in _rows(dialog)] == ["desk tablet", "qt phone"]

    tree = dialog.findChild(QTreeWidget, "web_devices")
    assert tree is not None
    first = tree.topLevelItem(0)
    assert first is not None
    tree.setCurrentItem(first)
    revoke = dialog.findChild(QPushButton, "revoke_device")
    assert revoke is not None and revoke.isEnabled()
    qtbot.mouseClick(revoke, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: [row[0] for row in _rows(dialog)] == ["qt phone"], timeout=TIMEOUT_MS)
    assert _said(dialog).startswith("revoked desk tablet")
    assert [device.name for device in read_paired_devices(web_dir.path)] == ["qt phone"]


def test_pair_with_no_name_leaves_the_name_to_the_browser_that_pairs(qtbot: QtBot, web_dir: WebDir) -> None:
    """Issue 37, item 6: the dialog passed `--name browser`; now the device is named as it pairs."""
    web_dir.announce("http://127.0.0.1:8766")
    dialog = _dialog(qtbot, web_dir)
    pair = dialog.findChild(QPushButton, "pair_device")
    link_label = dialog.findChild(QLabel, "pair_link")
    assert pair is not None and link_label is not None and dialog.name.text() == ""
    qtbot.mouseClick(pair, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: link_label.text().startswith("http://127.0.0.1:8766/pair#"), timeout=TIMEOUT_MS)
    firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0"
    device, _ = web_dir.redeem(link_label.text().split("#", 1)[1], firefox)
    assert device.name == f"{getpass.getuser()}'s Firefox on Linux"


def test_pairing_without_a_running_web_window_says_how_to_start_one(qtbot: QtBot, web_dir: WebDir) -> None:
    dialog = _dialog(qtbot, web_dir)
    pair = dialog.findChild(QPushButton, "pair_device")
    assert pair is not None
    qtbot.mouseClick(pair, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pair.isEnabled() and _said(dialog) != "…", timeout=TIMEOUT_MS)
    assert _said(dialog).startswith("no web window is running") and "`elicitron web`" in _said(dialog)
    label = dialog.findChild(QLabel, "pair_qr")
    assert label is not None and label.pixmap().isNull()


def test_the_window_menu_opens_the_dialog(qtbot: QtBot, web_dir: WebDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELICITRON_WEB_DIR", str(web_dir.path))
    window = MainWindow(name="test", opener=lambda _url: None)
    qtbot.addWidget(window)
    (action,) = [a for a in window.findChildren(QAction) if a.objectName() == "web_devices_action"]
    assert action.text() == "Web devices…"
    action.trigger()
    dialog = window.findChild(WebDevicesDialog)
    assert dialog is not None and dialog.isVisible()
    assert [row[0] for row in _rows(dialog)] == ["desk tablet"]


def _png(link: str) -> bytes:
    out = io.BytesIO()
    segno.make(link).save(out, kind="png", scale=4)
    return out.getvalue()
