"""LISTEN for a PostgreSQL store's wake-ups, on a connection of its own (a pooled one would be
handed to others between statements, and its LISTEN with it).

A notification says "look" and what changed (an answer's values only on the channel of the main
that holds the request, postgres_inbox.py): one sent while this connection was away is gone. So
`connected(backend_pid)` runs on every (re)connect, before any wake, and the caller catches up
there with a query; `wake(channel, payload)` runs for each notification. A lost connection is retried with a growing delay (logged once per outage), never raised, and at once
when another call found the store reachable again (Database.when_back).
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import psycopg
from psycopg import sql
from psycopg.pq.abc import PGconn

from main_process.store.postgres_connect import Database
from shared.errors import StoreUnavailableError

logger = logging.getLogger(__name__)

RETRY_FIRST_S: Final = 0.2
RETRY_MAX_S: Final = 5.0


class Listener:
    """One LISTEN connection for `channels`, kept up until `close`."""

    def __init__(self, database: Database, channels: Sequence[str], *, wake: Callable[[str, str], None],
                 connected: Callable[[int], Awaitable[None]]) -> None:
        self._db = database
        self._channels = tuple(channels)
        self._wake = wake
        self._connected = connected
        self._task: asyncio.Task[None] | None = None
        self.up = asyncio.Event()  # set while listening (tests and status wait on it)
        self._retry_now = asyncio.Event()
        database.when_back(self._retry_now.set)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="store-listener")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        delay = RETRY_FIRST_S
        complained = False
        while True:
            try:
                await self._listen()
                reason = "the connection ended"
            except StoreUnavailableError as exc:
                reason = str(exc)
            except psycopg.Error as exc:
                self._db.failed(exc)
                reason = self._db.explain(exc)
            if self.up.is_set():  # it was listening: a new outage
                self.up.clear()
                delay, complained = RETRY_FIRST_S, False
            if not complained:
                logger.warning("store wake-ups: %s; reconnecting", reason)
                complained = True
            try:  # a backoff between reconnects, cut short when the store is back
                await asyncio.wait_for(self._retry_now.wait(), delay)
            except TimeoutError:
                delay = min(delay * 2, RETRY_MAX_S)
            self._retry_now.clear()

    async def _listen(self) -> None:
        conn = await self._db.connect()
        async with conn:
            for channel in self._channels:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self._db.succeeded()
            await self._connected(conn.info.backend_pid)
            self.up.set()
            logger.info("store wake-ups: listening (%s)", ", ".join(self._channels))
            await self._notifications(conn)

    async def _notifications(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Hand on each notification as it comes, read in the socket's reader callback itself:
        psycopg's `notifies()` also wakes every 0.1 s to look for a Ctrl-C (which more than doubled
        an idle main's CPU), and a coroutine woken by an event cost each wake-up a task step more
        (9 wake-ups a request on the team bench). Returns never; raises psycopg.Error when the
        connection is gone."""
        loop = asyncio.get_running_loop()
        pgconn = conn.pgconn
        fd = pgconn.socket
        gone: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            try:
                self._hand_on(pgconn)
            except psycopg.Error as exc:  # the server or the network is gone: _run reconnects
                loop.remove_reader(fd)
                if not gone.done():
                    gone.set_exception(exc)

        self._hand_on(pgconn)  # what came with the LISTENs
        loop.add_reader(fd, readable)
        try:
            await gone
        finally:
            loop.remove_reader(fd)

    def _hand_on(self, pgconn: PGconn) -> None:
        pgconn.consume_input()  # raises OperationalError once the server or the network is gone
        while (note := pgconn.notifies()) is not None:
            self._wake(note.relname.decode(errors="replace"), note.extra.decode(errors="replace"))
