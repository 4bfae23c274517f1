"""`elicitron ask` start -> its card painted in a window that is already open (Qt offscreen).

A real main (no servers: a question needs none) and one real window, `ask_window.py` (the
renderer's own entry point stamping each card it paints, then declining it). Each sample starts
`python -m cli_process ask` (what the `elicitron` console script runs) with the clock read just
before Popen in this process (same CLOCK_MONOTONIC as the window's stamps), and ends at the card's
first paint. A contract-only peer attached beside the window timestamps the invoke's arrival, so
the table shows where the time goes: the asking process until main sends the invoke (interpreter,
imports, attach), and the window from invoke to paint. The floors, timed in the same run: `python
-c pass` (an interpreter that imports nothing) and `elicitron ask --help` (the CLI's imports, no
socket). One unmeasured sample first warms the page cache.
"""

import json
import os
import select
import subprocess
from pathlib import Path
from typing import Any

from kit.contract import INVOKE
from kit.env import child_env
from kit.main import RunningMain, running_main
from kit.paths import PYTHON, ROOT

from benchlib.common import Figure, fmt_us, now_ns, summarize_ns

WINDOW = Path(__file__).with_name("ask_window.py")
TARGET_US = 400_000


class _Window:
    """The stamping window process; reads its JSON lines."""

    def __init__(self, main: RunningMain) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, str(WINDOW), "--connection", str(main.connection), "--name", "bench-window",
             "--log-level", "warning"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=child_env(main.runtime, QT_QPA_PLATFORM="offscreen"), cwd=ROOT)
        self._buffer = b""
        self.line(lambda stamps: "ready" in stamps)

    def line(self, wanted: Any, timeout_s: float = 60.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = now_ns() + int(timeout_s * 1e9)
        while True:
            while b"\n" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\n", 1)
                stamps = json.loads(raw)
                if wanted(stamps):
                    return stamps
            ready, _, _ = select.select([fd], [], [], max(0.0, (deadline - now_ns()) / 1e9))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                raise TimeoutError(f"the window printed nothing wanted (exit {self.proc.poll()})")
            self._buffer += chunk

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _one_question(main: RunningMain, window: _Window, peer: Any, i: int) -> dict[str, int]:
    message = f"Deploy build {i}?"
    argv = [PYTHON, "-m", "cli_process", "ask", message, "--yes-no", "--name", "bench.sh",
            "--connection", str(main.connection)]
    t0 = now_ns()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=child_env(main.runtime), cwd=ROOT)
    try:
        peer.expect(lambda t, b: t == INVOKE and b["request"]["params"]["message"] == message, 60)
        at_peer = now_ns()
        stamps = window.line(lambda s: s.get("message") == message)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    if proc.returncode != 1:  # the window declines every card
        raise RuntimeError(f"elicitron ask exited {proc.returncode}: {err.decode(errors='replace')}")
    return {"painted": stamps["painted"] - t0, "card": stamps["card"] - t0, "invoke_at_peer": at_peer - t0,
            "invoke_at_window": stamps["invoke"] - t0 if stamps["invoke"] else 0}


def _wall_ns(argv: list[str], main: RunningMain) -> int:
    t0 = now_ns()
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=child_env(main.runtime), cwd=ROOT, check=True, timeout=60)
    return now_ns() - t0


def run(quick: bool) -> list[Figure]:
    runs = 3 if quick else 20
    with running_main({}) as main:
        window = _Window(main)
        peer = main.peer(name="bench-stamp-peer")
        try:
            _one_question(main, window, peer, -1)  # warm the page cache, not counted
            results = []
            for i in range(runs):
                results.append(_one_question(main, window, peer, i))
                peer.heartbeat_if_due()
            bare = [_wall_ns([PYTHON, "-c", "pass"], main) for _ in range(runs)]
            help_ = [_wall_ns([PYTHON, "-m", "cli_process", "ask", "--help"], main) for _ in range(runs)]
        finally:
            peer.close()
            window.close()
    painted = summarize_ns([r["painted"] for r in results])
    phase = {key: summarize_ns([r[key] for r in results])["p50_us"] for key in results[0]}
    floors = {"python -c pass": summarize_ns(bare)["p50_us"], "ask --help": summarize_ns(help_)["p50_us"]}
    return [
        Figure(
            name="ask",
            title="elicitron ask -> card",
            value=f"p50 {fmt_us(painted['p50_us'])}",
            target="< 400 ms",
            passed=painted["p50_us"] < TARGET_US,
            absolute=f"max {fmt_us(painted['max_us'])}, n={painted['n']}; p50 phases: invoke at a peer "
            f"{fmt_us(phase['invoke_at_peer'])}, at the window {fmt_us(phase['invoke_at_window'])}, card shown "
            f"{fmt_us(phase['card'])}, painted {fmt_us(phase['painted'])}; floors: python -c pass "
            f"{fmt_us(floors['python -c pass'])}, ask --help {fmt_us(floors['ask --help'])}",
            how="real main (no servers) + an open window (renderer_process.app.run stamping each card's first "
            "paint, offscreen); clock from just before Popen of `python -m cli_process ask --yes-no`",
            data={**painted, "phases_p50_us": phase, "floors_p50_us": floors, "runs": results},
        )
    ]
