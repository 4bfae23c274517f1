"""The HTTP child's log, bounded: a message repeated (an accept failing with EMFILE, a flood of bad
requests, a refused session) is written once per interval per kind, then with how many were left
out. Every line goes to stderr, which main caps in size (main_process/http_gateway.py)."""

import logging
import time

INTERVAL_S = 10.0
MAX_CHARS = 500  # a line quoting a peer's header is cut (h11 lets a header be 16 KB)
_KIND_PREFIX = 32  # a message formatted before logging (the SDK's f-strings): its kind is what precedes a colon
_MAX_KINDS = 1000


class RepeatFilter(logging.Filter):
    """Passes a record of a kind (logger, message template) once per `interval_s`, cut to MAX_CHARS."""

    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        super().__init__()
        self._interval_s = interval_s
        self._last: dict[tuple[str, object], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        key = (record.name, record.msg if record.args else text.partition(":")[0][:_KIND_PREFIX])
        now = time.monotonic()
        last, left_out = self._last.get(key, (float("-inf"), 0))
        if now - last < self._interval_s:
            self._last[key] = (last, left_out + 1)
            return False
        if len(self._last) >= _MAX_KINDS:
            self._last.clear()
        self._last[key] = (now, 0)
        message = record.getMessage()
        if len(message) > MAX_CHARS:
            record.msg, record.args = f"{message[:MAX_CHARS]!r}… ({len(message):,} characters)", None
        if left_out:
            record.msg = f"{record.msg} ({left_out} like it in the last {now - last:.0f} s left out)"
        return True


def bound_repeats(interval_s: float = INTERVAL_S) -> None:
    """Every handler of the root logger (stderr, from `logging.basicConfig`) drops repeats."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(RepeatFilter(interval_s))
