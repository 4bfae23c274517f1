"""The PostgreSQL store's paired web devices (interface.py: DeviceTable): the `web_devices` table
(postgres_schema.py, schema 8), what every main of the store mirrors into its web dir's
devices.json (device_mirror.py). A revoked device keeps its row, marked, so no main's stale file
can bring it back; only the credential's hash is stored, as in devices.json.
"""

import logging
from collections.abc import Iterable, Sequence
from typing import Any, Final

import psycopg

from main_process.log_limiter import RateLimitedLog
from main_process.store.postgres_connect import Database
from shared.errors import StoreUnavailableError

logger = logging.getLogger(__name__)

_ENTRIES: Final = "SELECT id, name, token_sha256, paired_at, revoked_at IS NOT NULL FROM web_devices ORDER BY paired_at"
_ADD: Final = ("INSERT INTO web_devices (id, name, token_sha256, paired_at, machine) "
               "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::float8[], %s::text[]) "
               "ON CONFLICT (id) DO NOTHING")
_REVOKE: Final = ("UPDATE web_devices SET revoked_at = (extract(epoch FROM now()) * 1000)::bigint "
                  "WHERE id = ANY(%s) AND revoked_at IS NULL")


class PgDevices:
    def __init__(self, database: Database, machine: str) -> None:
        self._db = database
        self._machine = machine
        self._complaints = RateLimitedLog(logger, interval_s=60.0)

    async def entries(self) -> tuple[list[dict[str, object]], set[str]] | None:
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                rows = await (await conn.execute(_ENTRIES)).fetchall()
        except (psycopg.Error, StoreUnavailableError) as exc:
            self._failed("read the paired web devices", exc)
            return None
        self._db.succeeded()
        paired = [{"id": r[0], "name": r[1], "tokenSha256": r[2], "pairedAt": float(r[3])} for r in rows if not r[4]]
        return paired, {str(r[0]) for r in rows if r[4]}

    async def add(self, entries: Sequence[dict[str, object]]) -> bool:
        if not entries:
            return True
        columns: tuple[list[Any], ...] = ([], [], [], [], [])
        for entry in entries:
            paired_at = entry.get("pairedAt", 0)
            values = (str(entry.get("id")), str(entry.get("name", "")), str(entry.get("tokenSha256", "")),
                      float(paired_at) if isinstance(paired_at, int | float) else 0.0, self._machine)
            for column, value in zip(columns, values, strict=True):
                column.append(value)
        return await self._write("store paired web devices", _ADD, columns)

    async def revoke(self, device_ids: Iterable[str]) -> bool:
        ids = list(device_ids)
        return not ids or await self._write("revoke paired web devices", _REVOKE, (ids,))

    async def _write(self, what: str, sql: Any, args: tuple[Any, ...]) -> bool:
        if self._db.away:
            return False  # kept by the caller and tried again: no wait on a dead server
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                await conn.execute(sql, args)
        except (psycopg.Error, StoreUnavailableError) as exc:
            self._failed(what, exc)
            return False
        self._db.succeeded()
        return True

    def _failed(self, what: str, exc: psycopg.Error | StoreUnavailableError) -> None:
        problem = self._db.failure_text(exc)
        self._complaints.log(logging.ERROR, ("devices", what), "paired web devices: cannot %s: %s", what, problem)
