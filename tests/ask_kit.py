"""Helpers for the asking tests: one main per module, `elicitron ask` as a process, a real window."""

import json
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT
from kit.peer import WirePeer
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from renderer_process.bridge import MainBridge
from renderer_process.card import ElicitationCard
from renderer_process.main_window import MainWindow


@contextmanager
def module_main(*extra_args: str, servers: dict[str, Any] | None = None) -> Iterator[RunningMain]:
    """A main with no servers (questions need none), for all tests of a module."""
    runtime = short_tmp_dir()
    main = start_main(write_config(runtime / "mcp.json", servers or {}), runtime, *extra_args)
    try:
        yield main
    finally:
        main.stop()
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


def ask(connection: Path, *args: str, program: list[str] | None = None) -> "subprocess.Popen[str]":
    """`elicitron ask ARGS --connection FILE` as its own process; `program` runs it through a
    wrapper (e.g. a script named deploy.sh) so the wrapper is the asking program."""
    program = program or [sys.executable, "-m", "cli_process"]
    argv = [*program, "ask", *args, "--connection", str(connection)]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=child_env(PYTHON=sys.executable), cwd=ROOT)


def deploy_script(directory: Path) -> Path:
    """A shell script named deploy.sh that runs `elicitron ask` as its child."""
    script = directory / "deploy.sh"
    script.write_text('#!/bin/sh\n"$PYTHON" -m cli_process "$@"\nexit $?\n')
    script.chmod(0o755)
    return script


def finished(qtbot: QtBot, proc: "subprocess.Popen[str]", timeout_ms: int = 15_000,
             keep_alive: Sequence[WirePeer] = ()) -> tuple[int, str, str]:
    """Let Qt run until the process exits (`keep_alive`'s peers heartbeating meanwhile); its exit
    code, stdout and stderr."""
    qtbot.waitUntil(lambda: _pumped(keep_alive) and proc.poll() is not None, timeout=timeout_ms)
    out, err = proc.communicate(timeout=5)
    return proc.returncode, out, err


def ended(proc: "subprocess.Popen[str]") -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)


def _pumped(peers: Sequence[WirePeer]) -> bool:
    for peer in peers:
        peer.pump()
    return True


class Window:
    """A real window (MainBridge + MainWindow) in this process, offscreen, attached to main."""

    def __init__(self, qtbot: QtBot, connection: Path, name: str, keep_alive: Sequence[WirePeer] = ()) -> None:
        """`keep_alive`: contract peers of the same test, heartbeating (and keeping what they get)
        while this waits in Qt's loop: main takes a peer silent for 5 s for gone."""
        self.qtbot = qtbot
        self.keep_alive = keep_alive
        self.bridge = MainBridge(connection, name)
        self.window = MainWindow(name=name)
        qtbot.addWidget(self.window)
        self.window.attach(self.bridge)
        self.invoked: list[Any] = []
        self.bridge.invoked.connect(self.invoked.append)
        self.bridge.welcomed.connect(lambda welcome: self.invoked.extend(welcome.pending))
        self.window.show()
        self.bridge.start()
        qtbot.waitUntil(lambda: _pumped(keep_alive) and self.bridge.is_welcomed, timeout=15_000)

    def card(self, timeout_ms: int = 15_000) -> ElicitationCard:
        self.qtbot.waitUntil(lambda: _pumped(self.keep_alive) and self.window.current_card() is not None,
                             timeout=timeout_ms)
        card = self.window.current_card()
        assert isinstance(card, ElicitationCard), card
        self.qtbot.waitExposed(card)
        return card

    def no_card(self, timeout_ms: int = 15_000) -> None:
        self.qtbot.waitUntil(lambda: _pumped(self.keep_alive) and self.window.current_card() is None,
                             timeout=timeout_ms)

    def click(self, card: ElicitationCard, name: str) -> None:
        from PySide6.QtCore import Qt

        button = card.findChild(QPushButton, name)
        assert button is not None and button.isVisible() and button.isEnabled(), name
        self.qtbot.mouseClick(button, Qt.MouseButton.LeftButton)

    def close(self) -> None:
        self.bridge.close()
        self.window.close()


@contextmanager
def window(qtbot: QtBot, connection: Path, name: str, keep_alive: Sequence[WirePeer] = ()) -> Iterator[Window]:
    opened = Window(qtbot, connection, name, keep_alive)
    try:
        yield opened
    finally:
        opened.close()


def audit_entries(main: RunningMain, message: str) -> list[dict[str, Any]]:
    """`elicitron audit --json` rows for questions with this message."""
    result = main.cli_plain("audit", "--json", "--limit", "200")
    assert result.returncode == 0, result.stderr
    return [row for row in json.loads(result.stdout) if row["message"] == message]
