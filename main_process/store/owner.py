"""The SQLite backend: which running main owns a rule store, an exclusive flock on
`rules.sqlite3.owner` held for main's whole life, with main's pid and connection file in it.

main keeps its rules in memory and applies them from there, so a change made to the store behind
its back (by `elicitron rules revoke` from a shell whose connection file names no running main)
would say "revoked" while main goes on applying the rule. The CLI therefore takes this lock for a
change it makes to the store itself, and when a main holds it, it goes through that main instead.

The lock file is opened without following symlinks (as main's instance lock is), 0600. What it
says is read only while someone holds the lock; a stale text of a main that is gone means nothing.
A second main on the same store (two connection files, one data dir) does not own it: it logs so.
"""

import asyncio
import errno
import fcntl
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from shared.connection_file import pid_alive
from shared.errors import RuleStoreError

logger = logging.getLogger(__name__)

_WAIT_FOR_CLI_S: Final = 2.0  # a CLI holds the lock for one SQLite transaction: milliseconds
_RETRY_S: Final = 0.02


@dataclass(frozen=True)
class Owner:
    """The main that owns a store: its pid and its connection file."""

    pid: int
    connection: Path


def owner_path(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".owner")


class StoreLock:
    """The lock on one store, for main (`claim`, held until `release`) and for the CLI (`try_hold`)."""

    def __init__(self, store_path: Path) -> None:
        self.path = owner_path(store_path)
        self._fd: int | None = None

    async def claim(self, connection: Path) -> bool:
        """main: own the store, with `connection` as the way to reach it. Waits out a CLI's change
        in progress; False (logged) when another main owns it."""
        deadline = time.monotonic() + _WAIT_FOR_CLI_S
        while True:
            owner = self.try_hold(connection)
            if owner is None:
                return True
            if owner.pid != 0 or time.monotonic() > deadline:
                holder = f"another main (pid {owner.pid}, {owner.connection})" if owner.pid else "something else"
                logger.warning("the rule store's lock %s is held by %s: `elicitron rules revoke` with no main of "
                               "its own changes the store behind this main's back", self.path, holder)
                return False
            await asyncio.sleep(_RETRY_S)

    def try_hold(self, connection: Path | None = None) -> Owner | None:
        """Take the lock if nobody holds it (None), saying who holds it now (a main: its `connection`;
        a CLI: none); else who does: the owning main, or `Owner(0, …)` when it is not a live main (a
        CLI's change in progress)."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(os.pread(fd, 4096, 0))
            os.close(fd)
            return holder if holder is not None else Owner(0, Path("?"))
        self._fd = fd
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "connection": str(connection) if connection else None}).encode(),
                  0)
        return None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise RuleStoreError(f"{self.path} is a symlink; refusing to use it (remove it if you did not "
                                     "make it)") from None
            raise RuleStoreError(f"cannot open {self.path}: {exc.strerror or exc}") from None


def _holder(text: bytes) -> Owner | None:
    """The live main a lock file's text names; None for anything else (a CLI, a main gone, junk)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    pid, connection = data.get("pid"), data.get("connection")
    if not isinstance(pid, int) or pid <= 0 or not isinstance(connection, str) or not pid_alive(pid):
        return None
    return Owner(pid, Path(connection))


def hold_or_owner(lock: StoreLock) -> Owner | None:
    """The CLI: take the lock for a change of its own (None: taken; `release` when done), waiting
    out another CLI's change; or the main that owns the store. Raises RuleStoreError when the lock
    stays taken by something that is not a main."""
    deadline = time.monotonic() + _WAIT_FOR_CLI_S
    while (owner := lock.try_hold()) is not None and owner.pid == 0:
        if time.monotonic() > deadline:
            raise RuleStoreError(f"the rule store is busy ({lock.path} stays locked); try again")
        time.sleep(_RETRY_S)
    return owner
