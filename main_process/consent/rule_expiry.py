"""Rules whose time has passed ("until a date", an hour's grant): dropped from the book, the store
and the windows' Remembered panel, on a timer set to the book's next expiry, and at once when a
lookup meets one first (the timer may run late; an expired rule never decides)."""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from main_process.consent.rules import RuleBook
from main_process.store.interface import RuleTable

logger = logging.getLogger(__name__)

MAX_TIMER_S: Final = 24 * 3600.0  # expiry timers further out are re-armed; loop timers dislike huge delays


class RuleExpiry:
    """One rule book's expiry: its timer and what dropping a rule takes."""

    def __init__(self, book: RuleBook, loop: asyncio.AbstractEventLoop, now: Callable[[], int],
                 store: RuleTable | None, write: Callable[[Awaitable[bool]], None],
                 publish: Callable[[], None]) -> None:
        """`now`: the time in epoch ms; `write`: starts a change to `store` (the consent layer's,
        which main waits for when it stops); `publish`: the rules to the windows."""
        self._book = book
        self._loop = loop
        self._now = now
        self._store = store
        self._write = write
        self._publish = publish
        self._timer: asyncio.TimerHandle | None = None

    def drop(self) -> None:
        """Drop every rule expired by now."""
        expired = self._book.expired(self._now())
        if not expired:
            return
        for rule in expired:
            self._book.remove(rule.id)
        if self._store is not None:
            self._write(self._store.remove([rule.id for rule in expired]))
        logger.info("rules expired: %s", ", ".join(rule.id for rule in expired))
        self._publish()

    def schedule(self) -> None:
        """The book changed: the timer is set to its next expiry (none: no timer)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        next_at = self._book.next_expiry()
        if next_at is not None:
            delay = min(max((next_at - self._now()) / 1000, 0.0), MAX_TIMER_S)
            self._timer = self._loop.call_later(delay, self._on_timer)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _on_timer(self) -> None:
        self._timer = None
        self.drop()
        self.schedule()
