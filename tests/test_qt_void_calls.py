"""Guard against a broken Python/PySide6 pairing.

PySide6 6.12 on Python 3.11 aborts the interpreter ("none_dealloc") after a few thousand calls of
Qt methods that return void (none_dealloc runs when None's reference count reaches zero). Make that many calls
and check the process is still fine and None's reference count did not drain, both here and in a
child interpreter whose death we can report with a clear message.
"""

import os
import subprocess
import sys
import textwrap

import pytest
from PySide6.QtWidgets import QLabel, QPushButton
from pytestqt.qtbot import QtBot

CALLS = 20_000
CHILD_CALLS = 100_000  # more than None's reference count on 3.11 with Qt loaded: a broken pairing dies


def test_many_void_qt_calls_in_process(qtbot: QtBot) -> None:
    button, label = QPushButton("b"), QLabel("l")
    qtbot.addWidget(button)
    qtbot.addWidget(label)
    none_refs = sys.getrefcount(None)
    for i in range(CALLS):
        button.setEnabled(i % 2 == 0)  # void
        label.setText(str(i))  # void
    assert label.text() == str(CALLS - 1)
    assert not button.isEnabled()
    assert sys.getrefcount(None) >= none_refs - 100, "void Qt calls are draining None's reference count"


@pytest.mark.slow
def test_many_void_qt_calls_in_a_child_interpreter() -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from PySide6.QtWidgets import QApplication, QLabel
        app = QApplication([])
        label = QLabel()
        none_refs = sys.getrefcount(None)
        for i in range({CHILD_CALLS}):
            label.setEnabled(i % 2 == 0)
            label.setText(str(i))
        assert sys.getrefcount(None) >= none_refs - 100, "None's reference count is draining"
        print("ok", label.text())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        check=False,
    )
    assert done.returncode == 0, (
        f"{CHILD_CALLS} void Qt calls killed Python {sys.version.split()[0]} (exit {done.returncode}); "
        f"this Python/PySide6 pairing is broken, use Python >= 3.12.\n{done.stderr[-2000:]}"
    )
    assert done.stdout.split() == ["ok", str(CHILD_CALLS - 1)]
