"""When the broker's audit rows reach the disk, seen from the event loop.

- A request's row is written REQUEST_ROW_DELAY_S after the invoke went out, with the other
  requests of that moment in one transaction, or together with its outcome if that comes first:
  a scripted or quick answer costs one commit, and the windows never wait on the disk.
- An outcome is committed right there on the loop (`outcome`), before the caller hands the answer
  to the server. Under WAL + synchronous=NORMAL a commit is a write to the WAL, no fsync (~20 us
  here), cheaper than a hand-off to a thread and back, which cost ~270 us per answer.
- A request a rule decided before it opened (a host's call an "Always allow" let through) is one
  full row (`decided`), batched like request rows: the decision itself is on disk already (the
  config, the rule store, or the audited answer that allowed it for the session), so nobody waits
  on the disk for it; a SIGKILL can lose such rows of the last REQUEST_ROW_DELAY_S.
- Checkpoints are the only step that fsyncs (a few ms). They run on one helper thread with their
  own connection, never on the loop, once CHECKPOINT_EVERY commits have gathered.
SIGKILL of main loses no decided outcome; at most the rows of requests younger than
REQUEST_ROW_DELAY_S that nobody had answered yet.
"""

import asyncio
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

from main_process.audit import AuditLog, Decided
from shared.messages import DeviceRef, ElicitationInvoke

logger = logging.getLogger(__name__)

REQUEST_ROW_DELAY_S: Final = 0.02  # far below any human answer; a quick answer saves the commit
CHECKPOINT_EVERY: Final = 200  # commits; SQLite's own default is every 1,000 WAL pages (~250 of ours)


class AuditWriter:
    """Orders and batches one AuditLog's writes for the broker. Never raises (AuditLog doesn't)."""

    def __init__(self, log: AuditLog, loop: asyncio.AbstractEventLoop) -> None:
        self.log = log
        self._loop = loop
        self._queued: dict[str, ElicitationInvoke] = {}
        self._decided: list[Decided] = []
        self._flush_scheduled = False
        self._commits_since_checkpoint = 0
        self._checkpointer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-checkpoint")
        self._checkpoint_running: Future[bool] | None = None

    def request(self, invoke: ElicitationInvoke) -> None:
        """Write the request's row within REQUEST_ROW_DELAY_S, or with its outcome if sooner."""
        self._queued[invoke.response_channel] = invoke
        self._schedule_flush()

    def decided(self, invoke: ElicitationInvoke, outcome: str, *, content: dict[str, Any] | None = None,
                rule_id: str | None = None, decision: str | None = None) -> None:
        """Write the full row of a request decided as it was made within REQUEST_ROW_DELAY_S."""
        self._decided.append(Decided(invoke, outcome, time.time_ns() // 1_000_000, content, rule_id, decision))
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_later(REQUEST_ROW_DELAY_S, self.flush)

    def outcome(self, channel: str, outcome: str, *, window: str | None = None,
                content: dict[str, Any] | None = None, rule_id: str | None = None,
                decision: str | None = None, window_name: str | None = None,
                device: DeviceRef | None = None) -> bool:
        """Commit the outcome now (with its request row if that is still queued); True once on disk."""
        request = self._queued.pop(channel, None)
        written = self.log.record_outcome(channel, outcome, window=window, content=content, request=request,
                                          rule_id=rule_id, decision=decision, window_name=window_name,
                                          device=device)
        self._committed()
        return written

    def flush(self) -> None:
        self._flush_scheduled = False
        if not self._queued and not self._decided:
            return
        invokes = list(self._queued.values())
        decided, self._decided = self._decided, []
        self._queued.clear()
        if decided:
            self.log.record_requests(invokes, decided)
        else:
            self.log.record_requests(invokes)
        self._committed()

    def close(self) -> None:
        """Write what is queued and wait for a running checkpoint; the log itself stays open."""
        self.flush()
        self._checkpointer.shutdown(wait=True)

    def _committed(self) -> None:
        self._commits_since_checkpoint += 1
        if self._commits_since_checkpoint < CHECKPOINT_EVERY:
            return
        if self._checkpoint_running is not None and not self._checkpoint_running.done():
            return  # the running one will take these pages too, or the next one will
        self._commits_since_checkpoint = 0
        try:
            self._checkpoint_running = self._checkpointer.submit(self.log.checkpoint)
        except RuntimeError:  # shut down: main is closing, and closing the log checkpoints anyway
            logger.debug("audit checkpoint skipped: writer closed")
