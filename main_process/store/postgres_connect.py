"""Reaching a PostgreSQL store: the password from where the user keeps it, the database opened once
per process (checked, migrated, pooled), and one line that says what to do when it cannot be.

**The password** is never in a message (url.py redacts every URL, `scrub` every driver error). It
comes, first found wins, from the URL itself, `PGPASSWORD` (libpq reads it), the keyring (service
"elicitron", user `store:<the URL without its password>`, as sign-in tokens are kept:
oauth/token_store.py), or `~/.pgpass` (libpq reads it when no other gave one). `sslmode` and the
certificate parameters (`sslrootcert`, `sslcert`, `sslkey`, ...) of the URL go to libpq as written.

**Opening** makes one connection first, on its own: its error is libpq's own reason (a pool that
cannot connect only says it timed out), and on it the schema is migrated (postgres_schema.py);
then the pool (psycopg_pool, autocommit connections: a one-statement write is one round trip, and
the decisions that need more are explicit transactions).

**An outage** (a restart, a cut connection) never holds main up for long: a call waits at most
WAIT_FOR_CONNECTION_S for a connection, libpq CONNECT_TIMEOUT_S to connect, TCP keepalives end a
connection whose network went silent; the first failure marks the store away (`status` says why)
and has the pool check its idle connections (a restart ended them all). The next call that gets
through marks it back and tells who asked (`when_back`: the kept writes, the LISTEN connection).
"""

import asyncio
import logging
import os
import secrets
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from main_process.store.postgres_schema import migrate
from main_process.store.url import redact, scrub, without_password
from shared.errors import StoreUnavailableError

logger = logging.getLogger(__name__)
# The pool logs each failed connection attempt (one a second through an outage); main says once
# that the store is away and once that it is back (Database._set, succeeded).
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

KEYRING_SERVICE: Final = "elicitron"  # the service sign-in tokens are kept under too
CONNECT_TIMEOUT_S: Final = 3  # libpq waits forever by default; a URL's connect_timeout wins
POOL_MIN: Final = 1
POOL_MAX: Final = 4  # main writes in batches (audit_writer.py); a few calls may overlap
WAIT_FOR_CONNECTION_S: Final = 2.0  # a call waits this long for a pooled connection (not the pool's 30 s), then fails
RECONNECT_S: Final = 2.0  # the pool stops its own growing backoff (1, 2, 4 s...) after this: the next call tries at once
# A cut network sends no reset: without these a query on a dead connection waits for the kernel (minutes).
KEEPALIVES: Final = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 2,
                     "tcp_user_timeout": 10_000}

Pool = AsyncConnectionPool[psycopg.AsyncConnection[tuple[Any, ...]]]


def keyring_user(url: str) -> str:
    """The keyring user a store's password is kept under: `store:` and the URL without its password."""
    return "store:" + without_password(url)


def _secret_in(url: str) -> str | None:
    """The password written in `url` (user part or `password=`), to scrub from messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password:
        return unquote(parts.password)
    for item in parts.query.split("&"):
        key, _eq, value = item.partition("=")
        if unquote(key).strip().lower() == "password" and value:
            return unquote(value)
    return None


def _from_keyring(user: str) -> str | None:
    """The keyring's password for `user`, or None (no keyring, no entry, or it refused: logged)."""
    try:
        import keyring
        import keyring.errors
    except ImportError:
        return None
    try:
        password = keyring.get_password(KEYRING_SERVICE, user)
    except keyring.errors.KeyringError as exc:  # no backend (NoKeyringError) is one of these
        logger.debug("the keyring gave no store password: %s", exc)
        return None
    return password or None


