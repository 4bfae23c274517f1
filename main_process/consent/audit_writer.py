"""When the broker's audit rows reach the store (store/interface.py: AuditTable), seen from the event loop.

- A request's row is written REQUEST_ROW_DELAY_S after the invoke went out, with the other
  requests of that moment in one transaction, or together with its outcome if that comes first:
  a scripted or quick answer costs one commit, and the windows never wait on the disk. A shared
  store (PostgreSQL) writes it with the request's publish instead (`drop_request`).
- An outcome is committed right there on the loop (`outcome`), before the caller hands the answer
  to the server. Under WAL + synchronous=NORMAL a commit is a write to the WAL, no fsync (~20 us
  here), cheaper than a hand-off to a thread and back, which cost ~270 us per answer.
- A request a rule decided before it opened (a host's call an "Always allow" let through) is one
  full row (`decided`), batched like request rows: the decision itself is on disk already (the
  config, the rule store, or the audited answer that allowed it for the session), so nobody waits
  on the disk for it; a SIGKILL can lose such rows of the last REQUEST_ROW_DELAY_S.
- Checkpoints are the only step that fsyncs (a few ms). They run on one helper thread with their
  own connection, never on the loop (the SQLite backend's `checkpoint`), once CHECKPOINT_EVERY
  commits have gathered.
- The store is async (store/interface.py). Each write starts at once (`Tasks.start_now`) and what must
  wait for it (the answer to the server) is its `then`: the SQLite backend never suspends, so the
  commit and `then` are done before `outcome` returns, as the figures above assume; a backend
  that suspends keeps the order (committed, then answered) without holding up the loop.
SIGKILL of main loses no decided outcome; at most the rows of requests younger than
REQUEST_ROW_DELAY_S that nobody had answered yet.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from main_process.store.interface import AuditTable
from main_process.store.records import AuditEntry, Decided, OutcomeRecord
from main_process.tasks import Tasks
from shared.messages import ElicitationInvoke

logger = logging.getLogger(__name__)

REQUEST_ROW_DELAY_S: Final = 0.02  # far below any human answer; a quick answer saves the commit
CHECKPOINT_EVERY: Final = 200  # commits; SQLite's own default is every 1,000 WAL pages (~250 of ours)


class AuditWriter:
    """Orders and batches one AuditTable's writes for the broker. Never raises (the store's writes don't)."""

    def __init__(self, audit: AuditTable, loop: asyncio.AbstractEventLoop) -> None:
        self.audit = audit
        self._loop = loop
        self._queued: dict[str, ElicitationInvoke] = {}
        self._decided: list[Decided] = []
        self._flush_scheduled = False
        self._commits_since_checkpoint = 0
        self._checkpoint_running = False
        self._writes = Tasks()  # writes of a backend that suspended, until done

    def request(self, invoke: ElicitationInvoke) -> None:
        """Write the request's row within REQUEST_ROW_DELAY_S, or with its outcome if sooner."""
        self._queued[invoke.response_channel] = invoke
        self._schedule_flush()

    def drop_request(self, channel: str) -> None:
        """The request's row is written already (a shared store's publish wrote it): not again."""
        self._queued.pop(channel, None)

    def decided(self, invoke: ElicitationInvoke, outcome: str, *, content: dict[str, Any] | None = None,
                rule_id: str | None = None, decision: str | None = None, reason: str | None = None) -> None:
        """Write the full row of a request decided as it was made within REQUEST_ROW_DELAY_S."""
        self._decided.append(Decided(invoke, outcome, time.time_ns() // 1_000_000, content, rule_id, decision,
                                     reason))
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_later(REQUEST_ROW_DELAY_S, self.flush)

    def outcome(self, outcome: OutcomeRecord, then: Callable[[bool], None] | None = None) -> None:
        """Commit the outcome now (with its request row if that is still queued), then call `then`
        with whether it was written (False also when the channel had its outcome already, or the
        write failed: main answers anyway, and the store counts the row as unrecorded)."""
        self._writes.start_now(self._outcome(outcome, self._queued.pop(outcome.channel, None), then))

    async def _outcome(self, outcome: OutcomeRecord, request: ElicitationInvoke | None,
                       then: Callable[[bool], None] | None) -> None:
        written = await self.audit.record_outcome(outcome, request)
        self._committed()
        if then is not None:
            then(written)

    def flush(self) -> None:
        self._flush_scheduled = False
        if not self._queued and not self._decided:
            return
        invokes = list(self._queued.values())
        decided, self._decided = self._decided, []
        self._queued.clear()
        self._writes.start_now(self._rows(invokes, decided))

    async def _rows(self, invokes: list[ElicitationInvoke], decided: list[Decided]) -> None:
        await self.audit.record_requests(invokes, decided)
        self._committed()

    async def entries(self, limit: int, server: str | None) -> list[AuditEntry]:
        """The newest rows, queued ones written first: `elicitron audit` through main (msgAudit)
        shows a request the moment a window has it, not 20 ms later. May raise: a store that
        cannot be read (PostgreSQL down) is the reader's error, not main's."""
        self.flush()
        await self._writes.wait_running()  # later ones are newer than asked
        return await self.audit.entries(limit=limit, server=server)

    async def close(self) -> None:
        """Write what is queued and wait for every write and a running checkpoint; the store stays open."""
        self.flush()
        await self._writes.wait()

    def _committed(self) -> None:
        self._commits_since_checkpoint += 1
        if self._commits_since_checkpoint < CHECKPOINT_EVERY or self._checkpoint_running:
            return  # a running one will take these pages too, or the next one will
        self._commits_since_checkpoint = 0
        self._checkpoint_running = True
        self._writes.start_now(self._checkpoint())

    async def _checkpoint(self) -> None:
        try:
            await self.audit.checkpoint()
        finally:
            self._checkpoint_running = False
