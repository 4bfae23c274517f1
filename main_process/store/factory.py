"""Which backend a store URL names (the config's `"elicitron": {"store": URL}`): one place decides.

Only SQLite exists now: no `store`, or `"sqlite:"`, is the SQLite store in the user data dir.
Anything else is refused when the config is read, with a sentence saying what is supported. A
new backend is a module implementing interface.Store and one branch in `open_store`.
"""

from pathlib import Path
from typing import Final

import platformdirs

from main_process.store.interface import Store
from shared.errors import ConfigError

SQLITE: Final = "sqlite:"


def default_audit_path() -> Path:
    """Where the SQLite store keeps its audit log: `<user data dir>/elicitron/audit.sqlite3`."""
    return Path(platformdirs.user_data_dir("elicitron")) / "audit.sqlite3"


def check_store_url(url: str | None) -> None:
    """Raise ConfigError unless `url` names a backend this elicitron has. The message shows the
    URL's scheme only: a URL may carry a password."""
    if url is None or url in (SQLITE, "sqlite://"):
        return
    scheme, colon, _rest = url.partition(":")
    if colon and scheme.lower() == "sqlite":
        raise ConfigError(f"elicitron.store: a SQLite store is in its default place only ({default_audit_path()} "
                          "and rules.sqlite3 beside it): use \"sqlite:\" or leave `store` out")
    shown = f"URL scheme {scheme!r}" if colon and scheme.isalnum() else "value"
    raise ConfigError(f"elicitron.store: unsupported {shown}; this elicitron supports \"{SQLITE}\" only (SQLite in "
                      f"{default_audit_path().parent}, also the default)")


def open_store(url: str | None, *, audit_path: Path | None = None, record_values: bool = False) -> Store:
    """The store `url` names (see check_store_url). `audit_path` puts the SQLite store's files
    elsewhere (tests, the bench); `record_values` is the config's `auditValues`."""
    check_store_url(url)
    from main_process.store.sqlite import SqliteStore

    return SqliteStore(audit_path or default_audit_path(), record_values=record_values)
