"""WindowProcess: a real window process (`kit.window_probe`: the renderer's own entry point) and
the events it reports on stdout: connection state, welcome, each card shown and painted."""

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.env import child_env
from kit.output import ChildOutput
from kit.paths import PYTHON, ROOT, TESTS
from kit.procs import end_process

Event = dict[str, Any]


class WindowProcess:
    def __init__(self, proc: "subprocess.Popen[bytes]", name: str) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.name = name
        self.stdout = ChildOutput(proc.stdout)  # the probe's events
        self.stderr = ChildOutput(proc.stderr)  # the window's log, for failure messages

    def events(self) -> list[Event]:
        return [json.loads(line) for line in self.stdout.lines() if line.startswith("{")]

    def wait_event(self, event: str, where: Callable[[Event], bool] | None = None, *, count: int = 1,
                   timeout_s: float = 15.0) -> Event:
        """The `count`-th `event` (counting from the window's start) that `where` accepts."""
        deadline = time.monotonic() + timeout_s
        while True:
            seen = self.stdout.size
            found = [e for e in self.events() if e["event"] == event and (where is None or where(e))]
            if len(found) >= count:
                return found[count - 1]
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                ended = "" if self.proc.poll() is None else f" (it exited with {self.proc.returncode})"
                raise AssertionError(f"window {self.name!r}: {event} #{count} not within {timeout_s} s{ended}; "
                                     f"events {self.events()}; its log:\n{self.stderr.tail()}")
            self.stdout.wait_change(seen, left)

    def wait_state(self, state: str, *, count: int = 1, timeout_s: float = 15.0) -> Event:
        """The window showed connection state `state` (e.g. "connected") for the `count`-th time."""
        return self.wait_event("state", lambda e: e["state"] == state, count=count, timeout_s=timeout_s)

    def wait_card(self, *, timeout_s: float = 15.0) -> Event:
        """A card is shown as the window's current card: {"channel", "server"}."""
        return self.wait_event("card", timeout_s=timeout_s)

    def end(self) -> None:
        """Kill it if it still runs; its output stays readable."""
        end_process(self.proc)
        self.stdout.close()
        self.stderr.close()


def probe_env(home: Path | None = None) -> dict[str, str]:
    """A window's environment: offscreen Qt, and the kit importable for the probe."""
    env = child_env(home, QT_QPA_PLATFORM="offscreen")
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{TESTS}"
    return env


def start_window(connection: Path, name: str, *, home: Path | None = None,
                 exit_after_card: bool = False) -> WindowProcess:
    """A real renderer process attaching to the main of `connection`, reporting its events."""
    argv = [PYTHON, "-m", "kit.window_probe", *(["--exit-after-card"] if exit_after_card else []),
            "--connection", str(connection), "--name", name]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=probe_env(home), cwd=ROOT)
    return WindowProcess(proc, name)
