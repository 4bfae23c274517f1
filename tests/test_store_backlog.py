"""The store-away backlog (main_process/store/postgres_backlog.py) and its spool on disk
(main_process/store/spool.py) as units: writes kept in order while the store is away, none past
the limit (one log line says so), made again oldest first once it is back, a replay stopping at the
first write that finds it away again; what is kept is in the spool file (0600) as soon as it is
kept, so a new backlog on that file (main started again) makes it; a spool that is garbage gives
one line naming the file and the backlog goes on with a new one. The store here is a Database
never opened (its reachability is what the backlog reads); the outage itself, with a real
PostgreSQL and real mains, is tests/test_team_outage.py and tests/test_team_spool.py."""

import asyncio
import logging
import sqlite3
import stat
from pathlib import Path
from typing import Any

import psycopg
import pytest

from main_process.store.postgres_backlog import Backlog
from main_process.store.postgres_connect import Database
from main_process.store.spool import Spool, spool_path

URL = "postgresql://elicitron:secret-pw@127.0.0.1:1/none"


class Writes:
    """The one kind of write of these tests: `n` made (or finding the store away, once, for `away_again`)."""

    def __init__(self, database: Database, away_again: set[int] | None = None) -> None:
        self.database = database
        self.made: list[int] = []
        self.away_again = away_again or set()

    async def __call__(self, payload: dict[str, Any]) -> bool | None:
        n = int(payload["n"])
        if n in self.away_again:
            self.away_again.discard(n)
            self.database.failed(psycopg.OperationalError("server closed the connection unexpectedly"))
            return None
        self.made.append(n)
        return True


def _away(database: Database) -> None:
    database.succeeded()
    database.failed(psycopg.OperationalError("connection refused"))


def test_writes_are_kept_in_order_up_to_the_limit_and_made_once_when_the_store_is_back(
        caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    database = Database(URL)
    writes = Writes(database, away_again={3})  # write 3 finds the store away on its first replay

    async def scenario() -> None:
        backlog = Backlog(database, Spool(tmp_path / "spool.sqlite3"), limit=4)
        backlog.handles("n", writes)
        _away(database)
        for n in range(6):
            assert await backlog.write("n", f"write {n}", {"n": n}) is False  # kept, not even tried
        assert (len(backlog), writes.made) == (4, [])
        database.succeeded()  # back: made again until write 3 finds the store away again
        await backlog.settled()
        assert (writes.made, len(backlog)) == ([0, 1, 2], 1)
        database.succeeded()
        await backlog.settled()
        assert (writes.made, len(backlog)) == ([0, 1, 2, 3], 0)
        assert await backlog.write("n", "write 9", {"n": 9}) is True  # nothing waits: made at once
        await backlog.close()

    with caplog.at_level(logging.INFO, logger="main_process.store"):
        asyncio.run(scenario())
    over = [r.getMessage() for r in caplog.records if "the most kept" in r.getMessage()]
    assert len(over) == 1 and "first: write 4" in over[0]
    assert [r.getMessage() for r in caplog.records if "kept write(s) made" in r.getMessage()][-1].endswith(
        "1 kept write(s) made; 2 over the limit of 4 were lost")
    assert not (tmp_path / "spool.sqlite3").exists()  # nothing kept at the stop: the file goes


def test_what_is_kept_is_on_disk_at_once_and_a_main_started_again_makes_it_once(
        caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    path = spool_path(tmp_path / "state", tmp_path / "run" / "connection.json", URL)
    database = Database(URL)
    writes = Writes(database)

    async def first_run() -> None:
        backlog = Backlog(database, Spool(path))
        backlog.handles("n", writes)
        _away(database)
        for n in range(3):
            await backlog.write("n", f"write {n}", {"n": n, "text": "é\n\"quoted\""})
            with sqlite3.connect(path) as reader:  # committed before `write` returned: another process sees it
                assert reader.execute("SELECT count(*) FROM kept").fetchone()[0] == n + 1
        await backlog.close()  # the store never came back: the writes stay in the file

    async def second_run() -> None:
        opened = Database(URL)  # main started again (the store is reachable: it opened it)
        backlog = Backlog(opened, Spool(path))
        backlog.handles("n", writes)
        opened.succeeded()
        assert backlog.load() == 3
        backlog.replay()
        await backlog.settled()
        assert len(backlog) == 0
        await backlog.close()

    with caplog.at_level(logging.INFO, logger="main_process.store"):
        asyncio.run(first_run())
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert "secret-pw" not in path.read_bytes().decode(errors="replace")  # the password is never kept
        assert writes.made == []
        asyncio.run(second_run())
    assert writes.made == [0, 1, 2]
    assert not path.exists()  # all made: the file goes with a clean stop
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"3 write(s) the store has not had yet, kept in {path}" in m for m in messages)
    assert any(f"3 write(s) kept by the last run of this main (in {path}) are made now" in m for m in messages)


def test_a_spool_of_garbage_is_said_once_naming_the_file_and_set_aside(
        caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    path = tmp_path / "spool.sqlite3"
    path.write_bytes(b"not a database at all\n" * 200)
    database = Database(URL)
    writes = Writes(database)

    async def scenario() -> None:
        backlog = Backlog(database, Spool(path))
        backlog.handles("n", writes)
        database.succeeded()
        assert backlog.load() == 0
        _away(database)  # and the backlog keeps what comes next in a new spool
        assert await backlog.write("n", "write 1", {"n": 1}) is False
        database.succeeded()
        await backlog.settled()
        await backlog.close()

    with caplog.at_level(logging.INFO, logger="main_process.store"):
        asyncio.run(scenario())
    assert writes.made == [1]
    unreadable = [r for r in caplog.records if "unreadable" in r.getMessage()]
    assert len(unreadable) == 1 and unreadable[0].levelno == logging.ERROR
    assert str(path) in unreadable[0].getMessage() and "moved to" in unreadable[0].getMessage()
    assert (tmp_path / "spool.sqlite3.unreadable").read_bytes().startswith(b"not a database")


def test_a_kept_write_this_main_cannot_make_is_dropped_with_one_line(
        caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """A spool written by another version: a kind unknown here, a payload not of its kind."""
    path = tmp_path / "spool.sqlite3"
    database = Database(URL)
    writes = Writes(database)
    spool = Spool(path)
    spool.add("renamed-kind", "a write of another version", {"n": 1})
    spool.add("n", "a payload without its n", {"m": 2})
    spool.add("n", "write 3", {"n": 3})
    spool.close()

    async def scenario() -> None:
        backlog = Backlog(database, Spool(path))
        backlog.handles("n", writes)
        database.succeeded()
        assert backlog.load() == 3
        backlog.replay()
        await backlog.settled()
        await backlog.close()

    with caplog.at_level(logging.INFO, logger="main_process.store"):
        asyncio.run(scenario())
    assert writes.made == [3]
    dropped = [r.getMessage() for r in caplog.records if "cannot be made" in r.getMessage()]
    assert len(dropped) == 2 and "unknown kind 'renamed-kind'" in dropped[0] and "KeyError" in dropped[1]
    assert not path.exists()
