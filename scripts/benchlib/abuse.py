"""Nobody gets locked out (issue 17), measured: a legitimate window's round trip (a demo book_table
call that elicits, answered at once) while one peer floods main with heartbeats and a crowd of 500
peers attaches and stays; main's memory for it. Targets: the round trip under attack under 1 s
(p50 and max); main's peak RSS at most +150 MB over its RSS before the attack. Then the same
against main's listeners (issue 24): benchlib/abuse_listeners.py, with a main of its own; relayed sessions
flooding both ways (issue 33): benchlib/abuse_relay.py, with another.
"""

import subprocess
from pathlib import Path
from typing import Any

from kit.env import child_env
from kit.main import RunningMain
from kit.paths import PYTHON, ROOT

from benchlib import abuse_listeners, abuse_relay  # each a main of its own: VmHWM is per process
from benchlib.common import (
    Figure,
    fmt_us,
    running_demo_main,
    summarize_ns,
    window_round_trips,
)

ATTACKERS = Path(__file__).with_name("abuse_peers.py")
CROWD = 500
ROUND_TRIP_TARGET_US = 1_000_000
RSS_TARGET_MB = 150.0


def _memory_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} for pid {pid}")


def _attacker(main: RunningMain, *args: str) -> subprocess.Popen[bytes]:
    info = main.info
    proc = subprocess.Popen([PYTHON, str(ATTACKERS), args[0], info["endpoint"], info["token"], *args[1:]],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=child_env(main.runtime), cwd=ROOT)
    assert proc.stdout is not None
    if not proc.stdout.readline().startswith(b"ready"):
        raise RuntimeError(f"the {args[0]} attacker did not start (exit {proc.poll()})")
    return proc


def run(quick: bool) -> list[Figure]:
    count = 10 if quick else 50
    with running_demo_main() as main:
        window = main.peer(name="legit-window")
        window_round_trips(window, 3, "abuse")  # warm up
        quiet = window_round_trips(window, count, "abuse")
        rss_before = _memory_mb(main.pid, "VmRSS")
        attackers = [_attacker(main, "crowd", str(CROWD)), _attacker(main, "flood")]
        try:
            attacked = window_round_trips(window, count, "abuse")
            attached = len(main.status(60)["peers"])
        finally:
            for proc in attackers:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=30)
        peak = _memory_mb(main.pid, "VmHWM")
        window.close()
    calm, loud = summarize_ns(quiet), summarize_ns(attacked)
    grown = peak - rss_before
    data: dict[str, Any] = {"quiet": calm, "attacked": loud, "rss_before_mb": rss_before, "peak_mb": peak,
                            "peers_attached_under_attack": attached}
    return [
        Figure(name="abuse", title="abuse: round trip under attack", value=f"max {fmt_us(loud['max_us'])}",
               target="< 1 s", passed=loud["max_us"] < ROUND_TRIP_TARGET_US,
               absolute=f"p50 {fmt_us(loud['p50_us'])} under attack vs {fmt_us(calm['p50_us'])} quiet; "
                        f"{attached} peers attached; n={loud['n']}",
               how=f"demo book_table answered by a contract-only window, while one peer floods heartbeats and "
                   f"{CROWD} peers (another process) attach and stay", data=data),
        Figure(name="abuse", title=f"abuse: main's memory for {CROWD} peers + a flood",
               value=f"+{grown:.0f} MB", target=f"<= +{RSS_TARGET_MB:.0f} MB", passed=grown <= RSS_TARGET_MB,
               absolute=f"RSS {rss_before:.0f} MB before, peak {peak:.0f} MB (VmHWM)", how="/proc/PID/status",
               data=data),
        *abuse_listeners.run(quick),
        *abuse_relay.run(quick),
    ]
