"""Accept errors, logged once per interval: when every descriptor is taken, asyncio logs each failed
`accept()` with its traceback and tries again a moment later, so a flood of idle connections
wrote 270,038 lines in ~25 s into the web window's log (issue 33). `quiet_accept_errors()` lets
one through per interval, saying how many like it were left out; every other record passes."""

import logging
import time
from collections.abc import Callable
from typing import Final

INTERVAL_S: Final = 10.0
# asyncio's message, then uvloop's (uvloop logs through asyncio's logger too)
ACCEPT_ERRORS: Final = ("socket.accept() out of system resource", "error status in uv_stream_t.listen callback")


class AcceptErrorFilter(logging.Filter):
    def __init__(self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._interval_s = interval_s
        self._clock = clock
        self._said_at = float("-inf")
        self.left_out = 0  # since the last one let through

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(ACCEPT_ERRORS):
            return True
        now = self._clock()
        if now - self._said_at < self._interval_s:
            self.left_out += 1
            return False
        if self.left_out:
            record.msg = f"{record.msg}\n({self.left_out} like it in the last {now - self._said_at:.0f} s left out)"
        self._said_at, self.left_out = now, 0
        return True


def quiet_accept_errors(interval_s: float = INTERVAL_S) -> AcceptErrorFilter:
    """Bound the accept errors asyncio's logger writes, whatever handler prints them."""
    accept_filter = AcceptErrorFilter(interval_s)
    logging.getLogger("asyncio").addFilter(accept_filter)
    return accept_filter
