"""The store: what outlives a request (remembered rules and approvals, the audit log; on a store
many mains share, their open requests and questions too: `SharedInbox`, and paired web devices:
`DeviceTable`), behind one
interface with two backends: SQLite (the default: one machine, nothing to install) and PostgreSQL
(a database a team's mains share).

interface.py     the interface (Store, RuleTable, AuditTable, SharedInbox, DeviceTable) and why it
                 is async; records.py the typed records it takes and gives;
                 rows.py those records as the columns both backends' SQL has
factory.py       open_store: the backend a store URL names; chosen_store: --store, ELICITRON_STORE or
                 the config's `store`; url.py shows a URL with its password redacted, everywhere
sqlite.py        the SQLite backend: sqlite_audit.py and sqlite_rules.py hold its SQL, owner.py the
                 lock that makes the running main the owner of the rule store
postgres.py      the PostgreSQL backend (psycopg 3, async pool; loaded only for such a store):
                 postgres_connect.py reaches it (password, pool, errors that say what to do),
                 postgres_schema.py its numbered migrations, postgres_audit.py and
                 postgres_rules.py the SQL of its tables, postgres_inbox.py the shared inbox
                 (every main's open requests and questions, claims, leases), postgres_listen.py
                 its wake-ups, postgres_devices.py the paired web devices every main mirrors;
                 postgres_backlog.py what main decided while the store was away, kept in
                 spool.py's file on this machine's disk until the store has it
"""
