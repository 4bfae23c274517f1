"""The SQLite backend of the store interface (interface.py): one machine, nothing to install.

Two files in `<user data dir>/elicitron/` (as every release before the interface kept them):
`audit.sqlite3` (sqlite_audit.py) and `rules.sqlite3` beside it (sqlite_rules.py), with main's
claim on them in `rules.sqlite3.owner` (owner.py). Their SQL lives in those two modules.

The interface is async; SQLite's calls here are short transactions that run inline (~20 us a
commit under WAL + synchronous=NORMAL), so these coroutines never suspend and main's order of
events is what it was before the interface. The one slow step, the WAL checkpoint (it fsyncs),
runs on a thread of its own.
"""

import asyncio
import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from main_process.consent.rules import Rule
from main_process.store.owner import StoreLock
from main_process.store.records import AuditEntry, Decided, OutcomeRecord
from main_process.store.sqlite_audit import SqliteAuditLog
from main_process.store.sqlite_rules import SqliteRuleStore, path_beside
from shared.errors import RuleStoreError
from shared.messages import ElicitationInvoke, StoreState

logger = logging.getLogger(__name__)


class SqliteRules:
    """RuleTable on `rules.sqlite3`."""

    def __init__(self, path: Path) -> None:
        self._file = SqliteRuleStore(path)

    @property
    def path(self) -> Path:
        return self._file.path

    async def load(self, now_ms: int) -> list[Rule]:
        return self._file.load(now_ms)

    async def add(self, rule: Rule) -> bool:
        return self._file.add(rule)

    async def remove(self, rule_ids: Iterable[str]) -> bool:
        return self._file.remove(rule_ids)

    async def take(self, rule_id: str) -> bool | None:
        return self._file.take(rule_id)

    def close(self) -> None:
        self._file.close()


class SqliteAudit:
    """AuditTable on `audit.sqlite3`."""

    def __init__(self, path: Path, record_values: bool) -> None:
        # Commits never checkpoint (the only step that fsyncs under NORMAL): `checkpoint` does, off the loop.
        self._log = SqliteAuditLog(path, record_values=record_values, auto_checkpoint=False)
        self._checkpointer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-checkpoint")

    @property
    def path(self) -> Path:
        return self._log.path

    @property
    def record_values(self) -> bool:
        return self._log.record_values

    @property
    def unrecorded(self) -> int:
        return self._log.unrecorded

    async def record_requests(self, invokes: Sequence[ElicitationInvoke], decided: Sequence[Decided] = ()) -> bool:
        return self._log.record_requests(invokes, decided)

    async def record_outcome(self, outcome: OutcomeRecord, request: ElicitationInvoke | None = None) -> bool:
        return self._log.record_outcome(outcome.channel, outcome.outcome, window=outcome.window,
                                        content=outcome.content, request=request, rule_id=outcome.rule_id,
                                        decision=outcome.decision, window_name=outcome.window_name,
                                        device=outcome.device, reason=outcome.reason)

    async def entries(self, limit: int = 100, server: str | None = None) -> list[AuditEntry]:
        return self._log.entries(limit, server)

    async def counts(self) -> dict[str, int]:
        return self._log.counts()

    async def checkpoint(self) -> bool:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._checkpointer, self._log.checkpoint)
        except RuntimeError:  # closed: closing the log checkpoints anyway
            return False

    def close(self) -> None:
        self._checkpointer.shutdown(wait=True)  # a running checkpoint ends before its connection closes
        self._log.close()


class SqliteStore:
    """The Store: the audit log at `audit_path`, the rules beside it."""

    def __init__(self, audit_path: Path, *, record_values: bool = False) -> None:
        self._audit_path = audit_path
        self._record_values = record_values
        self._rules = SqliteRules(path_beside(audit_path))  # opens its file when first used
        self._audit: SqliteAudit | None = None  # opened when first asked for (`elicitron rules` never is)
        self._owner = StoreLock(self._rules.path)

    @property
    def rules(self) -> SqliteRules:
        return self._rules

    @property
    def audit(self) -> SqliteAudit:
        if self._audit is None:
            self._audit = SqliteAudit(self._audit_path, self._record_values)
        return self._audit

    @property
    def inbox(self) -> None:
        """One main per SQLite store: its requests are its own (pending.py alone)."""
        return None

    @property
    def devices(self) -> None:
        """One main per SQLite store: its web window's devices.json alone."""
        return None

    @property
    def description(self) -> str:
        return str(self._audit_path)  # main's log has always named the audit file here; rules.sqlite3 is beside it

    async def open(self) -> None:
        pass  # each file opens when first used, as it always has

    async def claim(self, connection: Path) -> None:
        try:  # the CLI then changes the rules through this main, never behind its back
            await self._owner.claim(connection)
        except RuleStoreError as exc:
            logger.error("%s; `elicitron rules revoke` with another connection file will not find this main", exc)

    def status(self) -> StoreState:
        return StoreState(kind="SQLite", location=str(self._audit_path.parent))

    async def close(self) -> None:
        self._owner.release()
        self._rules.close()
        if self._audit is not None:
            self._audit.close()
