"""Stopping main with calls in flight answers them before the socket they answer on closes (issue 33,
finding 6): `elicitron stop` leaves no traceback in main's log, and each caller hears that main
stopped instead of waiting. Real main, real servers, a caller peer on the wire and `elicitron call`.

Two calls are in flight when main is told to stop: one the probe server runs (its `block` tool
waits until cancelled), and one waiting for a server that keeps failing to start (status
restarting). The second is the one that used to be answered only when the event loop ended, on
the closed ROUTER: `ZMQError: Socket operation on non-socket` from `_answer_if_never_run`.
"""

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from gateway_kit import probe_entry
from kit.env import child_env, short_tmp_dir
from kit.main import MainWatcher, RunningMain, start_main, write_config
from kit.paths import PYTHON, ROOT
from kit.peer import WirePeer

pytestmark = pytest.mark.slow  # a real main, servers and CLI processes

# A server whose process ends at once: main restarts it with backoff, and a call to it waits.
NEVER_STARTS = {"command": sys.executable, "args": ["-c", "raise SystemExit(1)"]}


@pytest.fixture
def main() -> Iterator[RunningMain]:
    home = short_tmp_dir("eli-stop-")
    try:
        running = start_main(write_config(home / "mcp.json", {"probe": probe_entry(), "down": NEVER_STARTS}),
                             home, home=home)
        try:
            yield running
        finally:
            running.stop()
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def _watch(main: RunningMain) -> Iterator[MainWatcher]:
    """main.watch(), with the test's caller heartbeating while it waits (5 s of silence detaches it)."""
    with main.watch() as watcher:
        watcher.peer.companions = main.peers
        yield watcher


def test_stop_with_calls_in_flight_answers_them_and_logs_no_traceback(main: RunningMain) -> None:
    host = main.peer(name="stop-caller", role="controller")
    # At once: `down` is (re)starting for its first few seconds, so the call waits for it (up to
    # 30 s) instead of being refused; main gives up on it only after 5 failed starts.
    waiting = host.call_tool("down", "pid", {})
    with _watch(main) as watcher:
        watcher.wait_server_ready("probe")
    running = host.call_tool("probe", "block", {"tag": "stop-running"})  # in main long before the CLI's below
    cli_call = subprocess.Popen([PYTHON, "-m", "cli_process", "call", "probe", "block", '{"tag": "stop-cli"}',
                                 "--connection", str(main.connection)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(main.home),
                                cwd=ROOT)
    try:
        with _watch(main) as watcher:  # `elicitron call` attached: its call is sent right after its welcome
            watcher.wait_peer("elicitron-cli", role="controller", timeout_s=30)
        stopped = main.cli("stop")
        assert stopped.returncode == 0, stopped.stderr
        answers = {"running": _answer(host, running), "waiting": _answer(host, waiting)}
        _, cli_err = cli_call.communicate(timeout=30)
    finally:
        if cli_call.poll() is None:
            cli_call.kill()
            cli_call.communicate()
    assert main.proc.wait(30) == 0
    log = main.stderr.text()  # main exited: all of its log
    assert "Traceback" not in log and "ZMQError" not in log and "non-socket" not in log, log[-6000:]
    assert "main stopped" in log, log[-3000:]
    # Each call of the caller is answered, and the answer says main stopped (not a hang).
    for which, reply in answers.items():
        assert reply is not None, f"the {which} call got no answer"
        assert reply["error"]["code"] == -32000 and "main is stopping" in reply["error"]["message"], (which, reply)
    assert cli_call.returncode != 0 and "main is stopping" in cli_err, cli_err


def _answer(host: WirePeer, channel: str) -> dict[str, Any] | None:
    """The reply on `channel`, or None when none came within 30 s."""
    try:
        return host.expect_topic(channel, 30)
    except AssertionError:
        return None
