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
An inbox notification (schema 6) names the sending process and the row's new state, one per row
changed; rule notifications carry nothing, and PostgreSQL folds identical ones of one transaction
into one. A trigger sends nothing when its statement changed no row (so a main's periodic sweep
wakes nobody when it finds nothing).
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
    # 3: one inbox for the mains of a store (postgres_inbox.py): the mains and their leases, every
    # request a window may answer, and who answered it; triggers NOTIFY (a wake-up only, no payload)
    # when a request opens or its state changes, and when a stored rule changes
    (
        """
        CREATE TABLE mains (
            main_id      text PRIMARY KEY,      -- the main's session (a uuid7, new at each start)
            machine      text NOT NULL,         -- config "machine"
            pid          integer NOT NULL,      -- the main's pid on its machine
            backend_pid  integer,               -- its LISTEN connection's server process: gone = main gone
            started_at   bigint NOT NULL,       -- epoch ms
            lease_until  timestamptz NOT NULL   -- renewed every few seconds; past it the main is gone
        )
        """,
        """
        CREATE TABLE open_requests (
            channel         text PRIMARY KEY,   -- the request's responseChannel (uuid7)
            main_id         text NOT NULL,      -- the main that holds it (its server's request)
            machine         text NOT NULL,      -- that main's machine
            server          text NOT NULL,
            invoke          bytea NOT NULL,     -- the invoke body as that main's windows got it
            created_at      bigint NOT NULL,    -- epoch ms
            expires_at      bigint,             -- epoch ms
            state           text NOT NULL DEFAULT 'open',  -- 'open', 'answered', an unanswered outcome, 'orphaned'
            action          text,               -- answered: accept | decline | cancel
            answer          jsonb,              -- answered: the values, until the holding main took them
            answer_window   text,               -- the window that answered (its id)
            answer_machine  text,               -- the machine of the main that window is attached to
            approver        text,               -- who answered: the window's or the paired device's name
            decided_at      bigint              -- epoch ms
        )
        """,
        "CREATE INDEX open_requests_open ON open_requests (created_at) WHERE state = 'open'",
        "CREATE INDEX open_requests_by_main ON open_requests (main_id) WHERE state = 'open'",
        "CREATE INDEX open_requests_ended ON open_requests (decided_at) WHERE state <> 'open'",
        """
        CREATE FUNCTION elicitron_inbox_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('elicitron_inbox', ''); RETURN NULL; END $$
        """,
        """
        CREATE TRIGGER open_requests_opened AFTER INSERT ON open_requests
        FOR EACH ROW EXECUTE FUNCTION elicitron_inbox_changed()
        """,
        """
        CREATE TRIGGER open_requests_state AFTER UPDATE OF state ON open_requests
        FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION elicitron_inbox_changed()
        """,
        """
        CREATE FUNCTION elicitron_rules_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('elicitron_rules', ''); RETURN NULL; END $$
        """,
        """
        CREATE TRIGGER rules_changed AFTER INSERT OR UPDATE OR DELETE ON rules
        FOR EACH ROW EXECUTE FUNCTION elicitron_rules_changed()
        """,
        "ALTER TABLE elicitations ADD COLUMN answer_machine text",  # the answering window's main's machine
        "ALTER TABLE elicitations ADD COLUMN answer_user text",  # a desktop window's OS user, when it said
    ),
    # 4: quorum approvals across mains (postgres_quorum.py): one row per request and person, so one
    # person counts once whichever main their window is on; the audit row keeps every approver
    (
        """
        CREATE TABLE quorum_approvals (
            channel      text NOT NULL REFERENCES open_requests (channel) ON DELETE CASCADE,
            person       text NOT NULL,      -- the approver as the rule lists them
            machine      text NOT NULL,      -- the machine of the main their window is attached to
            window_id    text NOT NULL,      -- the window that approved
            approved_at  bigint NOT NULL,    -- epoch ms
            seq          bigint GENERATED ALWAYS AS IDENTITY,  -- the order of approvals
            PRIMARY KEY (channel, person)
        )
        """,
        "ALTER TABLE elicitations ADD COLUMN approvers jsonb",  # a quorum: [{person, machine}] in order
    ),
    # 5: when a main last (re)joined on its LISTEN connection: a connection made before the server
    # restarted is gone for every main, so it says nothing about that main (postgres_inbox.py)
    (
        "ALTER TABLE mains ADD COLUMN joined_at timestamptz",
    ),
    # 6: an inbox notification says which process's transaction sent it (its connections' setting
    # `elicitron.sender`, postgres_connect.py: a main skips the wake-ups of its own writes) and which
    # row became what: a JSON array [sender, channel, state, answer_window, approver, machine]
    # (postgres_inbox.py), the approver cut to stay far below NOTIFY's 8,000 bytes
    (
        """
        CREATE OR REPLACE FUNCTION elicitron_inbox_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('elicitron_inbox', json_build_array(
            coalesce(current_setting('elicitron.sender', true), ''), NEW.channel, NEW.state, NEW.answer_window,
            left(NEW.approver, 200), NEW.machine)::text);
        RETURN NULL; END $$
        """,
    ),
    # 7: grants (consent/grants.py): a tool rule's coverage of arguments (NULL: any, as every tool
    # rule before), single use, and the digest of what it covers (a row that does not match it is refused)
    (
        "ALTER TABLE rules ADD COLUMN arguments jsonb",
        "ALTER TABLE rules ADD COLUMN single_use boolean NOT NULL DEFAULT false",
        "ALTER TABLE rules ADD COLUMN covers text",
    ),
    # 8: which requests are questions of `elicitron ask`: when their main is gone they stay open
    # (any main's windows may answer, the asker takes the answer on the main it re-attaches to);
    # paired web devices every main of the store accepts (main_process/device_mirror.py)
    (
        "ALTER TABLE open_requests ADD COLUMN kind text",  # the invoke's kind; NULL: a server's elicitation
        "ALTER TABLE open_requests ADD COLUMN asked_on text",  # a question: its asker's responseChannel
        "CREATE INDEX open_requests_asked_on ON open_requests (asked_on) WHERE asked_on IS NOT NULL",
        """
        CREATE TABLE web_devices (
            id            text PRIMARY KEY,   -- random, as the web window made it
            name          text NOT NULL,
            token_sha256  text NOT NULL,      -- the credential's hash; never the credential
            paired_at     double precision NOT NULL,  -- epoch seconds
            machine       text NOT NULL,      -- the machine of the main it was paired through
            revoked_at    bigint              -- epoch ms; a revoked id never comes back
        )
        """,
    ),
    # 9: a row that opens tells its invoke body too (base64, a 7th element; NULL once the row is
    # not open, or over 5,000 bytes: NOTIFY takes under 8,000): the other mains show the copy with
    # no read (postgres_inbox.py). Every main reads that body anyway; an answer's values stay out.
    (
        """
        CREATE OR REPLACE FUNCTION elicitron_inbox_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE note text; told text;
        BEGIN
            note := json_build_array(coalesce(current_setting('elicitron.sender', true), ''), NEW.channel,
                NEW.state, NEW.answer_window, left(NEW.approver, 200), NEW.machine)::text;
            IF NEW.state = 'open' AND octet_length(NEW.invoke) <= 5000 THEN
                told := json_build_array(coalesce(current_setting('elicitron.sender', true), ''), NEW.channel,
                    NEW.state, NEW.answer_window, left(NEW.approver, 200), NEW.machine,
                    encode(NEW.invoke, 'base64'))::text;
                IF octet_length(told) < 7900 THEN note := told; END IF;  -- a long machine name: no invoke
            END IF;
            PERFORM pg_notify('elicitron_inbox', note);
            RETURN NULL;
        END $$
        """,
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
