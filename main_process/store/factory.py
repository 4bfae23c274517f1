"""Which backend a store URL names, and which URL this process uses: one place decides.

- No URL, or `"sqlite:"`: the SQLite store in the user data dir (sqlite.py), nothing to install.
- `postgresql://…` (or `postgres://…`, libpq's URL): the PostgreSQL store (postgres.py), imported
  only then: psycopg is not loaded by a main or a CLI that does not use it (startup time).
Anything else is refused when the config is read, with a sentence saying what is supported; an
error shows the URL's scheme, or the URL redacted (url.py), never a password.

The URL comes from, first given wins: `elicitron main --store URL`, then ELICITRON_STORE, then the
config's `"elicitron": {"store": URL}` (`chosen_store`). A new backend is a module implementing
interface.Store and one branch in `open_store`.
"""

import os
import socket
from pathlib import Path
from typing import Final

import platformdirs

from main_process.store.interface import Store
from shared.errors import ConfigError

SQLITE: Final = "sqlite:"
POSTGRES_SCHEMES: Final = ("postgresql", "postgres")
STORE_ENV: Final = "ELICITRON_STORE"


def default_audit_path() -> Path:
    """Where the SQLite store keeps its audit log: `<user data dir>/elicitron/audit.sqlite3`."""
    return Path(platformdirs.user_data_dir("elicitron")) / "audit.sqlite3"


def is_postgres(url: str | None) -> bool:
    return url is not None and url.partition("://")[0].lower() in POSTGRES_SCHEMES and "://" in url


def check_store_url(url: str | None, where: str = "elicitron.store") -> None:
    """Raise ConfigError unless `url` names a backend this elicitron has. `where` says where the
    URL came from. The message shows the URL's scheme only: a URL may carry a password."""
    if url is None or url in (SQLITE, "sqlite://") or is_postgres(url):
        return
    scheme, colon, _rest = url.partition(":")
    if colon and scheme.lower() == "sqlite":
        raise ConfigError(f"{where}: a SQLite store is in its default place only ({default_audit_path()} "
                          "and rules.sqlite3 beside it): use \"sqlite:\" or leave `store` out")
    shown = f"URL scheme {scheme!r}" if colon and scheme.isalnum() else "value"
    raise ConfigError(f"{where}: unsupported {shown}; this elicitron supports \"{SQLITE}\" (SQLite in "
                      f"{default_audit_path().parent}, the default) and \"postgresql://USER@HOST:PORT/DATABASE\"")


def chosen_store(flag: str | None, configured: str | None) -> str | None:
    """The store URL to use: `flag` (--store), else ELICITRON_STORE, else the config's. Raises
    ConfigError for a URL of no backend, naming where it came from."""
    if flag:
        check_store_url(flag, "--store")
        return flag
    from_env = os.environ.get(STORE_ENV, "").strip()
    if from_env:
        check_store_url(from_env, STORE_ENV)
        return from_env
    return configured


def default_machine() -> str:
    """The name this main writes on the audit rows of a shared store: the host name."""
    return socket.gethostname() or "localhost"


def open_store(url: str | None, *, audit_path: Path | None = None, record_values: bool = False,
               machine: str | None = None, spool: Path | None = None) -> Store:
    """The store `url` names (see check_store_url). `audit_path` puts the SQLite store's files
    elsewhere (tests, the bench); `record_values` is the config's `auditValues`; `machine` the
    config's `machine` (default: the host name; a shared store's rows name it); `spool` the file a
    PostgreSQL store keeps what main decides while it is away in (store/spool.py: main's, by its
    connection file; None: in memory, for the CLI)."""
    check_store_url(url)
    if is_postgres(url):
        assert url is not None
        from main_process.store.postgres import PgStore  # psycopg: only for a PostgreSQL store

        return PgStore(url, machine=machine or default_machine(), record_values=record_values, spool=spool)
    from main_process.store.sqlite import SqliteStore

    return SqliteStore(audit_path or default_audit_path(), record_values=record_values)
