"""The SQLite backend's rule store: remembered answers and tool approvals that outlive main.

`<user data dir>/elicitron/rules.sqlite3`, beside the audit log, one row per rule: what it matches,
what it decides, who made it, when, its scope and expiry. Only rules meant to outlive main are
here (scope "always" and "until"); "this session" rules live in main's memory and end with it.
Each row also says whose question it answers (`party`) and which program a server's rule was given
to (`identity`, a digest: rules.py); rows of schema 1 have neither and are bound by main at load.

Durability like the audit log: WAL with synchronous=NORMAL and one transaction per change, so a
rule is in the WAL file once `add` returns True and survives SIGKILL of main. The directory is
created 0700 and the file 0600: remembered answers are what the user typed.

Failure policy: main must keep running when the disk does not cooperate. `add` and `remove` catch
`sqlite3.Error`/`OSError`, log, and return False (main then keeps the rule for this session and
says so). `load` raises `RuleStoreError` instead (main then starts without remembered rules; the
CLI says why it cannot list them). Reached through `sqlite.SqliteStore` (the store interface).
"""

import logging
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import msgspec

from main_process.consent.rules import Rule
from main_process.private_files import open_private_sqlite
from main_process.store.rows import RULE_COLUMN_COUNT, RULE_COLUMNS, rule_from_row, rule_row
from shared.errors import RuleStoreError

logger = logging.getLogger(__name__)

FILENAME: Final = "rules.sqlite3"
SCHEMA_VERSION: Final = 3
_SCHEMA: Final = (
    """
    CREATE TABLE rules (
        id          TEXT PRIMARY KEY,
        server      TEXT NOT NULL,
        tool        TEXT,              -- a tool rule: the tool (exact)
        decision    TEXT,              -- a tool rule: 'allow' | 'deny'
        question    TEXT,              -- an answer rule: the question key (rules.question_key)
        message     TEXT,              -- an answer rule: the message as it was asked (to show)
        fields      TEXT,              -- an answer rule: JSON list of the schema's property names
        action      TEXT,              -- an answer rule: 'accept' | 'decline'
        content     TEXT,              -- an answer rule: JSON of the accepted values
        scope       TEXT NOT NULL,     -- 'always' | 'until'
        expires_at  INTEGER,           -- epoch ms, scope 'until'
        created_at  INTEGER NOT NULL,  -- epoch ms
        created_by  TEXT NOT NULL,     -- the window that made it ("name (window id)")
        party       TEXT,              -- 'server' | 'asker' (whose question); NULL: stored by schema 1
        identity    TEXT               -- a server's rule: server_identity when made; NULL: not bound
    )
    """,
    "CREATE INDEX rules_by_server ON rules (server)",
)
# Schema 1 had no party and no identity: its rules are bound by main at its first load (consent.py).
_FROM_1: Final = ("ALTER TABLE rules ADD COLUMN party TEXT", "ALTER TABLE rules ADD COLUMN identity TEXT")
# Schema 3 adds grants (consent/grants.py): a tool rule's coverage of arguments (JSON; NULL: any, as
# every tool rule before), single use, and the digest of what it covers.
_FROM_2: Final = ("ALTER TABLE rules ADD COLUMN arguments TEXT",
                  "ALTER TABLE rules ADD COLUMN single_use INTEGER NOT NULL DEFAULT 0",
                  "ALTER TABLE rules ADD COLUMN covers TEXT")
_UPGRADES: Final = {0: (*_SCHEMA, *_FROM_2), 1: (*_FROM_1, *_FROM_2), 2: _FROM_2}


def path_beside(audit_path: Path) -> Path:
    return audit_path.with_name(FILENAME)


class SqliteRuleStore:
    """One SQLite file of rules. Thread-safe; `add`/`remove` never raise."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    # ---- reading -----------------------------------------------------------------------

    def load(self, now_ms: int) -> list[Rule]:
        """Every stored rule that has not expired, oldest first; expired ones are deleted.
        Raises RuleStoreError when the file cannot be opened or read."""
        with self._lock:
            try:
                conn = self._connection()
                conn.execute("DELETE FROM rules WHERE expires_at IS NOT NULL AND expires_at <= ?", (now_ms,))
                rows = conn.execute(f"SELECT {RULE_COLUMNS} FROM rules ORDER BY created_at, id").fetchall()
            except (sqlite3.Error, OSError) as exc:
                raise RuleStoreError(f"cannot read the rule store {self.path}: {exc}") from exc
        rules = []
        for row in rows:
            try:
                rules.append(rule_from_row(row))
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
                logger.warning("rule store %s: skipped unreadable rule %r: %s", self.path, row[0], exc)
        return rules

    # ---- writing -----------------------------------------------------------------------

    def add(self, rule: Rule) -> bool:
        """Insert (or replace) one rule; True once it is committed."""
        if rule.scope == "session" or rule.source != "user":
            raise ValueError("only user rules that outlive main are stored")
        return self._write("save a rule", [(
            f"INSERT OR REPLACE INTO rules ({RULE_COLUMNS}) VALUES ({', '.join('?' * RULE_COLUMN_COUNT)})", rule_row(rule))])

    def remove(self, rule_ids: Iterable[str]) -> bool:
        ids = [(rule_id,) for rule_id in rule_ids]
        if not ids:
            return True
        return self._write("remove rules", [("DELETE FROM rules WHERE id = ?", row) for row in ids])

    def take(self, rule_id: str) -> bool | None:
        """Delete one rule as it is used: True if this deleted it, False if it was gone, None on an error."""
        with self._lock:
            try:
                deleted = self._connection().execute("DELETE FROM rules WHERE id = ?", (rule_id,)).rowcount
            except (sqlite3.Error, OSError) as exc:
                logger.error("rule store %s: cannot use up rule %s: %s", self.path, rule_id, exc)
                return None
        return deleted == 1

    def _write(self, what: str, statements: list[tuple[str, tuple[Any, ...]]]) -> bool:
        with self._lock:
            try:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for sql, args in statements:
                        conn.execute(sql, args)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, OSError) as exc:
                logger.error("rule store %s: cannot %s: %s", self.path, what, exc)
                return False
        return True

    # ---- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error as exc:
                logger.warning("rule store %s: close failed: %s", self.path, exc)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        conn = open_private_sqlite(self.path, "the rule store", 1.0)
        try:
            conn.execute("BEGIN IMMEDIATE")  # two processes opening a new file create it once
            try:
                version = int(conn.execute("PRAGMA user_version").fetchone()[0])
                if version > SCHEMA_VERSION:
                    raise RuleStoreError(f"the rule store {self.path} has schema version {version}, newer than "
                                         f"this elicitron's {SCHEMA_VERSION}")
                if version < SCHEMA_VERSION:
                    for statement in _UPGRADES[version]:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException:
            conn.close()
            raise
        return conn
