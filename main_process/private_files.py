"""Files main writes that may hold secrets (logs with tool output, keys): 0600 in a 0700 directory,
never through a planted symlink, under a name derived safely from user-chosen text."""

import hashlib
import os
from pathlib import Path
from typing import TextIO

from shared.connection_file import ensure_private_dir

_SAFE_CHARS = frozenset("-_.")


def safe_filename(name: str, limit: int = 64) -> str:
    """`name` as a file name: unsafe characters become `_`, and a changed or shortened name gets a
    digest of the original, so `a/b`, `a_b` and `a b` never share a file."""
    readable = "".join(c if c.isalnum() or c in _SAFE_CHARS else "_" for c in name)[:limit]
    if readable == name and name not in (".", ".."):
        return name
    return f"{readable or 'x'}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def open_private(path: Path, mode: str = "w") -> TextIO:
    """Open `path` for writing ("w") or appending ("a"), creating it 0600 in a 0700 directory."""
    ensure_private_dir(path.parent)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)  # an older file may have been made looser
    return os.fdopen(fd, mode, encoding="utf-8")


def write_private(path: Path, text: str) -> None:
    """Replace `path`'s content with `text`, 0600, in a 0700 directory."""
    with open_private(path) as file:
        file.write(text)
