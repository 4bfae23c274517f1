"""The PostgreSQL store beyond the contract (test_store_contract.py runs that on it): which store a
main uses, its password kept out of every message, the errors a user meets and what they say to do,
migrations when several mains start at once, and psycopg loaded only when the store is PostgreSQL.
The store's own tests run on the session's private server (tests/kit/postgres.py)."""

import asyncio
import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kit.env import child_env
from kit.paths import PYTHON, ROOT
from kit.postgres import PostgresServer, closed_port

from main_process.store import postgres_connect
from main_process.store.factory import STORE_ENV, chosen_store, open_store
from main_process.store.postgres import PgStore
from main_process.store.postgres_schema import MIGRATIONS
from main_process.store.records import OutcomeRecord
from main_process.store.url import redact, without_password
from shared import channels
from shared.errors import ConfigError, StoreUnavailableError

SECRET = "hunter2-Secret"


# ---- the URL as people see it ------------------------------------------------------------------


def test_a_password_in_a_store_url_is_never_shown_and_the_rest_is() -> None:
    assert redact(f"postgresql://ana:{SECRET}@db.example:5433/inbox?sslmode=verify-full&sslrootcert=/etc/ca.pem") == (
        "postgresql://ana:***@db.example:5433/inbox?sslmode=verify-full&sslrootcert=/etc/ca.pem")
    assert redact(f"postgres://db/inbox?user=ana&Password={SECRET}&sslpassword={SECRET}") == (
        "postgres://db/inbox?user=ana&Password=***&sslpassword=***")
    assert redact("postgresql://ana@db/inbox") == "postgresql://ana@db/inbox"
    assert redact(f"postgresql://ana:{SECRET}@[::1/inbox") == "postgresql://***"  # unreadable: scheme only
    assert redact("sqlite:") == "sqlite:"
    assert without_password(f"postgresql://ana:{SECRET}@db/inbox?password={SECRET}&sslmode=require") == (
        "postgresql://ana@db/inbox?sslmode=require")


def test_the_store_is_the_flag_else_the_environment_else_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    assert chosen_store(None, "postgresql://config/x") == "postgresql://config/x"
    assert chosen_store(None, None) is None
    monkeypatch.setenv(STORE_ENV, "postgresql://env/x")
    assert chosen_store(None, "postgresql://config/x") == "postgresql://env/x"
    assert chosen_store("postgresql://flag/x", "postgresql://config/x") == "postgresql://flag/x"
    monkeypatch.setenv(STORE_ENV, f"mysql://ana:{SECRET}@db/x")
    with pytest.raises(ConfigError) as refused:
        chosen_store(None, None)
    assert str(refused.value).startswith(f"{STORE_ENV}: unsupported URL scheme 'mysql'")
    assert SECRET not in str(refused.value)


