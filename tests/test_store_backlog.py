"""The store-away backlog (main_process/store/postgres_backlog.py) as a unit: writes kept in order
while the store is away, none past the limit (one log line says so), made again oldest first once
it is back, a replay stopping at the first write that finds it away again. The store here is a
Database never opened (its reachability is what the backlog reads); the outage itself, with a
real PostgreSQL and real mains, is tests/test_team_outage.py."""

import asyncio
import functools
import logging

import psycopg
import pytest

from main_process.store.postgres_backlog import Backlog
from main_process.store.postgres_connect import Database


def test_writes_are_kept_in_order_up_to_the_limit_and_made_once_when_the_store_is_back(
        caplog: pytest.LogCaptureFixture) -> None:
    database = Database("postgresql://elicitron@127.0.0.1:1/none")
    made: list[int] = []
    away_again = {3}  # the write that finds the store away on its first replay

    async def write(n: int) -> bool | None:
        if n in away_again:
            away_again.discard(n)
            database.failed(psycopg.OperationalError("server closed the connection unexpectedly"))
            return None
        made.append(n)
        return True

    async def scenario() -> None:
        backlog = Backlog(database, limit=4)
        database.succeeded()
        database.failed(psycopg.OperationalError("connection refused"))
        for n in range(6):
            assert await backlog.write(f"write {n}", functools.partial(write, n)) is False  # kept, not even tried
        assert (len(backlog), made) == (4, [])
        database.succeeded()  # back: made again until write 3 finds the store away again
        await backlog.settled()
        assert (made, len(backlog)) == ([0, 1, 2], 1)
        database.succeeded()
        await backlog.settled()
        assert (made, len(backlog)) == ([0, 1, 2, 3], 0)
        assert await backlog.write("write 9", lambda: write(9)) is True  # nothing waits: made at once
        await backlog.close()

    with caplog.at_level(logging.INFO, logger="main_process.store"):
        asyncio.run(scenario())
    over = [r.getMessage() for r in caplog.records if "the most kept" in r.getMessage()]
    assert len(over) == 1 and "first: write 4" in over[0]
    assert [r.getMessage() for r in caplog.records if "kept write(s) made" in r.getMessage()][-1].endswith(
        "1 kept write(s) made; 2 over the limit of 4 were lost")
