"""The PostgreSQL backend's audit log (interface.py: AuditTable): the SQLite log's rows and rules
(rows.py), in a database many mains may share, each row naming the `machine` that asked.

The decisions are single statements or one transaction, so they hold across mains as they do in
one process:
- `record_outcome` is one `INSERT ... ON CONFLICT (channel) DO UPDATE ... WHERE outcome IS NULL`:
  the row of a request (given, or written before) gets its outcome once; a row that has one
  already is left alone and the call returns False; a channel with no row gets one. Two mains
  deciding one channel at once: PostgreSQL locks the row, the second sees the first's outcome.
- `record_requests` writes rule-decided rows and new request rows in one transaction; request rows
  alone (each independent of the others) in one round trip without one.
Writes never raise (the store's failure policy). One that finds the store unreachable is kept
(on disk: spool.py) and made again when it is back, or when main next starts (postgres_backlog.py:
idempotent by channel, so each row once) and returns False; one the store refuses is logged,
counted as unrecorded, and returns False. So a kept write is data: its kind ("requests",
"outcome") and a JSON payload of the row's columns.
- An outcome a quorum decided on this main while the store was away names its approvers
  (`OutcomeRecord.approvers`): the row's `approvers` says each with the machine the store has for
  them (an approval counted in the store before the outage), else this main's.
Readers raise AuditLogError.
"""

import logging
import time
from collections.abc import Sequence
from typing import Any, Final, LiteralString

import msgspec
import psycopg

from main_process.log_limiter import RateLimitedLog
from main_process.store.postgres_backlog import Backlog
from main_process.store.postgres_connect import Database
from main_process.store.records import OUTCOMES, PENDING, AuditEntry, Decided, OutcomeRecord
from main_process.store.rows import audit_entry, request_row, values_json
from shared.errors import AuditLogError, StoreUnavailableError
from shared.messages import ElicitationInvoke

logger = logging.getLogger(__name__)

_REQUEST: Final = ("channel", "server", "mode", "message", "fields", "url", "origin_window", "created_at",
                   "expires_at", "kind", "via", "tool", "arguments")
_OUTCOME: Final = ("outcome", "answer_window", "decided_at", "content", "rule_id", "decision", "answer_window_name",
                   "answer_device", "answer_device_id", "reason")
_JSON: Final = frozenset({"fields", "arguments", "content", "approvers"})  # jsonb, given and read as JSON text


def _names(columns: Sequence[LiteralString]) -> LiteralString:
    return ", ".join(columns)


def _values(columns: Sequence[LiteralString]) -> LiteralString:
    return ", ".join("%s::jsonb" if column in _JSON else "%s" for column in columns)


def _set(columns: Sequence[LiteralString]) -> LiteralString:
    return ", ".join(f"{column} = excluded.{column}" for column in columns)


_ROW: Final = (*_REQUEST, *_OUTCOME, "machine")
_INSERT_REQUEST: Final = (  # a repeated channel refreshes its request columns and keeps any outcome
    f"INSERT INTO elicitations ({_names((*_REQUEST, 'machine'))}) VALUES ({_values((*_REQUEST, 'machine'))}) "
    f"ON CONFLICT (channel) DO UPDATE SET {_set((*_REQUEST[1:], 'machine'))}")
_INSERT_DECIDED: Final = (
    f"INSERT INTO elicitations ({_names(_ROW)}) VALUES ({_values(_ROW)}) ON CONFLICT (channel) DO NOTHING")
_DECIDE: Final = (  # the first outcome wins; xmax = 0: the row is new (no request row was there)
    f"INSERT INTO elicitations ({_names((*_ROW, 'approvers'))}) VALUES ({_values((*_ROW, 'approvers'))}) "
    f"ON CONFLICT (channel) DO UPDATE SET {_set((*_OUTCOME, 'approvers'))} WHERE elicitations.outcome IS NULL "
    "RETURNING (xmax = 0)")
_APPROVED_IN_STORE: Final = "SELECT person, machine FROM quorum_approvals WHERE channel = %s"
# An outcome found already there: this very write, made before (a kept write made again after main
# was killed mid-replay) when its decision (time to the ms, window, rule, decision) and machine are this row's
_SAME: Final = ("outcome", "decided_at", "answer_window", "rule_id", "decision", "machine")
_MADE_BEFORE: Final = ("SELECT 1 FROM elicitations WHERE channel = %s AND " +
                       " AND ".join(f"{column} IS NOT DISTINCT FROM %s" for column in _SAME))
