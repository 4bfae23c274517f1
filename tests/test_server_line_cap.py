"""main's own connection to a configured stdio server reads lines in linear time with a cap: a
server that writes 48 MiB without a line break costs main little, and is restarted with the
reason in `status` (issue 33, finding 3)."""

import json
import os
from collections.abc import Callable
from pathlib import Path

from kit.main import RunningMain
from kit.paths import PYTHON, TESTS
from kit.procs import descendants
from test_supervision import server_status

LONG_LINE_SERVER = TESTS / "long_line_server.py"
CPU_LIMIT_S = 2.0


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (/proc/<pid>/stat; its comm may hold spaces, so split after the ')')."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def server_pid(main: RunningMain) -> int:
    pids = [pid for pid, cmd in descendants(main.pid).items() if "long_line_server.py" in cmd]
    assert len(pids) == 1, pids
    return pids[0]


def test_a_48_mib_line_costs_main_little_and_restarts_the_server(
    main_factory: Callable[..., RunningMain], tmp_path: Path,
) -> None:
    state = tmp_path / "long-line"
    state.mkdir()
    os.mkfifo(state / "gate")
    main = main_factory({"flood": {"command": PYTHON, "args": [str(LONG_LINE_SERVER), str(state)]}})
    window = main.peer()
    main.wait_server_ready("flood")
    first = server_pid(main)
    cpu_before, rss_before = cpu_seconds(main.pid), rss_mb(main.pid, "VmRSS")
    call = window.call_tool("flood", "flood", {})
    try:
        restarting = server_status(window, "flood", "restarting", timeout_s=60)
    finally:
        used = cpu_seconds(main.pid) - cpu_before
        print(f"main: {used:.2f} s of CPU for the 48 MiB line; RSS {rss_before:.0f} MB before, "
              f"{rss_mb(main.pid, 'VmRSS'):.0f} MB after, peak {rss_mb(main.pid, 'VmHWM'):.0f} MB")
    assert used < CPU_LIMIT_S, f"main used {used:.2f} s of CPU on one long line"
    assert "over 32 MiB" in restarting["error"], restarting
    assert "error" in window.expect_topic(call)  # the call ended with its connection
    # `status --json` says why, while the restarted server waits at its gate.
    shown = main.cli("status", "--json")
    assert shown.returncode == 0, shown.stderr
    status = next(s for s in json.loads(shown.stdout)["servers"] if s["name"] == "flood")
    assert status["status"] == "restarting" and "over 32 MiB" in status["error"], status
    os.close(os.open(state / "gate", os.O_WRONLY))  # let the restarted server answer
    main.wait_server_ready("flood")
    assert server_pid(main) != first
    reply = window.expect_topic(window.call_tool("flood", "echo", {"text": "back"}))
    assert reply["result"]["content"][0]["text"] == "back"
