"""A child's output stream (stderr, or stdout), read as it comes and kept whole.

A thread drains the pipe so the child never blocks on it; everything is kept for failure messages
and for the tests whose subject is the log itself. Reads happen under one lock, and `text()` first
takes whatever is already in the pipe, so once the child has answered something, `text()` holds
every line it wrote before that answer.
"""

import os
import select
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO


class ChildOutput:
    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._fd = stream.fileno()
        os.set_blocking(self._fd, False)
        self._data = bytearray()
        self._eof = False
        self._changed = threading.Condition()
        self._wake_r, self._wake_w = os.pipe()  # close() wakes the thread out of select()
        self._thread = threading.Thread(target=self._pump, name="child-output", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while True:
            readable, _, _ = select.select([self._fd, self._wake_r], [], [])
            if self._wake_r in readable:
                return
            with self._changed:
                self._take_available()
                if self._eof:
                    return

    def _take_available(self) -> None:
        """Everything the pipe holds now; the caller holds the lock."""
        while not self._eof:
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._data += chunk
        self._changed.notify_all()

    def text(self) -> str:
        """All the child wrote so far, including what is still in the pipe."""
        with self._changed:
            self._take_available()
            return self._data.decode(errors="replace")

    def lines(self) -> list[str]:
        return self.text().splitlines()

    def tail(self, chars: int = 4000) -> str:
        return self.text()[-chars:]

    def wait_change(self, seen_bytes: int, timeout_s: float) -> bool:
        """Block until the child wrote past `seen_bytes` or closed the stream; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._data) > seen_bytes or self._eof, timeout_s)

    @property
    def size(self) -> int:
        with self._changed:
            return len(self._data)

    def close(self) -> None:
        """Stop reading (what was read is kept) and close the pipe."""
        if self._wake_w < 0:
            return
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        with self._changed:
            self._take_available()
            self._eof = True  # never read the descriptor again: its number may be reused
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._wake_w = -1
        self._stream.close()


def follow(path: Path) -> tuple["subprocess.Popen[bytes]", ChildOutput]:
    """`tail -F` of a file another process writes (it may not exist yet), read as it grows: a test
    waits on what is written rather than reading the file again and again."""
    proc = subprocess.Popen(["tail", "-F", "-n", "+1", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    return proc, ChildOutput(proc.stdout)


def wait_line(output: ChildOutput, holds: Callable[[str], bool], what: str, timeout_s: float = 30.0) -> str:
    """The first line of `output` for which `holds`, once there is one; AssertionError naming `what`
    (with what was read) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = output.size
        found = [line for line in output.lines() if holds(line)]
        if found:
            return found[0]
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{what}: not within {timeout_s} s; what was read:\n{output.tail()}")
        output.wait_change(seen, left)
