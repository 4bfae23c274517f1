"""The store: what outlives a request (remembered rules and approvals, the audit log), behind one
interface with SQLite behind it.

interface.py     the interface (Store, RuleTable, AuditTable; DeviceTable and QuestionTable defined,
                 not kept yet) and why it is async; records.py the typed records it takes and gives
factory.py       open_store: the backend the config's `store` URL names (SQLite only, for now)
sqlite.py        the SQLite backend: sqlite_audit.py and sqlite_rules.py hold its SQL, owner.py the
                 lock that makes the running main the owner of the rule store
"""
