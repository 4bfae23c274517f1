"""The link a notice carries: the config's `link`, else the URL the running web window announces.

The web window writes `web.json` ({url, pid}, 0600) in its directory once it listens and removes it
when it stops (web_process/devices.py); main only reads that file, as `elicitron pair --web` does,
and never imports web_process. The directory is the web window's default: `$ELICITRON_WEB_DIR`,
else `<user state dir>/elicitron/web` (a web window started with another `--web-dir` is named by
the config's `link`). A file whose pid is gone, or that cannot be read, means no web window: no link.
"""

from pathlib import Path

from shared.connection_file import pid_alive
from shared.web_devices import read_announcement


def running_web_url(web_dir: Path | None = None) -> str | None:
    """The running web window's URL, or None. Reads a file: call it off the event loop."""
    announced = read_announcement(web_dir)
    if announced is None or not announced[0].startswith(("http://", "https://")):
        return None
    url, pid = announced
    return url.rstrip("/") + "/" if pid_alive(pid) else None  # the page itself
