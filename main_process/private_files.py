"""Files main writes that may hold secrets (logs with tool output, keys): 0600 in a 0700 directory,
never through a planted symlink, under a name derived safely from user-chosen text."""

import hashlib
import logging
import os
import sqlite3
import stat
from pathlib import Path
from typing import Literal, TextIO

from shared.connection_file import ensure_private_dir

logger = logging.getLogger(__name__)

_SAFE_CHARS = frozenset("-_.")


def safe_filename(name: str, limit: int = 64) -> str:
    """`name` as a file name: unsafe characters become `_`, and a changed or shortened name gets a
    digest of the original, so `a/b`, `a_b` and `a b` never share a file."""
    readable = "".join(c if c.isalnum() or c in _SAFE_CHARS else "_" for c in name)[:limit]
    if readable == name and name not in (".", ".."):
        return name
    return f"{readable or 'x'}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def open_private(path: Path, mode: Literal["w", "a"] = "w") -> TextIO:
    """Open `path` for writing ("w") or appending ("a"), creating it 0600 in a 0700 directory."""
    ensure_private_dir(path.parent)
    return open_private_file(path, mode)


def open_private_file(path: Path, mode: Literal["w", "a"] = "w") -> TextIO:
    """Open `path` like `open_private`, 0600, in a directory the user chose: one that is missing is
    made 0700, one that exists is left as it is (`--log-file main.log` must not tighten the cwd)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)  # an older file may have been made looser
    return os.fdopen(fd, mode, encoding="utf-8")


def write_private(path: Path, text: str) -> None:
    """Replace `path`'s content with `text`, 0600, in a 0700 directory."""
    with open_private(path) as file:
        file.write(text)


def open_private_sqlite(path: Path, what: str, timeout_s: float, *, page_size: int | None = None) -> sqlite3.Connection:
    """A SQLite database main keeps (the audit log, the rule store): the directory made 0700, the file
    0600 (SQLite gives its -wal and -shm files the same mode), WAL with synchronous=NORMAL, so a
    committed row survives SIGKILL and readers in other processes never block the writer. Raises
    sqlite3.Error or OSError; `what` names the file in the warnings."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o077:
            os.fchmod(fd, 0o600)
            logger.warning("tightened %s %s from mode %o to 0600", what, path, mode)
    finally:
        os.close(fd)
    conn = sqlite3.connect(path, timeout=timeout_s, autocommit=True, check_same_thread=False)
    try:
        if page_size is not None:
            conn.execute(f"PRAGMA page_size = {int(page_size)}")  # only a new file takes it
        journal = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(journal).lower() != "wal":
            logger.warning("%s %s: journal mode is %s, not wal", what, path, journal)
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn
