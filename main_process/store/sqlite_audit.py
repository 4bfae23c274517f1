"""The SQLite backend's audit log: one row per elicitation, from the request to its outcome, in
`<user data dir>/elicitron/audit.sqlite3` (the file and schema of every release before the store
interface: an existing log is read and extended as it is).

Who writes and who reads (through `sqlite.SqliteStore`, the store interface's SQLite backend):
- main, through `audit_writer.AuditWriter` (which decides when), records each request
  (`record_requests`, batched) and its outcome (`record_outcome`, with the request row if that is
  not written yet) *before* the answer goes back to the server, so what the user decided is on
  disk even if main is killed the next instant; main checkpoints with `checkpoint()` off its loop;
- `elicitron audit` (another process) opens the same file and reads `entries()` / `counts()`.

Durability: WAL journal with `synchronous=NORMAL`, and every write is its own transaction, so once a
`record_*` call has returned True its row is in the WAL file and survives SIGKILL of main (the
issue's requirement). Only a power loss can drop the last rows; FULL would fsync each write and cost
~200 us on the event loop per elicitation (measured by scripts/bench).
Readers in other processes never block the writer and see every committed row.

Failure policy: the log must never take main down. `record_*` catch `sqlite3.Error` and `OSError`,
log one error per distinct problem per minute, and return False. The readers are for the CLI and
raise `AuditLogError` instead, so the user sees why nothing can be shown.

Privacy: a missing directory is created 0700 and the file 0600 (SQLite gives its -wal and -shm
files the database file's mode). Answered values are stored only with `record_values=True`;
without it a row says what was asked and how it was decided, never what was typed.

One table, `elicitations`; `PRAGMA user_version` is its schema version (`SCHEMA_VERSION`). To change
the schema, append one migration to `_MIGRATIONS`: opening the file applies the missing ones.
"""

import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from main_process.log_limiter import RateLimitedLog
from main_process.private_files import open_private_sqlite
from main_process.store.records import OUTCOMES, PENDING, AuditEntry, Decided
from main_process.store.rows import AUDIT_COLUMNS, REQUEST_COLUMNS, audit_entry, request_row, values_json
from shared.errors import AuditLogError
from shared.messages import DeviceRef, ElicitationInvoke

logger = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 6
_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 0 -> 1
    (
        """
        CREATE TABLE elicitations (
            channel       TEXT PRIMARY KEY,   -- the one-time responseChannel
            server        TEXT NOT NULL,      -- '' when only the outcome was recorded
            mode          TEXT NOT NULL,      -- 'form' | 'url' ('' as for server)
            message       TEXT NOT NULL,
            fields        TEXT,               -- form: JSON list of requested property names
            url           TEXT,               -- url: the URL the user was asked to open
            origin_window TEXT,               -- window whose tool call led to the request
            created_at    INTEGER NOT NULL,   -- epoch ms
            expires_at    INTEGER,            -- epoch ms
            outcome       TEXT,               -- NULL while pending, else one of OUTCOMES
            answer_window TEXT,               -- window that answered
            decided_at    INTEGER,            -- epoch ms
            content       TEXT                -- JSON answered values, only with record_values
        )
        """,
        "CREATE INDEX elicitations_by_created ON elicitations (created_at)",
        "CREATE INDEX elicitations_by_server ON elicitations (server, created_at)",
    ),
    # 1 -> 2: every kind of request, not only servers' elicitations
    (
        "ALTER TABLE elicitations ADD COLUMN kind TEXT",  # NULL: a server's elicitation
        "ALTER TABLE elicitations ADD COLUMN via TEXT",  # the MCP host whose call led to it
        "ALTER TABLE elicitations ADD COLUMN tool TEXT",  # approvals: the tool asked about
        "ALTER TABLE elicitations ADD COLUMN rule_id TEXT",  # answered by this rule, not by a window
        "ALTER TABLE elicitations ADD COLUMN arguments TEXT",  # approvals: JSON, only with record_values
    ),
    # 2 -> 3: what an approval decided, kept without record_values (it is the outcome, not a value)
    (
        "ALTER TABLE elicitations ADD COLUMN decision TEXT",  # allow-once | allow-session | allow-always | deny
    ),
    # 3 -> 4: the answering window's name as it was then (`elicitron audit` shows it under BY)
    (
        "ALTER TABLE elicitations ADD COLUMN answer_window_name TEXT",
    ),
    # 4 -> 5: the paired web device a web window's page answered for (hello extension `device`)
    (
        "ALTER TABLE elicitations ADD COLUMN answer_device TEXT",  # its name then
        "ALTER TABLE elicitations ADD COLUMN answer_device_id TEXT",  # its id (`elicitron devices`)
    ),
    # 5 -> 6: why a call was denied: the reason the person typed, or the forbidding policy's
    (
        "ALTER TABLE elicitations ADD COLUMN reason TEXT",
    ),
)
assert len(_MIGRATIONS) == SCHEMA_VERSION

