"""The PostgreSQL backend of the store interface (interface.py): a database a team's mains may share
(`"elicitron": {"store": "postgresql://…"}`, `elicitron main --store URL`, ELICITRON_STORE).

postgres_connect.py reaches the database (password, pool, one line when it cannot), postgres_schema.py
migrates it, postgres_rules.py and postgres_audit.py hold the SQL of the two tables, postgres_inbox.py
the shared inbox (every main's open requests, who answered them) and postgres_listen.py its
wake-ups, postgres_devices.py the paired web devices. Unlike SQLite,
these coroutines suspend (a network round trip): callers await a write, or start it with
`Tasks.start_now` and go on in its callback, as interface.py says.

A main that cannot reach its store at start does not start (`open` raises StoreUnavailableError,
one line). One whose store goes away later (a restart, a cut connection) never waits on it: `status`
says it is unreachable and why (in main's msgStatus reply, with the mains on the store), main decides
its own requests from its own windows meanwhile, and what it decided is kept and written once the
store is back, each row once (postgres_backlog.py); it then renews its lease, LISTENs again and
catches up with a query (postgres_listen.py, consent/shared_requests.py). What is kept is on this
machine's disk (`spool`: spool.py) before anyone hears of the decision: a main stopped or killed
before the store is back makes those writes when it next starts on this store (`open`).
"""

import logging
from pathlib import Path

from main_process.store.postgres_audit import PgAudit
from main_process.store.postgres_backlog import Backlog
from main_process.store.postgres_connect import Database
from main_process.store.postgres_devices import PgDevices
from main_process.store.postgres_inbox import PgInbox
from main_process.store.postgres_rules import PgRules
from main_process.store.spool import Spool
from shared.messages import StoreState

logger = logging.getLogger(__name__)


class PgStore:
    """The Store on one PostgreSQL database; `machine` names this main on the audit rows it writes;
    `spool` the file what is decided while the store is away is kept in (None: in memory, for a
    process that decides nothing: the CLI)."""

    def __init__(self, url: str, *, machine: str, record_values: bool = False, spool: Path | None = None) -> None:
        self._db = Database(url)
        self.machine = machine
        self._backlog = Backlog(self._db, Spool(spool))  # what was decided while the store was away, to write when back
        self._rules = PgRules(self._db)
        self._audit = PgAudit(self._db, machine, record_values, self._backlog)
        self._inbox = PgInbox(self._db, machine, record_values, self._backlog)
        self._devices = PgDevices(self._db, machine)

    @property
    def rules(self) -> PgRules:
        return self._rules

    @property
    def audit(self) -> PgAudit:
        return self._audit

    @property
    def inbox(self) -> PgInbox:
        return self._inbox

    @property
    def devices(self) -> PgDevices:
        return self._devices

    @property
    def description(self) -> str:
        return f"{self._db.shown} (PostgreSQL, machine {self.machine})"

    async def open(self) -> None:
        await self._db.pool()
        if self._backlog.load():  # what this main's last run decided while the store was away
            self._backlog.replay()

    async def claim(self, connection: Path) -> None:
        pass  # nothing to own: every main of the store changes it (the inbox and rules are shared)

    def status(self) -> StoreState:
        return StoreState(kind="PostgreSQL", location=self._db.shown, reachable=self._db.reachable,
                          problem=self._db.problem, machine=self.machine, mains=list(self._inbox.mains),
                          waiting=len(self._backlog))

    async def close(self) -> None:
        await self._backlog.close()
        await self._db.close()
