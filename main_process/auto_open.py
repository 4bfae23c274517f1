"""Auto-open: an elicitation is waiting and no window is attached, so main opens one (the config's
`autoOpenWindow`, or `--auto-open`). The renderer is a separate program; main only starts it and
never imports Qt.

After opening one, main gives it AUTO_OPEN_QUIET_S to attach before it opens another. A main just
started (e.g. by `ask --start` for its question) gives the windows that were waiting for it
AUTO_OPEN_GRACE_S (ELICITRON_AUTO_OPEN_GRACE_S) to attach (they retry every second) first.
"""

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from main_process.consent.pending import PendingRequests

logger = logging.getLogger(__name__)

AUTO_OPEN_QUIET_S = 15.0  # after opening a window, give it this long to attach before opening another
AUTO_OPEN_GRACE_S = 3.0
AUTO_OPEN_GRACE_ENV = "ELICITRON_AUTO_OPEN_GRACE_S"


class AutoOpen:
    def __init__(self, connection_path: Path, *, enabled: bool, renderers: Callable[[], list[bytes]]) -> None:
        """`renderers`: the attached windows (none: one may be opened)."""
        self._connection_path = connection_path
        self._enabled = enabled
        self._renderers = renderers
        self.grace_s = auto_open_grace()
        self._last = float("-inf")
        self._started_at = time.monotonic()  # again once the connection file is written
        self._timer: asyncio.TimerHandle | None = None

    def listening(self) -> None:
        """The connection file is written: windows waiting for a main can attach from now on."""
        self._started_at = time.monotonic()

    def no_window_attached(self, requests: PendingRequests) -> None:
        """PendingRequests' `unseen`: a request reached no window."""
        if not self._enabled or self._timer is not None:
            return
        if time.monotonic() - self._last < AUTO_OPEN_QUIET_S:
            return
        wait = self._started_at + self.grace_s - time.monotonic()
        if wait > 0:  # windows that were waiting for this main may be attaching right now
            logger.info("an elicitation is waiting and no window is attached: opening one unless a window "
                        "attaches within %.1f s", wait)
            self._timer = asyncio.get_running_loop().call_later(wait, self._after_grace, requests)
            return
        self._open_window()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _after_grace(self, requests: PendingRequests) -> None:
        self._timer = None
        if self._renderers():
            logger.info("auto-open: a window attached within the grace; opening none")
            return
        if not requests.all():
            logger.info("auto-open: nothing waits any more; opening no window")
            return
        self._open_window()

    def _open_window(self) -> None:
        self._last = time.monotonic()
        logger.info("an elicitation is waiting and no window is attached: opening one")
        subprocess.Popen([sys.executable, "-m", "renderer_process", "--connection", str(self._connection_path),
                          "--name", "auto-opened"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)


def auto_open_grace() -> float:
    """AUTO_OPEN_GRACE_S, or the seconds ELICITRON_AUTO_OPEN_GRACE_S names (0: open at once)."""
    raw = os.environ.get(AUTO_OPEN_GRACE_ENV, "").strip()
    if not raw:
        return AUTO_OPEN_GRACE_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        logger.warning("%s=%r is not a number of seconds (0-3600); using %.0f s", AUTO_OPEN_GRACE_ENV, raw,
                       AUTO_OPEN_GRACE_S)
        return AUTO_OPEN_GRACE_S
    return seconds