REQUESTS: Final = "requests"  # the kinds of the writes kept while the store is away (postgres_backlog.py)
OUTCOME: Final = "outcome"
_SELECT: Final = ", ".join(f"{column}::text" if column in _JSON else column
                          for column in (*_ROW, "answer_machine", "answer_user", "approvers"))
_ERROR_INTERVAL_S: Final = 60.0


class PgAudit:
    """AuditTable on the `elicitations` table of a PostgreSQL store."""

    def __init__(self, database: Database, machine: str, record_values: bool, backlog: Backlog) -> None:
        self._db = database
        self._backlog = backlog
        self.machine = machine
        self._record_values = record_values
        self._unrecorded = 0
        self._unrecorded_since_ok = 0
        self._complaints = RateLimitedLog(logger, interval_s=_ERROR_INTERVAL_S)
        backlog.handles(REQUESTS, lambda kept: self._requests_once([tuple(r) for r in kept["rows"]],
                                                                   [tuple(r) for r in kept["full"]]))
        backlog.handles(OUTCOME, lambda kept: self._outcome_once(
            tuple(kept["row"]), kept["channel"], kept["outcome"], alone=kept["alone"], approvers=kept["approvers"]))

    @property
    def record_values(self) -> bool:
        return self._record_values

    @property
    def unrecorded(self) -> int:
        return self._unrecorded

    # ---- writing (main) ----------------------------------------------------------------

    async def record_requests(self, invokes: Sequence[ElicitationInvoke], decided: Sequence[Decided] = ()) -> bool:
        rows = [(*self._request_row(invoke), self.machine) for invoke in invokes]
        full = [(*self._request_row(d.invoke), d.outcome, None, d.decided_at,
                 values_json(d.invoke.response_channel, d.content, self._record_values) if d.outcome == "accept"
                 else None, d.rule_id, d.decision, None, None, None, d.reason, self.machine) for d in decided]
        if not rows and not full:
            return True
        return await self._backlog.write(REQUESTS, f"{len(rows) + len(full)} request row(s)",
                                         {"rows": rows, "full": full})

    async def _requests_once(self, rows: list[tuple[Any, ...]], full: list[tuple[Any, ...]]) -> bool | None:
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                if not full:  # request rows alone: each its own statement, all in one round trip (no BEGIN, COMMIT)
                    async with conn.cursor() as cursor:
                        await cursor.executemany(_INSERT_REQUEST, rows)
                    return self._succeeded()
                async with conn.transaction(), conn.cursor() as cursor:
                    if full:
                        await cursor.executemany(_INSERT_DECIDED, full)
                    if rows:
                        await cursor.executemany(_INSERT_REQUEST, rows)
        except (psycopg.Error, StoreUnavailableError) as exc:
            return self._away_or_failed("record request", exc)
        return self._succeeded()

    async def record_outcome(self, outcome: OutcomeRecord, request: ElicitationInvoke | None = None) -> bool:
        if outcome.outcome not in OUTCOMES:
            return self._failed("record outcome", ValueError(f"unknown outcome {outcome.outcome!r}"))
        decided_at = _now_ms()
        if request is not None:
            asked = self._request_row(request)
        else:  # no request row known: if none exists, the outcome is kept alone (server and mode '')
            asked = (outcome.channel, "", "", "", None, None, None, decided_at, None, None, None, None, None)
        content = values_json(outcome.channel, outcome.content, self._record_values) \
            if outcome.outcome == "accept" else None
        device = outcome.device
        row = (*asked, outcome.outcome, outcome.window, decided_at, content, outcome.rule_id, outcome.decision,
               outcome.window_name, device.name if device is not None else None,
               device.id if device is not None else None, outcome.reason, self.machine)
        return await self._backlog.write(OUTCOME, f"the outcome {outcome.outcome!r} of {outcome.channel}",
                                         {"row": row, "channel": outcome.channel, "outcome": outcome.outcome,
                                          "alone": request is None, "approvers": list(outcome.approvers)})

    async def _outcome_once(self, row: tuple[Any, ...], channel: str, outcome: str, *, alone: bool,
                            approvers: list[str]) -> bool | None:
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                named = await self._approvers(conn, channel, approvers) if approvers else None
                decided = await (await conn.execute(_DECIDE, (*row, named))).fetchone()
                made_before = decided is None and await (await conn.execute(
                    _MADE_BEFORE, (channel, *(row[_ROW.index(column)] for column in _SAME)))).fetchone() is not None
        except (psycopg.Error, StoreUnavailableError) as exc:
            return self._away_or_failed("record outcome", exc)
        if made_before:
            return self._succeeded()  # the same write made twice: nothing changed
        if decided is None:  # after an outage: the request was decided on another main meanwhile too
            problem = ValueError(f"{channel} already has an outcome; {outcome!r} not recorded")
            self._complain("record outcome", problem, level=logging.WARNING)
            return False
        if decided[0] and alone:
            logger.warning("audit log: outcome %r of %s recorded without its request", outcome, channel)
        return self._succeeded()

    async def _approvers(self, conn: psycopg.AsyncConnection[Any], channel: str, people: list[str]) -> str:
        """The `approvers` column of a quorum decided here: each person with the machine the store
        counted them on, else this main's (they approved here while the store was away)."""
        counted = {str(person): str(machine) for person, machine in
                   await (await conn.execute(_APPROVED_IN_STORE, (channel,))).fetchall()}
        return msgspec.json.encode([{"person": person, "machine": counted.get(person, self.machine)}
                                    for person in people]).decode()

    def _request_row(self, invoke: ElicitationInvoke) -> tuple[Any, ...]:
        arguments = invoke.approval.arguments if invoke.approval is not None else None
        return request_row(invoke, values_json(invoke.response_channel, arguments, self._record_values))

    async def checkpoint(self) -> bool:
        return True  # PostgreSQL checkpoints on its own

    # ---- reading (CLI) -----------------------------------------------------------------

    async def entries(self, limit: int = 100, server: str | None = None) -> list[AuditEntry]:
        if limit < 0:
            raise ValueError("limit must be >= 0")
        where: LiteralString = "WHERE server = %s " if server is not None else ""
        args = (server, limit) if server is not None else (limit,)
        rows = await self._read(f"SELECT {_SELECT} FROM elicitations {where}"
                                "ORDER BY created_at DESC, channel DESC LIMIT %s", args)
        return [audit_entry(row[:-4], machine=row[-4], answer_machine=row[-3], answer_user=row[-2], approvers=row[-1])
                for row in rows]

    async def counts(self) -> dict[str, int]:
        rows = await self._read("SELECT COALESCE(outcome, %s), count(*) FROM elicitations GROUP BY 1 ORDER BY 1",
                                (PENDING,))
        return {str(outcome): int(count) for outcome, count in rows}

    async def _read(self, sql: LiteralString, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                rows = await (await conn.execute(sql, args)).fetchall()
        except StoreUnavailableError as exc:
            raise AuditLogError(str(exc)) from None
        except psycopg.Error as exc:
            self._db.failed(exc)
            raise AuditLogError(f"cannot read the audit log: {self._db.explain(exc)}") from None  # (it names the store)
        self._db.succeeded()
        return rows

    # ---- failures ------------------------------------------------------------------------

    def _away_or_failed(self, op: str, exc: psycopg.Error | StoreUnavailableError) -> bool | None:
        """None: the store was unreachable (the write is kept); False: it refused (logged, counted)."""
        if self._db.unreachable(exc):
            if isinstance(exc, psycopg.Error):
                self._db.failed(exc)
            return None
        return self._failed(op, exc)

    def _failed(self, op: str, exc: Exception) -> bool:
        self._unrecorded += 1
        self._unrecorded_since_ok += 1
        if isinstance(exc, psycopg.Error):
            self._db.failed(exc)
            exc = StoreUnavailableError(self._db.explain(exc))  # the password scrubbed from libpq's text
        self._complain(op, exc)
        return False

    def _succeeded(self) -> bool:
        self._db.succeeded()
        if self._unrecorded_since_ok:
            logger.warning("audit log in %s is writable again; %d record(s) were lost", self._db.shown,
                           self._unrecorded_since_ok)
            self._unrecorded_since_ok = 0
        return True

    def _complain(self, op: str, exc: Exception, level: int = logging.ERROR) -> None:
        """Each distinct problem at most once a minute, with how often it was suppressed."""
        problem = f"{type(exc).__name__}: {exc}"
        self._complaints.log(level, ("audit", problem), "audit log in %s: cannot %s: %s", self._db.shown, op,
                             problem)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
