"""One main per connection file: an exclusive flock, held for main's whole life.

A second `bind` on the same ipc path would silently steal the socket from the first main, so
the lock is taken before binding and never released early. The lock file is opened without
following symlinks: a link planted in the directory must not make main write into its target.
"""

import errno
import fcntl
import os
from pathlib import Path

from shared.errors import AlreadyRunningError, ConnectionFileError


class InstanceLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ConnectionFileError(f"{self.path} is a symlink; refusing to use it as main's lock "
                                          "(remove it if you did not make it)") from None
            raise ConnectionFileError(f"cannot open main's lock file {self.path}: {exc.strerror or exc}") from None
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
