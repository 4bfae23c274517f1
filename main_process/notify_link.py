"""The link a notice carries: the config's `link`, else the URL the running web window announces.

The web window writes `web.json` ({url, pid}, 0600) in its directory once it listens and removes it
when it stops (web_process/devices.py); main only reads that file, as `elicitron pair --web` does,
and never imports web_process. The directory is the web window's default: `$ELICITRON_WEB_DIR`,
else `<user state dir>/elicitron/web` (a web window started with another `--web-dir` is named by
the config's `link`). A file whose pid is gone, or that cannot be read, means no web window: no link.
"""

import json
import os
from pathlib import Path

import platformdirs

from shared.connection_file import pid_alive


def default_web_dir() -> Path:
    chosen = os.environ.get("ELICITRON_WEB_DIR")
    return Path(chosen) if chosen else platformdirs.user_state_path("elicitron") / "web"


def running_web_url(web_dir: Path | None = None) -> str | None:
    """The running web window's URL, or None. Reads a file: call it off the event loop."""
    path = (web_dir or default_web_dir()) / "web.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        url, pid = info["url"], info["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or not isinstance(pid, int):
        return None
    return url.rstrip("/") + "/" if pid_alive(pid) else None  # the page itself
