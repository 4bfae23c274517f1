"""One main per connection file: an exclusive flock, held for main's whole life.

A second `bind` on the same ipc path would silently steal the socket from the first main, so
the lock is taken before binding and never released early.
"""

import fcntl
import os
from pathlib import Path

from shared.errors import AlreadyRunningError


class InstanceLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise AlreadyRunningError(f"another elicitron main (pid {holder}) is running; "
                                      f"lock held on {self.path}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
