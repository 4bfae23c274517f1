"""How main's audit rows reach the disk: one commit per quick answer, request rows written soon
after the invoke, outcomes before the caller goes on, checkpoints off the event loop."""

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from main_process.consent import audit_writer
from main_process.consent.audit_writer import AuditWriter
from main_process.store.records import Decided, OutcomeRecord
from main_process.store.sqlite import SqliteAudit
from main_process.store.sqlite_audit import SqliteAuditLog
from shared import channels
from shared.messages import ElicitationInvoke, ElicitationRequest

PARAMS: dict[str, Any] = {
    "mode": "form",
    "message": "Book a table?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}


def make_invoke(server: str = "demo") -> ElicitationInvoke:
    return ElicitationInvoke(
        request=ElicitationRequest(server=server, params=PARAMS),
        response_channel=channels.new_result_channel(),
        created_at=1_700_000_000_000,
        expires_at=1_700_000_600_000,
        origin="window-origin",
    )


class WatchedLog(SqliteAudit):
    """The SQLite backend's audit table, telling the test what was written, and when."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, record_values=False)
        self.request_batches: list[int] = []
        self.outcome_calls: list[tuple[str, bool]] = []  # (channel, written together with its request)
        self.batch_written: asyncio.Future[None] | None = None
        self.checkpointed = threading.Event()

    async def record_requests(self, invokes: Sequence[ElicitationInvoke], decided: Sequence[Decided] = ()) -> bool:
        written = await super().record_requests(invokes, decided)
        self.request_batches.append(len(invokes))
        if self.batch_written is not None and not self.batch_written.done():
            self.batch_written.set_result(None)
        return written

    async def record_outcome(self, outcome: OutcomeRecord, request: ElicitationInvoke | None = None) -> bool:
        self.outcome_calls.append((outcome.channel, request is not None))
        return await super().record_outcome(outcome, request)

    async def checkpoint(self) -> bool:
        done = await super().checkpoint()
        self.checkpointed.set()
        return done


def outcome(writer: AuditWriter, channel: str, outcome: str, window: str | None = None) -> bool:
    """The writer's outcome, and whether it was written, as its caller hears it before going on."""
    written: list[bool] = []
    writer.outcome(OutcomeRecord(channel, outcome, window=window), then=written.append)
    [done] = written  # the SQLite backend never suspends: committed before outcome() returned
    return done


@pytest.fixture
def log(tmp_path: Path) -> Any:
    watched = WatchedLog(tmp_path / "audit.sqlite3")
    yield watched
    watched.close()


def test_a_quick_answer_writes_request_and_outcome_in_one_statement(log: WatchedLog) -> None:
    async def scenario() -> None:
        writer = AuditWriter(log, asyncio.get_running_loop())
        invoke = make_invoke()
        writer.request(invoke)
        assert outcome(writer, invoke.response_channel, "accept", window="w1") is True
        await writer.close()

    asyncio.run(scenario())
    assert log.request_batches == []  # no separate request commit
    [entry] = asyncio.run(log.entries())
    assert (entry.server, entry.fields, entry.message) == ("demo", ["name"], "Book a table?")
    assert (entry.outcome, entry.window, entry.origin) == ("accept", "w1", "window-origin")


def test_an_unanswered_request_is_written_soon_with_the_others_of_that_moment(log: WatchedLog) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        log.batch_written = loop.create_future()
        writer = AuditWriter(log, loop)
        for server in ("a", "b", "c"):
            writer.request(make_invoke(server))
        await asyncio.wait_for(log.batch_written, timeout=5)
        assert await log.counts() == {"pending": 3}
        await writer.close()

    asyncio.run(scenario())
    assert log.request_batches == [3]  # one transaction for the three


def test_an_outcome_after_the_request_row_updates_it(log: WatchedLog) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        log.batch_written = loop.create_future()
        writer = AuditWriter(log, loop)
        invoke = make_invoke()
        writer.request(invoke)
        await asyncio.wait_for(log.batch_written, timeout=5)
        assert outcome(writer, invoke.response_channel, "decline", window="w2") is True
        assert outcome(writer, invoke.response_channel, "accept", window="w3") is False  # first one wins
        await writer.close()

    asyncio.run(scenario())
    [entry] = asyncio.run(log.entries())
    assert (entry.outcome, entry.window) == ("decline", "w2")
    assert [together for _, together in log.outcome_calls] == [False, False]


def test_close_writes_what_is_still_queued(log: WatchedLog) -> None:
    async def scenario() -> None:
        writer = AuditWriter(log, asyncio.get_running_loop())
        writer.request(make_invoke())
        await writer.close()

    asyncio.run(scenario())
    assert asyncio.run(log.counts()) == {"pending": 1}


def test_checkpoints_run_off_the_loop_after_enough_commits(log: WatchedLog, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit_writer, "CHECKPOINT_EVERY", 20)
    database = tmp_path / "audit.sqlite3"
    size_before = database.stat().st_size

    async def scenario() -> None:
        writer = AuditWriter(log, asyncio.get_running_loop())
        for _ in range(25):
            invoke = make_invoke()
            writer.request(invoke)
            outcome(writer, invoke.response_channel, "cancel")
        await writer.close()  # waits for the checkpoint it started
        assert log.checkpointed.is_set()

    asyncio.run(scenario())
    assert database.stat().st_size > size_before  # the pages left the WAL for the database file


def test_without_auto_checkpoint_commits_leave_the_database_file_alone(tmp_path: Path) -> None:
    database = tmp_path / "audit.sqlite3"
    with SqliteAuditLog(database, auto_checkpoint=False) as log:
        size_before = database.stat().st_size
        for _ in range(300):  # past SQLite's own 1,000-page checkpoint point
            invoke = make_invoke()
            assert log.record_outcome(invoke.response_channel, "accept", request=invoke)
        assert database.stat().st_size == size_before
        assert log.checkpoint() is True
        assert database.stat().st_size > size_before
        assert log.counts() == {"accept": 300}


def test_record_requests_and_checkpoint_after_close_do_nothing(tmp_path: Path) -> None:
    log = SqliteAuditLog(tmp_path / "audit.sqlite3")
    log.close()
    assert log.record_requests([make_invoke()]) is False
    assert log.checkpoint() is False
