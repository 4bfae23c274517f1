"""`elicitron launch --detach` (what `scripts/launch` runs): the window as a process of its own, so
the terminal comes back at once.

The window gets a session of its own (closing the terminal or Ctrl-C there leaves it open), no
terminal input, and its log lines go to `<log dir>/window.log` (0600, appended), not to the
terminal. Before returning, launch waits until main lists one more window or the window has exited
(then it says so with the log's last lines, exit 1), so a window that cannot start is not silent.
"""

import subprocess
import sys
import time
from pathlib import Path

from cli_process.command import EXIT_FAILED
from cli_process.controller import Controller
from main_process.paths import default_log_dir
from main_process.private_files import open_private_file
from shared.errors import MainUnreachableError
from shared.terminal_text import for_terminal

ATTACH_TIMEOUT_S = 30.0  # the first Qt start on a cold disk takes seconds
POLL_S = 0.2
TAIL_LINES = 5


def open_detached_window(connection: Path, name: str | None) -> int:
    """Start the window, wait for it to attach (or fail); 0 once it did, EXIT_FAILED if it exited."""
    log_path = default_log_dir() / "window.log"
    argv = [sys.executable, "-m", "renderer_process", "--connection", str(connection)]
    if name:
        argv += ["--name", name]
    with Controller(connection, name="elicitron-launch") as controller:
        before = _windows(controller)
        with open_private_file(log_path, "a") as log:
            window = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline:
            if window.poll() is not None:
                print(f"elicitron: the window exited with code {window.returncode} at start; see {log_path}:",
                      file=sys.stderr)
                print(_tail(log_path), file=sys.stderr)
                return EXIT_FAILED
            try:
                if _windows(controller) - before:
                    print(f"elicitron: window opened (pid {window.pid}; its log: {log_path})", file=sys.stderr)
                    return 0
            except MainUnreachableError:
                break  # main went away: the window waits for it and says so itself
            time.sleep(POLL_S)  # main pushes no event when a window attaches to a controller
    print(f"elicitron: the window (pid {window.pid}) is still starting; its log: {log_path}", file=sys.stderr)
    return 0


def _windows(controller: Controller) -> set[str]:
    return {peer.window for peer in controller.status().peers if peer.role == "renderer"}


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "  (the log cannot be read)"
    return "\n".join("  " + for_terminal(line) for line in lines[-TAIL_LINES:])
