"""`elicitron pair --web` right after `elicitron main --web ADDR` waits for the web window main is
starting and prints its pairing link, instead of failing with "no web window is running" (issue 33,
finding 7); with no web window coming it still fails at once with that line. Real main, real web
window child, the real CLI.

The child is held in "starting" by a FIFO gate (kit/start_gate_site): main reports it starting for
as long as the test needs, so `pair --web` is shown to run while it starts, with no race and no sleep.
"""

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import PYTHON, ROOT

pytestmark = pytest.mark.slow  # a real main, its web window child and CLI processes

GATE_SITE = Path(__file__).parent / "kit" / "start_gate_site"
GATE_ENV = "ELICITRON_TEST_WEB_GATE"


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_tmp_dir("eli-pairweb-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _start_gated_web_main(home: Path, gate: Path) -> RunningMain:
    """`elicitron main --web 127.0.0.1:0` whose web window child waits at `gate` before it runs."""
    base = child_env(home)
    env = {**base, "PYTHONPATH": os.pathsep.join([str(GATE_SITE), base["PYTHONPATH"]]), GATE_ENV: str(gate)}
    return start_main(write_config(home / "mcp.json", {}), home, "--web", "127.0.0.1:0", home=home, env=env)


def _open_gate(gate: Path, timeout_s: float = 30.0) -> None:
    """Let the gated child run: opening the FIFO for writing meets its open for reading."""
    opened = threading.Event()

    def open_and_close() -> None:
        os.close(os.open(gate, os.O_WRONLY))
        opened.set()

    threading.Thread(target=open_and_close, daemon=True).start()
    assert opened.wait(timeout_s), "the web window child never reached its gate"


def _pair(main: RunningMain) -> "subprocess.Popen[str]":
    return subprocess.Popen([PYTHON, "-m", "cli_process", "pair", "--web", "--name", "early phone",
                             "--connection", str(main.connection)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(main.home),
                            cwd=ROOT)


def test_pair_web_waits_for_the_web_window_main_is_starting(home: Path) -> None:
    gate = home / "web-gate"
    os.mkfifo(gate, 0o600)
    main = _start_gated_web_main(home, gate)
    pair = _pair(main)
    try:
        assert main.status()["webWindow"]["state"] == "starting"  # held at the gate
        with main.watch() as watcher:  # pair is waiting: attached to main, asking its status
            watcher.wait(lambda: pair.poll() is not None or watcher.attached("elicitron-pair", "controller"),
                         "pair --web waiting for the web window", 30)
        assert pair.poll() is None, f"pair --web did not wait for the starting web window: {pair.communicate()}"
        _open_gate(gate)
        out, err = pair.communicate(timeout=60)
        status = main.wait_status(lambda s: (s.get("webWindow") or {}).get("state") == "listening",
                                  "the web window listening")
        url = status["webWindow"]["url"]
        assert pair.returncode == 0, err
        assert out.startswith(f"{url}/pair#") and len(out.splitlines()) == 1, out  # piped: the link alone
    finally:
        if pair.poll() is None:
            pair.kill()
            pair.communicate()
        main.stop()


def test_pair_web_fails_at_once_when_no_web_window_is_coming(home: Path) -> None:
    main = start_main(write_config(home / "mcp.json", {}), home, home=home)  # no --web: none is coming
    try:
        started = time.monotonic()
        done = main.cli("pair", "--web")
        took = time.monotonic() - started
        assert done.returncode == 1 and done.stdout == "", (done.stdout, done.stderr)
        assert done.stderr.startswith("elicitron: no web window is running"), done.stderr
        assert took < 10, f"pair --web waited {took:.1f} s for a web window nobody starts"
    finally:
        main.stop()
    started = time.monotonic()  # no main at all: the same line, at once
    done = subprocess.run([PYTHON, "-m", "cli_process", "pair", "--web", "--connection", str(main.connection)],
                          capture_output=True, text=True, env=child_env(home), cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 1 and done.stderr.startswith("elicitron: no web window is running"), done.stderr
    assert time.monotonic() - started < 10
