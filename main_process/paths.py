"""Where main keeps its files by default (platformdirs), importable without the rest of main."""

from pathlib import Path

import platformdirs


def default_log_dir() -> Path:
    """main.log and one stderr log per stdio server (0700 directory, 0600 files)."""
    return Path(platformdirs.user_state_dir("elicitron")) / "log"
