"""What a PostgreSQL store could not take while it was away ("store-away"): the writes of what
this main decided meanwhile, kept in order and made again once the store is back, so main never
waits on an outage and loses nothing it decided.

- **Kept**: a write that found the store unreachable, and every later one while some are kept
  or the store is known away (it is not even tried then: no wait on a dead server), in order.
- **Made again** when the store is reachable (postgres_connect.Database.when_back: a heartbeat
  or the LISTEN connection got through), oldest first; the first that fails again stops the
  replay until the next time it is back.
- **Exactly once**: every kept write is idempotent by its request's channel (an outcome is
  written only where the row has none, request rows `ON CONFLICT`, an inbox row ends only while
  open), so a write that did commit before its reply was lost and is made again changes nothing.
- **Bounded**: past LIMIT kept writes, new ones are dropped and counted, with one log line per
  outage; the count is logged again once the store is back.
"""

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

from main_process.store.postgres_connect import Database

logger = logging.getLogger(__name__)

LIMIT: Final = 10_000  # writes (one decision is one or two): hours of a busy team's answers

Write = Callable[[], Awaitable[bool | None]]  # made once: None when the store was unreachable (kept still)


class Backlog:
    """The kept writes of one store."""

    def __init__(self, database: Database, limit: int = LIMIT) -> None:
        self._db = database
        self._limit = limit
        self._kept: deque[tuple[str, Write]] = deque()
        self._dropped = 0  # since the store was last reachable
        self._replaying: asyncio.Task[None] | None = None
        database.when_back(self.replay)

    def __len__(self) -> int:
        return len(self._kept)

    async def write(self, what: str, write: Write) -> bool:
        """Make `write` now, or keep it: at once, without a wait, while the store is away or older
        writes wait (so they stay in order); or when it finds the store unreachable. True only
        when it was written now."""
        if not self._db.away and not self._kept:
            written = await write()
            if written is not None:
                return written
        self.keep(what, write)
        return False

    def keep(self, what: str, write: Write) -> None:
        """Make `write` once the store is back (`what` says what it is, for the log)."""
        if len(self._kept) >= self._limit:
            if not self._dropped:
                logger.error("store %s away: %d writes are kept to be made when it is back, the most kept; "
                             "from now on what is decided here is not written to it (first: %s)",
                             self._db.shown, self._limit, what)
            self._dropped += 1
            return
        if not self._kept:
            logger.warning("store %s away: keeping what is decided here to write it when the store is back",
                           self._db.shown)
        self._kept.append((what, write))
        if not self._db.away:
            self.replay()  # kept behind older ones while the store is up: made as soon as they are

    @property
    def replaying(self) -> bool:
        return self._replaying is not None and not self._replaying.done()

    async def settled(self) -> None:
        """Until a replay running now ends (it made every kept write, or one found the store away)."""
        if self._replaying is not None:
            await asyncio.gather(self._replaying, return_exceptions=True)

    def replay(self) -> None:
        """Make the kept writes again (one replay at a time)."""
        if self._kept and not self.replaying:
            self._replaying = asyncio.get_running_loop().create_task(self._replay(), name="store-backlog")

    async def _replay(self) -> None:
        made = 0
        while self._kept:
            what, write = self._kept[0]
            if await write() is None:
                if not self._db.away:
                    continue  # another call got through meanwhile: the store is back already
                logger.info("store %s: %d kept writes made, %d still kept (%s failed again)", self._db.shown, made,
                            len(self._kept), what)
                return
            self._kept.popleft()
            made += 1
        logger.warning("store %s is back: %d kept write(s) made%s", self._db.shown, made,
                       f"; {self._dropped} over the limit of {self._limit} were lost" if self._dropped else "")
        self._dropped = 0

    async def close(self) -> None:
        """main stops: what is still kept is lost (logged); a replay running now ends first."""
        await self.settled()
        if self._kept or self._dropped:
            logger.error("store %s: main stops with %d decision write(s) the store never got (%s first)",
                         self._db.shown, len(self._kept) + self._dropped,
                         self._kept[0][0] if self._kept else "over the limit")
