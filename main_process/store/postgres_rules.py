"""The PostgreSQL backend's rule store (interface.py: RuleTable): remembered answers and tool
approvals that outlive main, one row per rule keyed by its id (rows.py has the columns, as SQLite).

`add` is one upsert and `remove` one DELETE, so a rule is committed once they return True. Writes
never raise (they log and return False: main then keeps the rule for this session); `load` raises
RuleStoreError. `load` deletes expired rules and reads the rest in one transaction.
"""

import logging
from collections.abc import Iterable
from typing import Final

import msgspec
import psycopg

from main_process.consent.rules import Rule
from main_process.store.postgres_connect import Database
from main_process.store.rows import rule_from_row, rule_row
from shared.errors import RuleStoreError, StoreUnavailableError

logger = logging.getLogger(__name__)

_COLUMNS: Final = ("id, server, tool, decision, question, message, fields, action, content, scope, expires_at, "
                   "created_at, created_by, party, identity, arguments, single_use, covers")
_VALUES: Final = "%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s"
_SELECT: Final = ("id, server, tool, decision, question, message, fields::text, action, content::text, scope, "
                  "expires_at, created_at, created_by, party, identity, arguments::text, single_use, covers")
_ADD: Final = (f"INSERT INTO rules ({_COLUMNS}) VALUES ({_VALUES}) ON CONFLICT (id) DO UPDATE SET "
               "server = excluded.server, tool = excluded.tool, decision = excluded.decision, "
               "question = excluded.question, message = excluded.message, fields = excluded.fields, "
               "action = excluded.action, content = excluded.content, scope = excluded.scope, "
               "expires_at = excluded.expires_at, created_at = excluded.created_at, "
               "created_by = excluded.created_by, party = excluded.party, identity = excluded.identity, "
               "arguments = excluded.arguments, single_use = excluded.single_use, covers = excluded.covers")


class PgRules:
    """RuleTable on the `rules` table of a PostgreSQL store."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def load(self, now_ms: int) -> list[Rule]:
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn, conn.transaction():
                await conn.execute("DELETE FROM rules WHERE expires_at IS NOT NULL AND expires_at <= %s", (now_ms,))
                rows = await (await conn.execute(f"SELECT {_SELECT} FROM rules ORDER BY created_at, id")).fetchall()
        except StoreUnavailableError as exc:
            raise RuleStoreError(str(exc)) from None
        except psycopg.Error as exc:
            self._db.failed(exc)
            raise RuleStoreError(f"cannot read the rules: {self._db.explain(exc)}") from None
        self._db.succeeded()
        rules = []
        for row in rows:
            try:
                rules.append(rule_from_row(row))
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
                logger.warning("rule store %s: skipped unreadable rule %r: %s", self._db.shown, row[0], exc)
        return rules

    async def add(self, rule: Rule) -> bool:
        if rule.scope == "session" or rule.source != "user":
            raise ValueError("only user rules that outlive main are stored")
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                await conn.execute(_ADD, rule_row(rule))
        except (psycopg.Error, StoreUnavailableError) as exc:
            return self._failed("save a rule", exc)
        self._db.succeeded()
        return True

    async def remove(self, rule_ids: Iterable[str]) -> bool:
        ids = list(rule_ids)
        if not ids:
            return True
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                await conn.execute("DELETE FROM rules WHERE id = ANY(%s)", (ids,))
        except (psycopg.Error, StoreUnavailableError) as exc:
            return self._failed("remove rules", exc)
        self._db.succeeded()
        return True

    async def take(self, rule_id: str) -> bool | None:
        """One DELETE: of two mains using the same single-use grant, only one deletes its row."""
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                cursor = await conn.execute("DELETE FROM rules WHERE id = %s", (rule_id,))
        except (psycopg.Error, StoreUnavailableError) as exc:
            self._failed(f"use up rule {rule_id}", exc)
            return None
        self._db.succeeded()
        return cursor.rowcount == 1

    def _failed(self, what: str, exc: psycopg.Error | StoreUnavailableError) -> bool:
        if isinstance(exc, psycopg.Error):
            self._db.failed(exc)
            logger.error("rule store %s: cannot %s: %s", self._db.shown, what, self._db.explain(exc))
        else:
            logger.error("rule store: cannot %s: %s", what, exc)
        return False