@pytest.mark.slow
def test_main_loads_no_postgresql_driver_unless_its_store_is_postgresql() -> None:
    probe = ("import sys, main_process.app, cli_process.cli, main_process.store.factory as f\n"
             "f.open_store(None, audit_path=__import__('pathlib').Path('/nonexistent/audit.sqlite3'))\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool')))")
    done = subprocess.run([PYTHON, "-c", probe], env=child_env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout


# ---- reaching the store, and what a user reads when it cannot be reached -------------------------


def opened(url: str, **options: Any) -> None:
    async def scenario() -> None:
        store = open_store(url, **options)
        try:
            await store.open()
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_wrong_password_says_where_passwords_come_from_and_never_shows_it(
        postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(StoreUnavailableError) as refused:
        opened(postgres.url(password=SECRET))
    message = str(refused.value)
    assert SECRET not in message and "\n" not in message
    assert message.startswith(f"the store postgresql://postgres:***@127.0.0.1:{postgres.port}/postgres is "
                              "unreachable: ")
    assert 'password authentication failed for user "postgres"' in message
    assert "PGPASSWORD" in message and "keyring set elicitron " in message


def test_an_unreachable_server_and_a_refused_sslmode_say_what_to_check(postgres: PostgresServer) -> None:
    nobody = closed_port()
    with pytest.raises(StoreUnavailableError) as unreachable:
        opened(f"postgresql://postgres:{SECRET}@127.0.0.1:{nobody}/postgres?connect_timeout=5")
    assert SECRET not in str(unreachable.value)
    assert "check that PostgreSQL runs there" in str(unreachable.value)
    # sslmode goes to libpq as written: this server has no TLS, so `require` is refused for it.
    with pytest.raises(StoreUnavailableError) as no_tls:
        opened(postgres.url() + "?sslmode=require")
    assert "SSL" in str(no_tls.value) and "check sslmode and the certificate parameters" in str(no_tls.value)
    assert postgres.password not in str(no_tls.value)


def test_the_password_comes_from_the_keyring_under_the_url_without_it(
        postgres: PostgresServer, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    bare = without_password(pg_url)
    asked: list[str] = []

    def keyring_password(user: str) -> str | None:
        asked.append(user)
        return postgres.password if user == f"store:{bare}" else None

    monkeypatch.setattr(postgres_connect, "_from_keyring", keyring_password)
    opened(bare)
    assert asked == [f"store:{bare}"]
    monkeypatch.setenv("PGPASSWORD", postgres.password)  # PGPASSWORD is used before the keyring
    opened(bare)
    assert len(asked) == 1


# ---- many mains on one database ------------------------------------------------------------------


def test_mains_starting_at_once_migrate_once_and_a_newer_schema_is_refused(postgres: PostgresServer,
                                                                          pg_url: str) -> None:
    async def start_four() -> None:
        stores = [open_store(pg_url, machine=f"m{n}") for n in range(4)]
        try:
            await asyncio.gather(*(store.open() for store in stores))
        finally:
            await asyncio.gather(*(store.close() for store in stores))

    asyncio.run(start_four())
    with psycopg.connect(pg_url, autocommit=True) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
        assert versions == list(range(1, len(MIGRATIONS) + 1))
        conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (len(MIGRATIONS) + 1,))
    with pytest.raises(StoreUnavailableError, match="newer than this elicitron's"):
        opened(pg_url)


def test_a_request_that_opens_tells_its_invoke_when_the_notification_can_carry_it(pg_url: str) -> None:
    """Schema 9: the other mains show a new request from its notification alone, with no read; a
    notification takes under 8,000 bytes, so a large invoke, or a long machine name in many-byte
    letters beside one near the limit, is left out (the mains read it) and the insert never fails."""
    opened(pg_url, machine="laptop")
    long_machine = "\U0001d55e" * 255  # the longest name config allows, 4 bytes a letter
    rows = [("small", "laptop", b"\x81\xa1k\x01" * 10), ("large", "laptop", b"x" * 6_000),
            ("long-machine", long_machine, b"x" * 5_000)]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("LISTEN elicitron_inbox")
        for channel, machine, invoke in rows:
            conn.execute("INSERT INTO open_requests (channel, main_id, machine, server, invoke, created_at) "
                         "VALUES (%s, 'main-a', %s, 'demo', %s, 1)", (channel, machine, invoke))
        told = {note[1]: note for note in (json.loads(n.payload) for n in conn.notifies(timeout=5, stop_after=3))}
    assert base64.b64decode(told["small"][6]) == rows[0][2]
    assert told["small"][:6] == ["", "small", "open", None, None, "laptop"]
    assert len(told["large"]) == 6 and len(told["long-machine"]) == 6
    assert told["long-machine"][5] == long_machine


def test_wake_ups_hand_on_other_mains_writes_skip_this_mains_own_and_listen_again_after_a_cut(
        pg_url: str) -> None:
    """A main's LISTEN connection is read in its socket's callback: another main's request that
    opens reaches it with its invoke, one this main wrote itself is skipped (it knows), and a
    connection cut by the server is made again, `connected` first (the caller catches up there)."""
    async def scenario() -> None:
        store = PgStore(pg_url, machine="here")
        await store.open()
        heard: asyncio.Queue[tuple[str, str, bytes | None]] = asyncio.Queue()
        backends: asyncio.Queue[int] = asyncio.Queue()

        async def connected(backend_pid: int) -> None:
            backends.put_nowait(backend_pid)

        listener = store.inbox.wake_ups(
            main_id="me", requests=lambda: heard.put_nowait(("read", "", None)),
            opened=lambda row: heard.put_nowait(("opened", row.channel, row.invoke)),
            ended=lambda row: heard.put_nowait(("ended", row.channel, None)),
            answered=lambda row: heard.put_nowait(("answered", row.channel, None)),
            rules=lambda: None, connected=connected)
        listener.start()
        try:
            first = await asyncio.wait_for(backends.get(), 10)
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as other:
                async def insert(channel: str, sender: str) -> None:
                    await other.execute("SELECT set_config('elicitron.sender', %s, false)", (sender,))
                    await other.execute("INSERT INTO open_requests (channel, main_id, machine, server, invoke, "
                                        "created_at) VALUES (%s, 'main-a', 'laptop', 'demo', %s, 1)",
                                        (channel, b"\x81\xa1k\x01"))

                await insert("own", store._db.sender)  # (this process's token: its pooled connections set it)
                await insert("theirs", "another-main")
                assert await asyncio.wait_for(heard.get(), 10) == ("opened", "theirs", b"\x81\xa1k\x01")
                await other.execute("SELECT pg_terminate_backend(%s)", (first,))
                assert await asyncio.wait_for(backends.get(), 10) != first
                await insert("after", "another-main")
                assert await asyncio.wait_for(heard.get(), 10) == ("opened", "after", b"\x81\xa1k\x01")
            assert heard.empty()
        finally:
            await listener.close()
            await store.close()

    asyncio.run(scenario())


def test_two_mains_deciding_one_request_at_once_record_one_outcome(pg_url: str) -> None:
    channel = channels.new_result_channel()

    async def race() -> list[bool]:
        laptop, server = open_store(pg_url, machine="laptop"), open_store(pg_url, machine="build-server")
        try:
            await asyncio.gather(laptop.open(), server.open())
            decided = await asyncio.gather(*(
                store.audit.record_outcome(OutcomeRecord(channel, outcome, window=f"w-{n}"))
                for n in range(10) for store, outcome in ((laptop, "accept"), (server, "decline"))))
            [entry] = await laptop.audit.entries()
            assert entry.outcome in ("accept", "decline") and entry.machine in ("laptop", "build-server")
            return decided
        finally:
            await asyncio.gather(laptop.close(), server.close())

    assert sorted(asyncio.run(race())) == [False] * 19 + [True]


@pytest.mark.slow
def test_main_with_an_unreachable_store_says_so_in_one_line_and_does_not_start(postgres: PostgresServer,
                                                                               tmp_path: Path) -> None:
    url = postgres.url(password=SECRET)
    done = subprocess.run([PYTHON, "-m", "cli_process", "main", "--connection", str(tmp_path / "c.json"),
                           "--store", url], env=child_env(tmp_path), cwd=ROOT, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 1
    assert SECRET not in done.stderr + done.stdout
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"elicitron: the store postgresql://postgres:***@127.0.0.1:{postgres.port}/postgres is "
                           "unreachable: ")
    assert "check the user and the password" in line
    assert not (tmp_path / "c.json").exists()


def test_a_store_lost_while_main_runs_keeps_its_writes_without_raising_and_status_says_why(
        postgres: PostgresServer, pg_url: str, tmp_path: Path) -> None:
    connection = tmp_path / "connection.json"
    asked = channels.new_result_channel()

    async def scenario() -> None:
        store = open_store(pg_url, machine="laptop")
        try:
            await store.open()
            await store.claim(connection)
            shown = store.status()
            assert (shown.kind, shown.reachable, shown.machine) == ("PostgreSQL", True, "laptop")
            assert shown.location == redact(pg_url) and postgres.password not in shown.location
            postgres.drop_database(pg_url.rsplit("/", 1)[1])  # its connections are ended with it
            assert await store.audit.record_outcome(OutcomeRecord(asked, "accept")) is False
            assert store.audit.unrecorded == 0  # kept, to be written when the store is back
            lost = store.status()
            assert lost.reachable is False and lost.problem and lost.waiting == 1
            assert postgres.password not in lost.problem
        finally:
            await store.close()

    asyncio.run(scenario())
