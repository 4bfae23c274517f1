"""`elicitron stop` and the web window: the one main started (`main --web`) stops with main, and one
main did not start (`elicitron web`, a process of its own) is named with how to stop it, instead of
being left running unmentioned (issue 37).

Which is which: a web window announces its URL and pid in the web dir (web.json); it is main's when
its parent is main (Linux /proc), or, elsewhere, when main reports a web window of its own.
"""

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from shared.connection_file import pid_alive
from shared.web_devices import read_announcement

GONE_TIMEOUT_S = 10.0
POLL_S = 0.05


@dataclass(frozen=True)
class RunningWebWindow:
    url: str
    pid: int
    mains: bool  # started by main (`main --web`): it stops with main


def running_web_window(main_pid: int | None, main_has_one: bool) -> RunningWebWindow | None:
    """The web window running on this machine's default web dir, if any (read before main stops)."""
    announced = read_announcement()
    if announced is None or not pid_alive(announced[1]):
        return None
    url, pid = announced
    parent = _parent_pid(pid)
    mains = parent == main_pid if parent is not None else main_has_one
    return RunningWebWindow(url, pid, mains)


def after_stop(web: RunningWebWindow, command: str) -> str:
    """Once main has exited: main's web window is made sure gone (ended if it lingers); one it did
    not start is named. The sentence to print."""
    if not web.mains:
        return (f"the web window at {web.url} (pid {web.pid}) keeps running: it was started with `{command} web`, "
                f"not by main; stop it with Ctrl-C where it runs, or: kill {web.pid}")
    if not _gone_within(web.pid, GONE_TIMEOUT_S):
        os.kill(web.pid, signal.SIGTERM)  # main's child outlived it (main was killed mid-stop)
        _gone_within(web.pid, GONE_TIMEOUT_S)
    return f"stopped main's web window ({web.url}, pid {web.pid})"


def _gone_within(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)  # not our child: no wait() for it
    return True


def _parent_pid(pid: int) -> int | None:
    try:  # "pid (comm) state ppid ...": comm may hold spaces, so split after its ')'
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
