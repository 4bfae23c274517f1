"""Ending child processes, and finding what a process started."""

import subprocess
from pathlib import Path


def end_process(proc: "subprocess.Popen[bytes]", timeout_s: float = 10.0) -> None:
    """Kill `proc` if it still runs and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=timeout_s)


def terminate(proc: "subprocess.Popen[bytes]", timeout_s: float = 20.0) -> int:
    """SIGTERM, then SIGKILL if it does not exit within `timeout_s`; its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(timeout=10)


def descendants(pid: int) -> dict[int, str]:
    """Every live process under `pid` with its command line (Linux /proc)."""
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    try:
                        found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    except OSError:
                        continue
                    frontier.append(child)
    return found
