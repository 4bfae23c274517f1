"""The writes a PostgreSQL store could not take yet, kept on this machine's disk ("the spool"), so
what main decided while its store was away outlives main itself (a clean stop, kill -9).

One SQLite file per main and store (`spool_path`: in main's private state dir, named by a digest
of the main's connection file and the store URL without its password; 0600 in a 0700 directory),
one row per kept write: its order (`seq`), its `kind` (which idempotent write it is:
postgres_backlog.py), a line saying what it is (for the log) and its JSON payload. Nothing else:
the spool never holds the store's password.

Durability is the SQLite audit log's (sqlite_audit.py): WAL with synchronous=NORMAL, each `add`
its own transaction, so a row `add` returned for survives SIGKILL of main (not a power loss); a
commit is a write to the WAL, no fsync (~20 us). The backlog adds a write here before the decision
is reported to anyone, and removes it once the store has it.

The file is opened when main starts if it is there (what the last run kept), else when the first
write is kept; a clean stop with nothing kept removes it. A file that cannot be read (not a
database, a foreign table) is moved aside to `<name>.unreadable`, said in one line naming both,
and main goes on with a new one; a row that cannot be read is dropped with one line naming it.
Nothing here raises: the spool must never take main down.
"""

import hashlib
import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

from main_process.private_files import open_private_sqlite
from main_process.store.url import without_password

logger = logging.getLogger(__name__)

SPOOL_DIR: Final = "store-spool"
_TABLE: Final = ("CREATE TABLE IF NOT EXISTS kept (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, "
                 "what TEXT NOT NULL, payload TEXT NOT NULL, kept_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER)))")
_TIMEOUT_S: Final = 1.0


def spool_path(state_dir: Path, connection: Path, store_url: str) -> Path:
    """The spool of the main whose connection file is `connection`, on the store `store_url`: the
    same file every time that main starts on that store (another store's writes are never made here)."""
    key = f"{connection.resolve()}\n{without_password(store_url)}"
    return state_dir / SPOOL_DIR / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.sqlite3"


@dataclass(frozen=True)
class Kept:
    """One kept write: `seq` its place in the spool (None: in memory only, the spool could not take it)."""

    seq: int | None
    kind: str
    what: str
    payload: dict[str, Any]


class Spool:
    """The spool file at `path` (None: keep in memory only, for a process that never decides)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._broken = False  # a write failed: said once, until one succeeds

    @property
    def shown(self) -> str:
        return str(self.path) if self.path is not None else "memory"

    def load(self) -> list[Kept]:
        """What the last run kept, oldest first (nothing when there is no file)."""
        if self.path is None or not self.path.exists():
            return []
        try:
            conn = self._connection()
            rows = conn.execute("SELECT seq, kind, what, payload FROM kept ORDER BY seq").fetchall()
        except (sqlite3.Error, OSError) as exc:
            self._set_aside(exc)
            return []
        kept = []
        for seq, kind, what, payload in rows:
            try:
                decoded = msgspec.json.decode(payload, type=dict[str, Any])
            except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
                logger.error("store spool %s: kept write #%s (%s) is unreadable (%s): dropped", self.path, seq,
                             str(what)[:80], exc)
                self.remove(int(seq))
                continue
            kept.append(Kept(int(seq), str(kind), str(what), decoded))
        return kept

    def add(self, kind: str, what: str, payload: dict[str, Any]) -> Kept:
        """Keep a write, committed before this returns; in memory only if the file refuses (said once)."""
        if self.path is not None:
            try:
                cursor = self._connection().execute("INSERT INTO kept (kind, what, payload) VALUES (?, ?, ?)",
                                                    (kind, what, msgspec.json.encode(payload).decode()))
            except (sqlite3.Error, OSError) as exc:
                if not self._broken:
                    logger.error("store spool %s: cannot keep a write on disk (%s): kept in memory only, "
                                 "lost if main stops before the store is back", self.path, exc)
                self._broken = True
            else:
                self._broken = False
                assert cursor.lastrowid is not None
                return Kept(cursor.lastrowid, kind, what, payload)
        return Kept(None, kind, what, payload)

    def remove(self, seq: int | None) -> None:
        """The store has this write: it leaves the spool."""
        if seq is None or self._conn is None:
            return
        try:
            self._conn.execute("DELETE FROM kept WHERE seq = ?", (seq,))
        except sqlite3.Error as exc:  # made again at the next start: every kept write is idempotent
            logger.warning("store spool %s: cannot remove kept write #%d (%s)", self.path, seq, exc)

    def close(self) -> int:
        """Close the file: removed when it keeps nothing. Returns how many writes it still keeps."""
        conn, self._conn = self._conn, None
        if conn is None or self.path is None:
            return 0
        try:
            left = int(conn.execute("SELECT count(*) FROM kept").fetchone()[0])
        except sqlite3.Error:
            left = -1  # unknown: the file stays
        conn.close()
        if left == 0:
            for path in (self.path, self.path.with_name(self.path.name + "-wal"),
                         self.path.with_name(self.path.name + "-shm")):
                path.unlink(missing_ok=True)
        return max(left, 0)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            assert self.path is not None
            conn = open_private_sqlite(self.path, "store spool", _TIMEOUT_S)
            try:
                conn.execute(_TABLE)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _set_aside(self, exc: BaseException) -> None:
        """An unreadable file: moved aside (kept for a person to look at), said in one line."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        assert self.path is not None
        aside = self.path.with_name(self.path.name + ".unreadable")
        try:
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
        except OSError as moved:
            logger.error("store spool %s is unreadable (%s): the writes it kept are not made, and it cannot be "
                         "moved aside (%s): what is kept from now on stays in memory", self.path, exc, moved)
            self.path = None
            return
        logger.error("store spool %s is unreadable (%s): the writes it kept are not made; moved to %s, "
                     "a new spool is used", self.path, exc, aside)
