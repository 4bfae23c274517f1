"""Where main keeps its files by default (platformdirs), importable without the rest of main."""

from pathlib import Path

import platformdirs


def default_state_dir() -> Path:
    """main's private state: its logs, and a PostgreSQL store's spool (store/spool.py)."""
    return Path(platformdirs.user_state_dir("elicitron"))


def default_log_dir() -> Path:
    """main.log and one stderr log per stdio server (0700 directory, 0600 files)."""
    return default_state_dir() / "log"
