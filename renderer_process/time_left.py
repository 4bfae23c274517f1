"""How long until a request expires, as a card says it. Pure, no Qt.

`expiresAt` comes from main (epoch ms, or null) and may be any integer a third-party main sends,
so everything here is plain Python integer arithmetic: nothing can overflow.
"""

import time

SOON_S = 60  # under a minute left: the card shows it as a warning
_MINUTE = 60
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_YEAR = 365 * _DAY


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def seconds_left(expires_at_ms: int | None, now: int) -> int | None:
    """Whole seconds until `expires_at_ms` (never negative); None when the request never expires."""
    if expires_at_ms is None:
        return None
    return max(0, -(-(expires_at_ms - now) // 1000))  # rounded up: "0:01" until it is really over


def time_left_text(expires_at_ms: int | None, now: int) -> str:
    """ "Expires in 4:05", "Expires in 2 h 05 min", "Expires in 3 days", ... or "" if it never does."""
    left = seconds_left(expires_at_ms, now)
    if left is None:
        return ""
    if left == 0:
        return "Expiring now"
    if left >= _YEAR:
        return "Expires in more than a year"
    if left >= 2 * _DAY:
        return f"Expires in {left // _DAY} days"
    if left >= _HOUR:
        return f"Expires in {left // _HOUR} h {left % _HOUR // _MINUTE:02d} min"
    return f"Expires in {left // _MINUTE}:{left % _MINUTE:02d}"
