"""Time as main's timers read it: what time it is, and a callback later. No sockets, no loop of its own.

A request's expiry (`pending`), peer liveness (`broker`: the 1 s heartbeat tick and the 5 s silence
limit) and a server's restart backoff (`servers`) take a `Clock` instead of reading
`time.monotonic` and the event loop themselves. Main runs on `MONOTONIC`; a test hands them a
`SettableClock` and moves time itself (trio's MockClock is the model), so a ten-minute expiry takes
microseconds and a busy machine cannot trip a silence limit.
"""

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any, Final, Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a clock that never goes back (only differences mean anything)."""

    def call_later(self, delay_s: float, callback: Callable[..., None], *args: Any) -> Timer:
        """Run `callback(*args)` on the running loop once `delay_s` seconds have passed."""


class MonotonicClock:
    """The real one: time.monotonic, and the running loop's own timers."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, delay_s: float, callback: Callable[..., None], *args: Any) -> Timer:
        return asyncio.get_running_loop().call_later(delay_s, callback, *args)


MONOTONIC: Final = MonotonicClock()


class _SettableTimer:
    __slots__ = ("args", "callback", "cancelled")

    def __init__(self, callback: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class SettableClock:
    """Time that moves only when told to (`advance`); timers due meanwhile run inside `advance`, in
    the order they fall due, each seeing `now()` at its own deadline."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._due: list[tuple[float, int, _SettableTimer]] = []
        self._order = itertools.count()  # equal deadlines run in the order they were set

    def now(self) -> float:
        return self._now

    def call_later(self, delay_s: float, callback: Callable[..., None], *args: Any) -> Timer:
        timer = _SettableTimer(callback, args)
        heapq.heappush(self._due, (self._now + max(delay_s, 0.0), next(self._order), timer))
        return timer

    def advance(self, seconds: float) -> None:
        """Move time `seconds` forward, running every timer that falls due on the way (also those
        the callbacks set, if they fall due before the end)."""
        if seconds < 0:
            raise ValueError("time does not go back")
        end = self._now + seconds
        while self._due and self._due[0][0] <= end:
            deadline, _, timer = heapq.heappop(self._due)
            if not timer.cancelled:
                self._now = deadline
                timer.callback(*timer.args)
        self._now = end

    def waiting(self) -> int:
        """Timers set and not yet run or cancelled."""
        return sum(1 for _, _, timer in self._due if not timer.cancelled)


async def wait_event(clock: Clock, event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until `event` is set or `timeout_s` passed on `clock`; whether it was set."""
    if event.is_set():
        return True
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(*_: Any) -> None:
        if not woken.done():
            woken.set_result(None)

    timer = clock.call_later(timeout_s, wake)
    waiter = asyncio.ensure_future(event.wait())
    waiter.add_done_callback(wake)
    try:
        await woken
    finally:
        timer.cancel()
        waiter.cancel()
    return event.is_set()
