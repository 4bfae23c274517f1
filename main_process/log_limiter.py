"""Log a repeated complaint once per interval, so a misbehaving peer or server cannot flood the log.

Values that come from outside (window ids, topics, server text) go through `cut` and are logged
with %r: a newline in them cannot forge a log line, and a megabyte of them costs 80 characters.
"""

import logging
import time
from typing import Final

LOG_VALUE_CHARS: Final = 80
_MAX_KEYS: Final = 10_000


def cut(value: object, limit: int = LOG_VALUE_CHARS) -> object:
    """`value` as-is if short, else its first `limit` characters and how long it was."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} long)"
    return value


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval_s: float = 10.0) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def warning(self, key: tuple[str, str], message: str, *args: object) -> None:
        self._log(logging.WARNING, key, message, args, with_traceback=False)

    def log(self, level: int, key: tuple[str, str], message: str, *args: object) -> None:
        self._log(level, key, message, args, with_traceback=False)

    def exception(self, key: tuple[str, str], message: str, *args: object) -> None:
        """An unexpected exception being handled: its traceback, at most once per interval per key."""
        self._log(logging.ERROR, key, message, args, with_traceback=True)

    def _log(self, level: int, key: tuple[str, str], message: str, args: tuple[object, ...],
             *, with_traceback: bool) -> None:
        now = time.monotonic()
        last, suppressed = self._last.get(key, (float("-inf"), 0))
        if now - last < self._interval_s:
            self._last[key] = (last, suppressed + 1)
            return
        if suppressed:
            message += " (%d similar suppressed)"
            args = (*args, suppressed)
        self._logger.log(level, message, *args, exc_info=with_traceback)
        self._last[key] = (now, 0)
        if len(self._last) > _MAX_KEYS:
            self._last.clear()
