"""Issue 37's first hour, at the launcher: `scripts/launch` gives the terminal back (the window runs
on its own, its log in a file whose path is printed, no INFO lines on the terminal), and the window
is named after the person and the machine (`ana@laptop`), in `status` as in the audit's BY column."""

import getpass
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.env import child_env, short_tmp_dir
from kit.paths import ROOT
from test_first_hour_window import venv_is_current


def stop_main(connection: Path, env: dict[str, str]) -> None:
    if connection.exists():
        subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                       capture_output=True, timeout=60, env=env, cwd=ROOT, check=False)


def kill_window(stderr: str) -> None:
    found = re.search(r"window opened \(pid (\d+)", stderr)
    if found is not None:
        try:
            os.kill(int(found.group(1)), signal.SIGTERM)
        except ProcessLookupError:
            pass


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_tmp_dir("eli-launch37-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_scripts_launch_gives_the_terminal_back_and_says_where_the_windows_log_is(home: Path) -> None:
    if not venv_is_current():
        pytest.skip("scripts/launch would install .venv from uv.lock first (run scripts/test)")
    connection = home / "run" / "connection.json"
    env = child_env(home, QT_QPA_PLATFORM="offscreen")
    done = None
    try:
        # The terminal is given back: the script returns (with the window open) well within the timeout.
        done = subprocess.run([str(ROOT / "scripts" / "launch"), "--connection", str(connection)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=env,
                              cwd=ROOT, check=False)
        assert done.returncode == 0, done.stderr
        log = home / "state" / "elicitron" / "log" / "window.log"
        assert "window opened (pid " in done.stderr and f"its log: {log})" in done.stderr, done.stderr
        assert " INFO " not in done.stdout + done.stderr, done.stderr  # the window's log lines are in its file
        assert log.exists() and " INFO " in log.read_text()
        status = subprocess.run([sys.executable, "-m", "cli_process", "status", "--json", "--connection",
                                 str(connection)], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
                                check=True)
        windows = [peer for peer in json.loads(status.stdout)["peers"] if peer["role"] == "renderer"]
        person_at_machine = f"{getpass.getuser()}@{socket.gethostname().split('.')[0]}"
        assert [window["name"] for window in windows] == [person_at_machine]
    finally:
        if done is not None:
            kill_window(done.stderr)
        stop_main(connection, env)


@pytest.mark.slow
def test_a_detached_window_that_cannot_start_says_so_with_its_log(home: Path) -> None:
    connection = home / "run" / "connection.json"
    # Qt finds no such platform plugin and exits at once: launch says so instead of "opened".
    env = child_env(home, QT_QPA_PLATFORM="no-such-platform-plugin")
    try:
        done = subprocess.run([sys.executable, "-m", "cli_process", "launch", "--detach", "--connection",
                               str(connection)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120, env=env, cwd=ROOT, check=False)
        assert done.returncode == 1, done.stderr
        assert "the window exited with code" in done.stderr and "window.log" in done.stderr, done.stderr
    finally:
        stop_main(connection, env)