class Database:
    """One PostgreSQL store for this process: `pool()` opens it on first use (or main's `open`),
    and keeps whether it was last reachable, for `status`."""

    def __init__(self, url: str, *, on_change: Callable[[], None] | None = None) -> None:
        self.url = url  # only ever handed to libpq
        self.shown = redact(url)
        self.reachable: bool | None = None  # None: not tried yet
        self.problem: str | None = None  # why not, as `status` shows it
        self.on_change = on_change  # told when reachable or problem changes
        self._secret = _secret_in(url)
        # This process's connections say it (setting `elicitron.sender`): the inbox's notifications
        # carry it (postgres_schema.py, 6), so the listener knows the wake-ups of its own writes
        self.sender = secrets.token_hex(8)
        self._pool: Pool | None = None
        self._kwargs: dict[str, Any] = {}  # what the pool connects with (the password found), for `connect`
        self._opening = asyncio.Lock()
        self._closed = False
        self._back: list[Callable[[], None]] = []  # told when the store is reachable again after an outage
        self._checking: asyncio.Task[None] | None = None

    async def pool(self) -> Pool:
        """The open pool; raises StoreUnavailableError with a sentence saying what to do."""
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                if self._closed:
                    raise StoreUnavailableError(f"the store {self.shown} is closed")
                self._pool = await self._open()
        return self._pool

    async def _open(self) -> Pool:
        try:
            params = conninfo_to_dict(self.url)
        except psycopg.ProgrammingError as exc:
            raise StoreUnavailableError(f"the store URL {self.shown} is not one libpq reads: "
                                        f"{self._one_line(exc)}") from None
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
        if "application_name" not in params:
            kwargs["application_name"] = "elicitron"
        kwargs.update({key: value for key, value in KEEPALIVES.items() if key not in params})
        kwargs["options"] = f"{params.get('options') or ''} -c elicitron.sender={self.sender}".strip()
        if "password" not in params and "PGPASSWORD" not in os.environ:
            password = await asyncio.to_thread(_from_keyring, keyring_user(self.url))
            if password is not None:
                kwargs["password"] = self._secret = password
        try:
            async with await psycopg.AsyncConnection.connect(self.url, **kwargs) as conn:
                version = await migrate(conn, self.shown)
        except psycopg.Error as exc:
            self.failed(exc)
            raise StoreUnavailableError(self.explain(exc)) from None
        self._kwargs = kwargs
        pool: Pool = AsyncConnectionPool(self.url, kwargs=kwargs, min_size=POOL_MIN, max_size=POOL_MAX, open=False,
                                         name="elicitron-store", timeout=WAIT_FOR_CONNECTION_S,
                                         reconnect_timeout=RECONNECT_S)
        try:
            await pool.open(wait=True, timeout=float(kwargs.get("connect_timeout", CONNECT_TIMEOUT_S)))
        except psycopg.Error as exc:
            await pool.close()
            self.failed(exc)
            raise StoreUnavailableError(self.explain(exc)) from None
        logger.info("store %s: PostgreSQL, schema version %d", self.shown, version)
        self.succeeded()
        return pool

    async def connect(self) -> psycopg.AsyncConnection[tuple[Any, ...]]:
        """A connection of its own, outside the pool (a LISTEN must stay on one connection), made as
        the pool's are; the caller closes it. Raises StoreUnavailableError; psycopg.Error."""
        await self.pool()  # opened, so the password is found and the schema migrated
        return await psycopg.AsyncConnection.connect(self.url, **self._kwargs)

    def explain(self, exc: psycopg.Error) -> str:
        """One line: which store, libpq's reason (no password), and what to do about it."""
        reason = self._one_line(exc)
        lowered = reason.lower()
        if exc.sqlstate in ("28P01", "28000") or "password" in lowered:
            todo = (f"check the user and the password (in the URL, PGPASSWORD, ~/.pgpass, or the keyring: "
                    f"`keyring set {KEYRING_SERVICE} '{keyring_user(self.url)}'`)")
        elif exc.sqlstate == "3D000":
            todo = "create the database (createdb NAME) or fix its name in the URL"
        elif "ssl" in lowered or "certificate" in lowered:
            todo = "check sslmode and the certificate parameters in the URL"
        elif isinstance(exc, psycopg.OperationalError):
            todo = "check that PostgreSQL runs there and accepts connections, and the host and port in the URL"
        else:
            return f"the store {self.shown} refused it: {reason}"
        return f"the store {self.shown} is unreachable: {reason}; {todo}"

    @property
    def away(self) -> bool:
        """The last call found the store unreachable (and none has reached it since)."""
        return self.reachable is False

    def when_back(self, callback: Callable[[], None]) -> None:
        """Call `callback` each time the store is reachable again after an outage."""
        self._back.append(callback)

    def unreachable(self, exc: BaseException) -> bool:
        """Whether `exc` says the store could not be reached (so the call may be made again later),
        rather than that it refused the call."""
        if self._closed:
            return False  # main stops: nothing will be made again
        if isinstance(exc, StoreUnavailableError):
            return True
        return isinstance(exc, psycopg.OperationalError) or (isinstance(exc, psycopg.Error) and
                                                             exc.sqlstate == "3D000")

    def failure_text(self, exc: psycopg.Error | StoreUnavailableError) -> str:
        """A call failed with `exc`: noted (`failed`) when it is libpq's, and said in one line
        without the password, for a caller's log."""
        if isinstance(exc, psycopg.Error):
            self.failed(exc)
            return self.explain(exc)
        return str(exc)

    def failed(self, exc: psycopg.Error) -> None:
        """A call failed: the store is unreachable when the connection is what failed. The pool's
        idle connections are then checked (a restart ended them all: each would fail one call)."""
        if self.unreachable(exc):
            self._set(False, self._one_line(exc))
            self._check_pool()

    def succeeded(self) -> None:
        if self.reachable is not True:
            was_away = self.reachable is False
            self._set(True, None)
            if was_away:
                logger.info("store %s is reachable again", self.shown)
                for callback in self._back:
                    callback()

    def _set(self, reachable: bool, problem: str | None) -> None:
        changed = (reachable, problem) != (self.reachable, self.problem)
        if not reachable and self.reachable is True:  # an outage begins (at open, the caller says why)
            logger.warning("store %s is unreachable: %s", self.shown, problem)
        self.reachable, self.problem = reachable, problem
        if changed and self.on_change is not None:
            self.on_change()

    def _check_pool(self) -> None:
        if self._pool is None or self._closed or (self._checking is not None and not self._checking.done()):
            return
        self._checking = asyncio.get_running_loop().create_task(_check(self._pool), name="store-pool-check")

    def _one_line(self, exc: BaseException) -> str:
        return scrub(" ".join(str(exc).split()), self._secret) or type(exc).__name__

    async def close(self) -> None:
        async with self._opening:
            self._closed = True
            pool, self._pool = self._pool, None
        if self._checking is not None:
            await asyncio.gather(self._checking, return_exceptions=True)
        if pool is not None:
            await pool.close()


async def _check(pool: Pool) -> None:
    """Drop the pool's broken idle connections (it makes new ones as needed)."""
    try:
        await pool.check()
    except psycopg.Error as exc:  # closed meanwhile (main stops): nothing left to check
        logger.debug("store pool check: %s", exc)
