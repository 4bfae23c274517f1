"""How main's audit rows reach the disk: one commit per quick answer, request rows written soon
after the invoke, outcomes before the caller goes on, checkpoints off the event loop."""

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from main_process import audit_writer
from main_process.audit import AuditLog, Decided
from main_process.audit_writer import AuditWriter
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


class WatchedLog(AuditLog):
    """The real log, telling the test what was written, and when."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, auto_checkpoint=False)
        self.request_batches: list[int] = []
        self.outcome_calls: list[tuple[str, bool]] = []  # (channel, written together with its request)
        self.batch_written: asyncio.Future[None] | None = None
        self.checkpointed = threading.Event()

    def record_requests(self, invokes: Sequence[ElicitationInvoke], decided: Sequence[Decided] = ()) -> bool:
        written = super().record_requests(invokes, decided)
        self.request_batches.append(len(invokes))
        if self.batch_written is not None and not self.batch_written.done():
            self.batch_written.set_result(None)
        return written

    def record_outcome(self, channel: str, outcome: str, **kwargs: Any) -> bool:
        self.outcome_calls.append((channel, kwargs.get("request") is not None))
        return super().record_outcome(channel, outcome, **kwargs)

    def checkpoint(self) -> bool:
        done = super().checkpoint()
        self.checkpointed.set()
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
        assert writer.outcome(invoke.response_channel, "accept", window="w1") is True
        writer.close()

    asyncio.run(scenario())
    assert log.request_batches == []  # no separate request commit
    [entry] = log.entries()
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
        assert log.counts() == {"pending": 3}
        writer.close()

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
        assert writer.outcome(invoke.response_channel, "decline", window="w2") is True
        assert writer.outcome(invoke.response_channel, "accept", window="w3") is False  # first one wins
        writer.close()

    asyncio.run(scenario())
    [entry] = log.entries()
    assert (entry.outcome, entry.window) == ("decline", "w2")
    assert [together for _, together in log.outcome_calls] == [False, False]


def test_close_writes_what_is_still_queued(log: WatchedLog) -> None:
    async def scenario() -> None:
        writer = AuditWriter(log, asyncio.get_running_loop())
        writer.request(make_invoke())
        writer.close()

    asyncio.run(scenario())
    assert log.counts() == {"pending": 1}


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
            writer.outcome(invoke.response_channel, "cancel")
        assert log.checkpointed.wait(timeout=10)
        writer.close()

    asyncio.run(scenario())
    assert database.stat().st_size > size_before  # the pages left the WAL for the database file


def test_without_auto_checkpoint_commits_leave_the_database_file_alone(tmp_path: Path) -> None:
    database = tmp_path / "audit.sqlite3"
    with AuditLog(database, auto_checkpoint=False) as log:
        size_before = database.stat().st_size
        for _ in range(300):  # past SQLite's own 1,000-page checkpoint point
            invoke = make_invoke()
            assert log.record_outcome(invoke.response_channel, "accept", request=invoke)
        assert database.stat().st_size == size_before
        assert log.checkpoint() is True
        assert database.stat().st_size > size_before
        assert log.counts() == {"accept": 300}


def test_record_requests_and_checkpoint_after_close_do_nothing(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.sqlite3")
    log.close()
    assert log.record_requests([make_invoke()]) is False
    assert log.checkpoint() is False
