"""What a PostgreSQL store could not take while it was away ("store-away"): the writes of what
this main decided meanwhile, kept in order, on disk (spool.py), and made again once the store is
back, so main never waits on an outage and loses nothing it decided, even when it stops or is
killed before the store is back.

- **Kept as data**: each write is a `kind` (one idempotent write a store part registered with
  `handles`) and its JSON payload, added to the spool (committed, as the SQLite audit's rows are)
  before `write` returns, so before the decision is reported to anyone. A write that found the
  store unreachable is kept, and every later one while some are kept or the store is known away
  (it is not even tried then: no wait on a dead server), in order.
- **Made again** when the store is reachable (postgres_connect.Database.when_back: a heartbeat
  or the LISTEN connection got through), oldest first, each leaving the spool once the store has
  it; the first that fails again stops the replay until the next time it is back. **At start**
  (`load`, then `replay`): what the last run of this main kept is made once the store is opened.
- **Exactly once**: every kind is idempotent by its request's channel (an outcome is written
  only where the row has none, request rows `ON CONFLICT`, an inbox row ends only while open, a
  quorum approval once per person), so a write that did commit before its reply was lost, or
  before main was killed, and is made again changes nothing.
- **Bounded**: past LIMIT kept writes, new ones are dropped and counted, with one log line per
  outage; the count is logged again once the store is back.
"""

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

from main_process.store.postgres_connect import Database
from main_process.store.spool import Kept, Spool

logger = logging.getLogger(__name__)

LIMIT: Final = 10_000  # writes (one decision is one or two): hours of a busy team's answers

Payload = dict[str, Any]  # JSON: what the write needs, nothing of the store's password
Handler = Callable[[Payload], Awaitable[bool | None]]  # one write: None when the store was unreachable (kept still)


class Backlog:
    """The kept writes of one store, in `spool` (spool.Spool(None): in memory only)."""

    def __init__(self, database: Database, spool: Spool | None = None, limit: int = LIMIT) -> None:
        self._db = database
        self._spool = spool if spool is not None else Spool(None)
        self._limit = limit
        self._handlers: dict[str, Handler] = {}
        self._kept: deque[Kept] = deque()
        self._dropped = 0  # since the store was last reachable
        self._replaying: asyncio.Task[None] | None = None
        database.when_back(self.replay)

    def __len__(self) -> int:
        return len(self._kept)

    def handles(self, kind: str, handler: Handler) -> None:
        """`handler(payload)` makes the writes of `kind` (idempotent: made again, it changes nothing)."""
        self._handlers[kind] = handler

    def load(self) -> int:
        """What the last run of this main kept, behind nothing (main starts): how many writes."""
        loaded = self._spool.load()
        self._kept.extend(loaded)
        if loaded:
            logger.warning("store %s: %d write(s) kept by the last run of this main (in %s) are made now",
                           self._db.shown, len(loaded), self._spool.shown)
        return len(loaded)

    async def write(self, kind: str, what: str, payload: Payload) -> bool:
        """Make the write now, or keep it: at once, without a wait, while the store is away or older
        writes wait (so they stay in order); or when it finds the store unreachable. `what` says
        what it is, for the log. True only when it was written now."""
        if not self._db.away and not self._kept:
            written = await self._handlers[kind](payload)
            if written is not None:
                return written
        self.keep(kind, what, payload)
        return False

    def keep(self, kind: str, what: str, payload: Payload) -> None:
        """Make the write once the store is back (on disk before this returns)."""
        if len(self._kept) >= self._limit:
            if not self._dropped:
                logger.error("store %s away: %d writes are kept to be made when it is back, the most kept; "
                             "from now on what is decided here is not written to it (first: %s)",
                             self._db.shown, self._limit, what)
            self._dropped += 1
            return
        if not self._kept:
            logger.warning("store %s away: keeping what is decided here (in %s) to write it when the store is back",
                           self._db.shown, self._spool.shown)
        self._kept.append(self._spool.add(kind, what, payload))
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
            kept = self._kept[0]
            if await self._make(kept) is None:
                if not self._db.away:
                    continue  # another call got through meanwhile: the store is back already
                logger.info("store %s: %d kept writes made, %d still kept (%s failed again)", self._db.shown, made,
                            len(self._kept), kept.what)
                return
            self._kept.popleft()
            self._spool.remove(kept.seq)
            made += 1
        logger.warning("store %s is back: %d kept write(s) made%s", self._db.shown, made,
                       f"; {self._dropped} over the limit of {self._limit} were lost" if self._dropped else "")
        self._dropped = 0

    async def _make(self, kept: Kept) -> bool | None:
        """One kept write made; False (dropped) for one this main cannot make (an unknown kind, a
        payload not of its kind: a spool written by another version), said in one line."""
        handler = self._handlers.get(kept.kind)
        if handler is None:
            problem = f"unknown kind {kept.kind!r}"
        else:
            try:
                return await handler(kept.payload)
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
        logger.error("store spool %s: kept write #%s (%s) cannot be made (%s): dropped", self._spool.shown,
                     kept.seq, kept.what, problem)
        return False

    async def close(self) -> None:
        """main stops: a replay running now ends first; what is still kept stays in the spool for
        the next start (logged), what was over the limit or in memory only is lost (logged)."""
        await self.settled()
        on_disk = sum(1 for kept in self._kept if kept.seq is not None)
        lost = len(self._kept) - on_disk + self._dropped
        first_lost = next((k.what for k in self._kept if k.seq is None), "over the limit")
        self._spool.close()
        self._kept.clear()  # (the spool has them; a closed backlog makes nothing more)
        if on_disk:
            logger.warning("store %s: main stops with %d write(s) the store has not had yet, kept in %s: "
                           "made when this main next starts on this store", self._db.shown, on_disk,
                           self._spool.shown)
        if lost:
            logger.error("store %s: main stops with %d decision write(s) the store never got (%s first)",
                         self._db.shown, lost, first_lost)
