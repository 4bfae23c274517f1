"""The writes a PostgreSQL store keeps while it is away, made from the spool against the session's
real PostgreSQL (tests/kit/postgres.py): every kind (request rows, an outcome, the end of a shared
request, a quorum approval counted alone, answers taken) is kept on disk by a store that cannot
reach its server, made by the next store opened on that spool (main started again), and made a
second time from a copy of the same spool (a main killed after the store had them but before they
left the spool): the tables are the same after the second time as after the first."""

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kit.postgres import PostgresServer, closed_port
from test_quorum_team import quorum_invoke

from main_process.store.factory import open_store
from main_process.store.records import Decided, OutcomeRecord
from shared import channels
from shared.codec import encode

TABLES = (("SELECT channel, server, outcome, answer_window, decided_at, answer_window_name, approvers::text, "
           "machine FROM elicitations ORDER BY channel"),
          "SELECT channel, state, decided_at, answer::text FROM open_requests ORDER BY channel",
          "SELECT channel, person, machine, window_id, approved_at FROM quorum_approvals ORDER BY channel, person")


def _tables(url: str) -> list[list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return [conn.execute(sql).fetchall() for sql in TABLES]


def test_every_kept_write_is_made_from_the_spool_at_start_and_making_it_twice_changes_nothing(
        pg_url: str, postgres: PostgresServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spool = tmp_path / "state" / "spool.sqlite3"
    quorum, rule_decided, asked = quorum_invoke(), quorum_invoke(), quorum_invoke()
    away_url = pg_url.replace(f":{postgres.port}/", f":{closed_port()}/")

    async def published() -> None:  # the quorum approval is in the store before the outage
        store = open_store(pg_url, machine="laptop-a")
        await store.open()
        assert store.inbox is not None
        await store.inbox.join("main-a", 0, 1)
        assert await store.inbox.publish(quorum, encode(channels.INVOKE, quorum)[1])
        await store.close()

    async def decided_while_away() -> None:
        store = open_store(away_url, machine="laptop-a", spool=spool)  # its server unreachable
        assert store.inbox is not None
        assert await store.inbox.join("main-a", 0, 1) is False  # it names this main; the store is unreachable
        assert await store.inbox.approved_here(quorum.response_channel, "ana", "window-a") is False
        assert await store.inbox.approved_here(quorum.response_channel, "ben", "window-b") is False
        assert await store.inbox.end(quorum.response_channel, "accept") is False
        assert await store.audit.record_requests([asked], [Decided(rule_decided, "decline", 1, rule_id="r1")]) is False
        assert await store.audit.record_outcome(OutcomeRecord(quorum.response_channel, "accept", window="window-b",
                                                              window_name="ana, ben", approvers=("ana", "ben")),
                                                quorum) is False
        assert await store.inbox.taken([quorum.response_channel]) is False
        assert store.status().waiting == 6
        await store.close()

    async def started_again() -> None:
        store = open_store(pg_url, machine="laptop-a", spool=spool)
        await store.open()  # the replay starts as a task
        await store.close()  # and ends before the store closes

    with caplog.at_level(logging.INFO, logger="main_process.store"):
        asyncio.run(published())
        asyncio.run(decided_while_away())
        assert spool.exists()
        shutil.copy(spool, tmp_path / "copy.sqlite3")  # the spool as a main killed mid-replay would leave it
        asyncio.run(started_again())
        assert not spool.exists()  # all made, a clean stop: the file goes
        once = _tables(pg_url)
        shutil.copy(tmp_path / "copy.sqlite3", spool)
        asyncio.run(started_again())
    twice = _tables(pg_url)
    assert twice == once

    audit, inbox, approvals = once
    by_channel = {row[0]: row for row in audit}
    assert by_channel[quorum.response_channel][2:4] == ("accept", "window-b")
    assert by_channel[quorum.response_channel][6] == ('[{"person": "ana", "machine": "laptop-a"}, '
                                                      '{"person": "ben", "machine": "laptop-a"}]')
    assert by_channel[rule_decided.response_channel][2] == "decline"
    assert by_channel[asked.response_channel][2] is None  # a request row alone: no outcome yet
    assert [(row[0], row[1], row[3]) for row in inbox] == [(quorum.response_channel, "accept", None)]
    assert [(row[1], row[2], row[3]) for row in approvals] == [("ana", "laptop-a", "window-a"),
                                                               ("ben", "laptop-a", "window-b")]
    made = [r.getMessage() for r in caplog.records if "kept by the last run of this main" in r.getMessage()]
    assert len(made) == 2 and all("6 write(s)" in line for line in made)
    assert not [r for r in caplog.records if "already has an outcome" in r.getMessage()]  # its own write: no conflict
    assert postgres.password not in (tmp_path / "copy.sqlite3").read_bytes().decode(errors="replace")
