"""The PostgreSQL store's schema: numbered migrations, applied when a main opens the store.

Our own dozen lines rather than a migration tool: the schema is a handful of tables that only
elicitron writes, and every main applies what is missing at start on the connection it already
has. Alembic needs SQLAlchemy (a large import on main's start, sync, for no model of ours);
yoyo-migrations opens its own sync connection and locks with a table it polls. Here:
- `schema_migrations` has one row per applied version (and when);
- the whole run is one transaction that first takes `pg_advisory_xact_lock(LOCK)`: several mains
  starting at once on one database apply each migration once, the others wait on the lock and then
  find nothing to do; a failed migration rolls back whole (PostgreSQL's DDL is transactional);
- a database migrated by a newer elicitron (a version above ours) is refused, not written to.

To change the schema, append a tuple of statements to MIGRATIONS; never edit one that shipped.

Keyed for many mains on one database (issue 35): an audit row names the `machine` of the main
that asked (the config's `"machine"`, default the host name) and is keyed by its channel (a uuid7,
unique across mains); a rule by its id (a uuid), so one rule applies on every main of the store.
"""

import logging
from typing import Any, Final

import psycopg

from shared.errors import StoreUnavailableError

logger = logging.getLogger(__name__)

LOCK: Final = 0x656C_6963_6974_726F  # "elicitro": one advisory lock key for the schema of this store

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 1: remembered rules and the audit log, as the SQLite store has them (rows.py), plus `machine`
    (
        """
        CREATE TABLE rules (
            id          text PRIMARY KEY,
            server      text NOT NULL,
            tool        text,              -- a tool rule: the tool (exact)
            decision    text,              -- a tool rule: 'allow' | 'deny'
            question    text,              -- an answer rule: the question key (rules.question_key)
            message     text,              -- an answer rule: the message as it was asked (to show)
            fields      jsonb,             -- an answer rule: the schema's property names
            action      text,              -- an answer rule: 'accept' | 'decline'
            content     jsonb,             -- an answer rule: the accepted values
            scope       text NOT NULL,     -- 'always' | 'until'
            expires_at  bigint,            -- epoch ms, scope 'until'
            created_at  bigint NOT NULL,   -- epoch ms
            created_by  text NOT NULL,     -- the window that made it ("name (window id)")
            party       text,              -- 'server' | 'asker' (whose question)
            identity    text               -- a server's rule: server_identity when made
        )
        """,
        "CREATE INDEX rules_by_server ON rules (server)",
        """
        CREATE TABLE elicitations (
            channel            text PRIMARY KEY,  -- the one-time responseChannel (uuid7)
            machine            text NOT NULL,     -- the main that asked (config "machine")
            server             text NOT NULL,     -- '' when only the outcome was recorded
            mode               text NOT NULL,     -- 'form' | 'url' ('' as for server)
            message            text NOT NULL,
            fields             jsonb,             -- form: requested property names
            url                text,              -- url: the URL the user was asked to open
            origin_window      text,              -- window whose tool call led to the request
            created_at         bigint NOT NULL,   -- epoch ms
            expires_at         bigint,            -- epoch ms
            kind               text,              -- NULL: a server's elicitation
            via                text,              -- the MCP host whose call led to it
            tool               text,              -- approvals: the tool asked about
            arguments          jsonb,             -- approvals, only with auditValues
            outcome            text,              -- NULL while pending
            answer_window      text,              -- window that answered
            decided_at         bigint,            -- epoch ms
            content            jsonb,             -- answered values, only with auditValues
            rule_id            text,              -- answered by this rule, not by a window
            decision           text,              -- approvals: allow-once | allow-session | allow-always | deny
            answer_window_name text,              -- the answering window's name then
            answer_device      text,              -- the paired web device's name then
            answer_device_id   text               -- and its id
        )
        """,
        "CREATE INDEX elicitations_by_created ON elicitations (created_at)",
        "CREATE INDEX elicitations_by_server ON elicitations (server, created_at)",
        "CREATE INDEX elicitations_pending ON elicitations (machine, created_at) WHERE outcome IS NULL",
    ),
    # 2: why a call was denied (the reason the person typed, or the forbidding policy's), as SQLite's 6
    (
        "ALTER TABLE elicitations ADD COLUMN reason text",
    ),
)


async def migrate(conn: psycopg.AsyncConnection[Any], shown: str) -> int:
    """Apply the missing migrations (one transaction, under the advisory lock); the schema version
    now. Raises StoreUnavailableError for a newer schema; psycopg.Error when the database refuses."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK,))
        await conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                           "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        cursor = await conn.execute("SELECT COALESCE(max(version), 0) FROM schema_migrations")
        row = await cursor.fetchone()
        current = int(row[0]) if row is not None else 0
        if current > len(MIGRATIONS):
            raise StoreUnavailableError(f"the store {shown} has schema version {current}, newer than this "
                                        f"elicitron's {len(MIGRATIONS)}: upgrade elicitron on this machine")
        for version in range(current + 1, len(MIGRATIONS) + 1):
            for statement in MIGRATIONS[version - 1]:
                await conn.execute(statement)
            await conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
            logger.info("store %s: schema version %d applied", shown, version)
    return len(MIGRATIONS)
