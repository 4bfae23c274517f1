"""Private temp dirs and the environment every child process runs in."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from kit.paths import ROOT

_default_home: Path | None = None


def short_tmp_dir(prefix: str = "eli-") -> Path:
    """A new private dir directly under /tmp: ipc:// paths are limited to 107 characters. Removed
    when this process exits (if its user has not removed it): a main stopped after its test's own
    cleanup still leaves its lock file, and /tmp filled up with them run after run."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def default_home() -> Path:
    """One private home for every child of this process that is given none; removed at exit."""
    global _default_home
    if _default_home is None:
        _default_home = short_tmp_dir("eli-home-")
    return _default_home


def child_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of a child: the project importable, output unbuffered, and its HOME and its
    config, data (audit log), state (logs) and runtime dirs under `home` (default: `default_home()`),
    so nothing of the user's own is read or written: not even the locator in ~/.local/state, through
    which a command with no --connection would otherwise reach a main the user runs on this machine. `home` on the same filesystem as a user's data
    dir (both under /) keeps the audit log's fsyncs as costly as they are for a user."""
    home = home if home is not None else default_home()
    runtime = home / "run"
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)  # Qt warns about a missing runtime dir
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
           "XDG_STATE_HOME": str(home / "state"), "XDG_RUNTIME_DIR": str(runtime), **extra}
    env.pop("ELICITRON_CONNECTION", None)  # a child never finds the user's own main
    env.pop("ELICITRON_STORE", None)  # nor the user's own store (a test names its store itself)
    return env
