"""This main's lease on a store many mains share (consent/shared_requests.py's liveness): every
HEARTBEAT_S it clears the values of the answers handed on since the last beat (one statement for
all), renews its lease, and every TIDY_EVERY beats lets the store end the rows of mains that are gone.
The store's answer to a renewal goes to `renewed` (False: the store had taken this main for gone)."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from main_process.store.interface import SharedInbox
from main_process.tasks import Tasks

HEARTBEAT_S: Final = 1.0  # the lease's renewal (postgres_inbox.LEASE_S), and how soon a killed main is noticed
TIDY_EVERY: Final = 60  # heartbeats


class Lease:
    def __init__(self, inbox: SharedInbox, tasks: Tasks, renewed: Callable[[bool], Awaitable[None]]) -> None:
        self._inbox = inbox
        self._tasks = tasks
        self._renewed = renewed
        self._taken: list[str] = []  # answers from the store handed on, their values to clear with the next beat
        self._beats = 0
        self._renewing = False
        self._heartbeat: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._heartbeat = asyncio.get_running_loop().call_later(HEARTBEAT_S, self._beat)

    def stop(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()

    def taken(self, channel: str) -> None:
        """An answer from the store handed on: its values leave the table with the next beat."""
        self._taken.append(channel)

    async def clear_taken(self) -> None:
        """The values of answers handed on leave the table: once a beat for all of them, not one
        statement per request (they stay at most HEARTBEAT_S longer, readable only by this main)."""
        if self._taken:
            taken, self._taken = self._taken, []
            await self._inbox.taken(taken)

    def _beat(self) -> None:
        self._heartbeat = asyncio.get_running_loop().call_later(HEARTBEAT_S, self._beat)
        self._beats += 1
        if not self._renewing:  # the store away: a renewal may wait for a connection longer than a beat
            self._renewing = True
            self._tasks.start(self._renew(tidy=self._beats % TIDY_EVERY == 0))

    async def _renew(self, tidy: bool) -> None:
        try:
            await self.clear_taken()
            renewed = await self._inbox.heartbeat()
            if renewed is not None:
                await self._renewed(renewed)
            if tidy:
                await self._inbox.tidy()
        finally:
            self._renewing = False