_ERROR_INTERVAL_S: Final = 60.0


class SqliteAuditLog:
    """The SQLite audit log. Thread-safe; `record_*` never raise."""

    def __init__(self, path: Path, *, record_values: bool = False,
                 busy_timeout_ms: int = 1000, auto_checkpoint: bool = True) -> None:
        self.path = path
        self.record_values = record_values
        # False: commits never checkpoint (the only step that fsyncs under NORMAL); the owner
        # calls checkpoint() instead, off its event loop.
        self._auto_checkpoint = auto_checkpoint
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_conn: sqlite3.Connection | None = None
        self._busy_timeout_s = busy_timeout_ms / 1000
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._complaints = RateLimitedLog(logger, interval_s=_ERROR_INTERVAL_S)
        self._unrecorded = 0
        self._unrecorded_since_ok = 0
        with self._lock:
            try:
                self._connection()
            except (sqlite3.Error, OSError, AuditLogError) as exc:
                self._complain("open", exc)  # record_* retry the open on their next call

    # ---- writing (main) ----------------------------------------------------------------

    def record_request(self, invoke: ElicitationInvoke) -> bool:
        """Insert the row for a new request (outcome NULL). True once committed, False on failure."""
        return self.record_requests((invoke,))

    def record_requests(self, invokes: Sequence[ElicitationInvoke], decided: Sequence[Decided] = ()) -> bool:
        """Insert the rows for new requests (outcome NULL), and the full rows of requests `decided`
        as they were made, in one transaction. True once committed."""
        rows = [self._request_row(invoke) for invoke in invokes]
        full = [(*self._request_row(d.invoke), d.outcome, None, d.decided_at,
                 self._values_json(d.invoke.response_channel, d.content) if d.outcome == "accept" else None,
                 d.rule_id, d.decision, None, None, None, d.reason) for d in decided]
        with self._lock:
            try:
                conn = self._writable()
                conn.execute("BEGIN")
                try:
                    if full:
                        conn.executemany(_INSERT_DECIDED, full)
                    conn.executemany(_UPSERT_REQUEST, rows)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, OSError, AuditLogError) as exc:
                return self._failed("record request", exc)
            return self._succeeded()

    def record_outcome(self, channel: str, outcome: str, *, window: str | None = None,
                       content: dict[str, Any] | None = None, request: ElicitationInvoke | None = None,
                       rule_id: str | None = None, decision: str | None = None,
                       window_name: str | None = None, device: DeviceRef | None = None,
                       reason: str | None = None) -> bool:
        """Decide a row once; True only after the outcome is committed to disk.

        `outcome` is one of `OUTCOMES`. `content` is stored only for "accept" and only with
        `record_values=True`. `rule_id` names the rule that answered instead of a window;
        `decision` is an approval's decision; `window_name` the answering window's name, `device`
        the paired web device it answered for; `reason` why a call was denied.
        The first outcome of a channel wins: a later one returns False.
        With `request` (not yet recorded), request and outcome are written in one statement.
        A channel without a request row still gets a row (server and mode ''), so no decision is lost.
        """
        if outcome not in OUTCOMES:
            with self._lock:
                return self._failed("record outcome", ValueError(f"unknown outcome {outcome!r}"))
        stored = self._values_json(channel, content) if outcome == "accept" else None
        decided_at = _now_ms()
        device_name, device_id = (device.name, device.id) if device is not None else (None, None)
        with self._lock:
            try:
                conn = self._writable()
                if request is not None:
                    updated = conn.execute(_UPSERT_OUTCOME, (
                        *self._request_row(request), outcome, window, decided_at, stored, rule_id, decision,
                        window_name, device_name, device_id, reason)).rowcount
                else:
                    updated = conn.execute(
                        "UPDATE elicitations SET outcome = ?, answer_window = ?, decided_at = ?, content = ?, "
                        "rule_id = ?, decision = ?, answer_window_name = ?, answer_device = ?, "
                        "answer_device_id = ?, reason = ? WHERE channel = ? AND outcome IS NULL",
                        (outcome, window, decided_at, stored, rule_id, decision, window_name, device_name,
                         device_id, reason, channel),
                    ).rowcount
                if updated == 0 and not self._insert_orphan_outcome(conn, channel, outcome, window,
                                                                    decided_at, stored, window_name,
                                                                    device_name, device_id):
                    return False
            except (sqlite3.Error, OSError, AuditLogError) as exc:
                return self._failed("record outcome", exc)
            return self._succeeded()

    def _insert_orphan_outcome(self, conn: sqlite3.Connection, channel: str, outcome: str,
                               window: str | None, decided_at: int, stored: str | None,
                               window_name: str | None = None, device_name: str | None = None,
                               device_id: str | None = None) -> bool:
        """The UPDATE matched nothing: refuse a second outcome, or keep an outcome without a request."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT outcome FROM elicitations WHERE channel = ?", (channel,)).fetchone()
            if row is not None:
                conn.execute("ROLLBACK")
                problem = ValueError(f"{channel} already has outcome {row[0]!r}; {outcome!r} not recorded")
                self._complain("record outcome", problem, level=logging.WARNING)
                return False
            conn.execute(
                "INSERT INTO elicitations (channel, server, mode, message, created_at, outcome, "
                "answer_window, decided_at, content, answer_window_name, answer_device, answer_device_id) "
                "VALUES (?, '', '', '', ?, ?, ?, ?, ?, ?, ?, ?)",
                (channel, decided_at, outcome, window, decided_at, stored, window_name, device_name, device_id),
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        logger.warning("audit log: outcome %r of %s recorded without its request", outcome, channel)
        return True

    def _request_row(self, invoke: ElicitationInvoke) -> tuple[Any, ...]:
        arguments = invoke.approval.arguments if invoke.approval is not None else None
        return request_row(invoke, self._values_json(invoke.response_channel, arguments))

    def _values_json(self, channel: str, values: dict[str, Any] | None) -> str | None:
        return values_json(channel, values, self.record_values)

    def checkpoint(self) -> bool:
        """Copy committed WAL pages into the database file (fsyncs; blocks no writer). Never raises.

        Runs on its own connection, so a thread can checkpoint while another commits."""
        with self._checkpoint_lock:
            try:
                if self._closed:
                    return False
                if self._checkpoint_conn is None:
                    self._checkpoint_conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s,
                                                            autocommit=True, check_same_thread=False)
                self._checkpoint_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error as exc:
                self._complain("checkpoint", exc, level=logging.WARNING)
                return False
            return True

    # ---- reading (CLI) -----------------------------------------------------------------

    def entries(self, limit: int = 100, server: str | None = None) -> list[AuditEntry]:
        """The newest `limit` rows first, optionally of one server. Raises AuditLogError."""
        if limit < 0:
            raise ValueError("limit must be >= 0")
        where, args = ("WHERE server = ? ", (server, limit)) if server is not None else ("", (limit,))
        sql = f"SELECT {AUDIT_COLUMNS} FROM elicitations {where}ORDER BY created_at DESC, rowid DESC LIMIT ?"
        with self._lock:
            try:
                rows = self._readable().execute(sql, args).fetchall()
            except (sqlite3.Error, OSError) as exc:
                raise AuditLogError(f"cannot read the audit log {self.path}: {exc}") from exc
        return [audit_entry(row) for row in rows]

    def counts(self) -> dict[str, int]:
        """outcome -> number of rows, pending rows under "pending". Raises AuditLogError."""
        with self._lock:
            try:
                rows = self._readable().execute(
                    "SELECT COALESCE(outcome, ?), COUNT(*) FROM elicitations GROUP BY 1 ORDER BY 1",
                    (PENDING,),
                ).fetchall()
            except (sqlite3.Error, OSError) as exc:
                raise AuditLogError(f"cannot read the audit log {self.path}: {exc}") from exc
        return {str(outcome): int(count) for outcome, count in rows}

    # ---- lifecycle ---------------------------------------------------------------------

    @property
    def unrecorded(self) -> int:
        """How many record_* calls failed since this log was opened."""
        return self._unrecorded

    def close(self) -> None:
        self._closed = True  # first: a checkpoint() that starts now opens nothing new
        with self._checkpoint_lock:
            checkpointer, self._checkpoint_conn = self._checkpoint_conn, None
            self._close_quietly(checkpointer)
        with self._lock:
            conn, self._conn = self._conn, None
            self._close_quietly(conn)

    def _close_quietly(self, conn: sqlite3.Connection | None) -> None:
        if conn is None:
            return
        try:
            conn.close()
        except sqlite3.Error as exc:
            logger.warning("audit log %s: close failed: %s", self.path, exc)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ---- internals (callers hold self._lock) --------------------------------------------

    def _writable(self) -> sqlite3.Connection:
        if self._closed:
            raise AuditLogError("the audit log is closed")
        return self._connection()

    def _readable(self) -> sqlite3.Connection:
        if self._closed:
            raise AuditLogError(f"the audit log {self.path} is closed")
        try:
            return self._connection()
        except (sqlite3.Error, OSError) as exc:
            raise AuditLogError(f"cannot open the audit log {self.path}: {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """Create the directory (0700) and file (0600) if missing, set WAL + NORMAL, migrate."""
        # Small pages: a commit writes ~4 of them (row + 3 index entries) to the WAL, ~40% less
        # time than at the default 4096 (scripts/bench).
        conn = open_private_sqlite(self.path, "the audit log", self._busy_timeout_s, page_size=1024)
        try:
            if not self._auto_checkpoint:
                conn.execute("PRAGMA wal_autocheckpoint = 0")
            _migrate(conn, self.path)
        except BaseException:
            conn.close()
            raise
        return conn

    def _failed(self, op: str, exc: Exception) -> bool:
        self._unrecorded += 1
        self._unrecorded_since_ok += 1
        self._complain(op, exc)
        return False

    def _succeeded(self) -> bool:
        if self._unrecorded_since_ok:
            logger.warning("audit log %s is writable again; %d record(s) were lost", self.path,
                           self._unrecorded_since_ok)
            self._unrecorded_since_ok = 0
        return True

    def _complain(self, op: str, exc: Exception, level: int = logging.ERROR) -> None:
        """Log each distinct problem at most once per minute, with how often it was suppressed."""
        problem = f"{type(exc).__name__}: {exc}"
        self._complaints.log(level, ("audit", problem), "audit log %s: cannot %s: %s", self.path, op, problem)


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")  # two processes opening a new file at once migrate it once
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise AuditLogError(f"the audit log {path} has schema version {version}, newer than this "
                                f"elicitron's {SCHEMA_VERSION}")
        for step in range(version, SCHEMA_VERSION):
            for statement in _MIGRATIONS[step]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {step + 1}")
            logger.info("audit log %s: schema version %d", path, step + 1)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _marks(columns: str) -> str:
    return ", ".join("?" * (columns.count(",") + 1))


# The writes' statements, built once (main writes one outcome per request).
_INSERT_DECIDED: Final = (f"INSERT INTO elicitations ({AUDIT_COLUMNS}) VALUES ({_marks(AUDIT_COLUMNS)}) "
                          "ON CONFLICT (channel) DO NOTHING")
# A repeat of the same channel refreshes the request columns and keeps any outcome.
_UPSERT_REQUEST: Final = (
    f"INSERT INTO elicitations ({REQUEST_COLUMNS}) VALUES ({_marks(REQUEST_COLUMNS)}) "
    "ON CONFLICT (channel) DO UPDATE SET server = excluded.server, mode = excluded.mode, "
    "message = excluded.message, fields = excluded.fields, url = excluded.url, "
    "origin_window = excluded.origin_window, created_at = excluded.created_at, "
    "expires_at = excluded.expires_at, kind = excluded.kind, via = excluded.via, "
    "tool = excluded.tool, arguments = excluded.arguments")
_UPSERT_OUTCOME: Final = (
    f"INSERT INTO elicitations ({AUDIT_COLUMNS}) VALUES ({_marks(AUDIT_COLUMNS)}) "
    "ON CONFLICT (channel) DO UPDATE SET outcome = excluded.outcome, "
    "answer_window = excluded.answer_window, decided_at = excluded.decided_at, "
    "content = excluded.content, rule_id = excluded.rule_id, "
    "decision = excluded.decision, answer_window_name = excluded.answer_window_name, "
    "answer_device = excluded.answer_device, answer_device_id = excluded.answer_device_id, "
    "reason = excluded.reason WHERE elicitations.outcome IS NULL")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000

