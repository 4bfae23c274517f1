"""Log a repeated complaint once per interval, so a misbehaving peer cannot flood the log."""

import logging
import time


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval_s: float = 10.0) -> None:
        self._logger = logger
        self._interval_s = interval_s
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def warning(self, key: tuple[str, str], message: str, *args: object) -> None:
        now = time.monotonic()
        last, suppressed = self._last.get(key, (0.0, 0))
        if now - last < self._interval_s:
            self._last[key] = (last, suppressed + 1)
            return
        if suppressed:
            message += " (%d similar suppressed)"
            args = (*args, suppressed)
        self._logger.warning(message, *args)
        self._last[key] = (now, 0)
        if len(self._last) > 10_000:
            self._last.clear()
