"""What a store's wake-ups do to this main's requests and copies (consent/shared_requests.py), on
its own: a stand-in inbox whose reads the test answers, so a read can be held in flight. The real
store and mains: test_team_inbox.py."""

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from test_pending import FORM, MINUTE, WINDOW_A, WINDOW_B, Outbox, request

from main_process.consent.audit_writer import AuditWriter
from main_process.consent.pending import DEFAULT_MAX_REQUEST_BYTES, PendingRequest, PendingRequests
from main_process.consent.shared_requests import SharedRequestsDesk
from main_process.store.factory import open_store
from main_process.store.records import InboxRow
from shared import channels
from shared.codec import encode_request
from shared.messages import ElicitationInvoke, ElicitationRequest, ElicitationResult


class Windows(Outbox):
    """Two windows; `invoked` is set when an invoke reaches them."""

    def __init__(self) -> None:
        super().__init__()
        self.invoked = asyncio.Event()

    def send(self, routing_ids: Iterable[bytes], frames: list[bytes]) -> list[bytes]:
        if frames[0].decode() == channels.INVOKE:
            self.invoked.set()
        return super().send(routing_ids, frames)


class WakeUps:
    async def close(self) -> None:
        return None


class Inbox:
    """The shared inbox as the desk uses it: publishes succeed, and each read waits until the test
    answers it (`answer_read`)."""

    machine = "laptop-a"

    def __init__(self) -> None:
        self.published = asyncio.Event()
        self.reads: list[tuple[list[str], asyncio.Future[list[InboxRow]]]] = []
        self.read_started = asyncio.Event()
        self.requests: Callable[[], None] = lambda: None
        self.opened: Callable[[InboxRow], None] = lambda _row: None
        self.ended: Callable[[InboxRow], None] = lambda _row: None
        self.answered: Callable[[InboxRow], None] = lambda _row: None
        self.row_reads: list[tuple[str, asyncio.Future[InboxRow]]] = []  # `answer_of`, answered by the test
        self.row_read_started = asyncio.Event()

    def wake_ups(self, *, main_id: str, requests: Callable[[], None], opened: Callable[[InboxRow], None],
                 ended: Callable[[InboxRow], None], answered: Callable[[InboxRow], None], rules: Callable[[], None],
                 connected: Callable[[int], Awaitable[None]]) -> Any:
        self.requests, self.opened, self.ended, self.answered = requests, opened, ended, answered
        return WakeUps()  # the desk is never started here: the test wakes it

    async def publish(self, invoke: ElicitationInvoke, body: bytes, asked_on: str | None = None) -> bool:
        self.published.set()
        return True

    async def taken(self, channels: Sequence[str]) -> bool:
        return True

    async def approved_here(self, channel: str, person: str, window: str) -> bool:
        return True

    async def leave(self) -> bool:
        return True

    async def changed(self, known: Sequence[str]) -> list[InboxRow] | None:
        answer: asyncio.Future[list[InboxRow]] = asyncio.get_running_loop().create_future()
        self.reads.append((list(known), answer))
        self.read_started.set()
        return await answer

    async def answer_of(self, channel: str) -> InboxRow | None:
        row: asyncio.Future[InboxRow] = asyncio.get_running_loop().create_future()
        self.row_reads.append((channel, row))
        self.row_read_started.set()
        return await row

    async def next_row_read(self) -> str:
        """Wait for a read of one of this main's rows; its channel."""
        await asyncio.wait_for(self.row_read_started.wait(), 5)
        self.row_read_started.clear()
        return self.row_reads[-1][0]

    async def next_read(self) -> list[str]:
        """Wait for a read to be in flight; the channels it asked about."""
        await asyncio.wait_for(self.read_started.wait(), 5)
        return self.reads[-1][0]

    def answer_read(self, rows: list[InboxRow]) -> None:
        self.read_started.clear()
        self.reads[-1][1].set_result(rows)


def other_mains_invoke(channel: str) -> bytes:
    invoke = ElicitationInvoke(request=ElicitationRequest(server="demo", params=FORM), response_channel=channel,
                               created_at=1, expires_at=None, origin=None)
    return encode_request(channels.INVOKE, invoke, DEFAULT_MAX_REQUEST_BYTES)[1]


def desk_on(tmp_path: Path, outbox: Windows) -> tuple[PendingRequests, Inbox, SharedRequestsDesk, Any]:
    loop = asyncio.get_running_loop()
    store = open_store(None, audit_path=tmp_path / "audit.sqlite3")
    pending = PendingRequests(outbox, loop, audit=AuditWriter(store.audit, loop))
    inbox = Inbox()
    desk = SharedRequestsDesk(inbox, pending, main_id="main-a")  # type: ignore[arg-type]
    pending.shared = desk
    return pending, inbox, desk, store


async def published_request(pending: PendingRequests,
                            inbox: Inbox) -> tuple[PendingRequest, "asyncio.Future[ElicitationResult]"]:
    """This main's request, opened and published; the future its server's answer goes to."""
    answered: asyncio.Future[ElicitationResult] = asyncio.get_running_loop().create_future()
    opened = pending.open(request(), MINUTE, answered.set_result)
    await asyncio.wait_for(inbox.published.wait(), 5)
    return opened, answered


def test_this_mains_request_answered_elsewhere_leaves_its_windows_before_the_values_are_read(tmp_path: Path) -> None:
    async def body() -> None:
        outbox = Windows()
        pending, inbox, desk, store = desk_on(tmp_path, outbox)
        opened, answered = await published_request(pending, inbox)

        # A window of build-server won it: the notification says so, without the values.
        inbox.ended(InboxRow(channel=opened.channel, main_id="", machine="build-server", state="answered",
                             window="window-z"))
        assert {(rid, body["reason"], body["by"]) for rid, body in outbox.topics(channels.DISMISS)} == \
            {(WINDOW_A, "answered", "window-z"), (WINDOW_B, "answered", "window-z")}
        assert await inbox.next_row_read() == opened.channel and not answered.done()
        assert pending.deliver_on_attach(b"\x00c") == ([], [], [])  # a window attaching now never shows it

        inbox.row_reads[-1][1].set_result(InboxRow(channel=opened.channel, main_id="main-a", machine="laptop-a",
                                                   state="answered", action="accept", content={"name": "Ada"},
                                                   window="window-z"))
        assert await asyncio.wait_for(answered, 5) == ElicitationResult(action="accept", content={"name": "Ada"})
        assert len(outbox.topics(channels.DISMISS)) == 2  # each window heard it once
        assert pending.get(opened.channel) is None
        await desk.close()
        await store.close()

    asyncio.run(body())


def test_an_ending_heard_during_a_read_closes_the_copy_at_once_and_that_read_shows_no_copy_of_it(
        tmp_path: Path) -> None:
    async def body() -> None:
        outbox = Windows()
        pending, inbox, desk, store = desk_on(tmp_path, outbox)
        inbox.requests()  # another main's request opened
        assert await inbox.next_read() == []
        inbox.answer_read([InboxRow(channel="chan-1", main_id="main-b", machine="build-server", state="open",
                                    invoke=other_mains_invoke("chan-1"))])
        await asyncio.wait_for(outbox.invoked.wait(), 5)
        assert {rid for rid, _ in outbox.topics(channels.INVOKE)} == {WINDOW_A, WINDOW_B}

        inbox.requests()  # a second one opened: a read in flight...
        assert await inbox.next_read() == ["chan-1"]
        # ... while chan-1 is answered and chan-2 is ended (its main is gone) in the store
        inbox.ended(InboxRow(channel="chan-1", main_id="", machine="build-server", state="answered",
                             window="window-z"))
        inbox.ended(InboxRow(channel="chan-2", main_id="", machine="build-server", state="orphaned"))
        assert {(rid, body["by"]) for rid, body in outbox.topics(channels.DISMISS)} == \
            {(WINDOW_A, "window-z"), (WINDOW_B, "window-z")}

        # The read's snapshot predates both endings: it still has chan-2 open. No copy opens.
        inbox.answer_read([InboxRow(channel="chan-2", main_id="main-b", machine="build-server", state="open",
                                    invoke=other_mains_invoke("chan-2"))])
        await desk.close()  # once what is in flight has run
        assert pending.all() == [] and len(outbox.topics(channels.INVOKE)) == 2
        assert len(inbox.reads) == 2  # no read again for the endings
        await store.close()

    asyncio.run(body())


def test_an_answer_told_with_its_values_reaches_the_server_at_once_while_a_read_is_in_flight(tmp_path: Path) -> None:
    async def body() -> None:
        outbox = Windows()
        pending, inbox, desk, store = desk_on(tmp_path, outbox)
        opened, answered = await published_request(pending, inbox)
        inbox.requests()  # another main's request opened: a read of what changed is in flight...
        assert await inbox.next_read() == [opened.channel]

        # ... when the winning claim on build-server tells this main the answer it committed
        inbox.answered(InboxRow(channel=opened.channel, main_id="main-a", machine="laptop-a", state="answered",
                                action="accept", content={"name": "Ada"}, window="window-z"))
        assert await asyncio.wait_for(answered, 5) == ElicitationResult(action="accept", content={"name": "Ada"})
        assert {(rid, body["reason"], body["by"]) for rid, body in outbox.topics(channels.DISMISS)} == \
            {(WINDOW_A, "answered", "window-z"), (WINDOW_B, "answered", "window-z")}
        # then the store's notification for everyone: nothing more here (no read, no second dismiss)
        inbox.ended(InboxRow(channel=opened.channel, main_id="", machine="laptop-a", state="answered",
                             window="window-z"))
        inbox.answer_read([])
        await desk.close()
        assert inbox.row_reads == [] and len(inbox.reads) == 1 and len(outbox.topics(channels.DISMISS)) == 2
        await store.close()

    asyncio.run(body())


def test_an_answer_too_large_to_tell_is_read_from_its_row_without_waiting_for_a_read_in_flight(tmp_path: Path) -> None:
    async def body() -> None:
        outbox = Windows()
        pending, inbox, desk, store = desk_on(tmp_path, outbox)
        opened, answered = await published_request(pending, inbox)
        inbox.requests()
        assert await inbox.next_read() == [opened.channel]

        inbox.answered(InboxRow(channel=opened.channel, main_id="main-a", machine="laptop-a", state="answered",
                                window="window-z"))  # told without its values
        assert len(outbox.topics(channels.DISMISS)) == 2  # the windows hear it at once
        assert await inbox.next_row_read() == opened.channel  # the read of everything is still in flight
        inbox.ended(InboxRow(channel=opened.channel, main_id="", machine="laptop-a", state="answered",
                             window="window-z"))  # the notification for everyone: the row is being read already
        inbox.row_reads[-1][1].set_result(InboxRow(channel=opened.channel, main_id="main-a", machine="laptop-a",
                                                   state="answered", action="accept", content={"name": "Ada"},
                                                   window="window-z"))
        assert await asyncio.wait_for(answered, 5) == ElicitationResult(action="accept", content={"name": "Ada"})
        inbox.answer_read([])
        await desk.close()
        assert len(inbox.row_reads) == 1 and len(outbox.topics(channels.DISMISS)) == 2
        await store.close()

    asyncio.run(body())


def test_a_request_opened_with_its_invoke_told_shows_its_copy_with_no_read(tmp_path: Path) -> None:
    async def body() -> None:
        outbox = Windows()
        pending, inbox, desk, store = desk_on(tmp_path, outbox)
        inbox.opened(InboxRow(channel="chan-1", main_id="", machine="build-server", state="open",
                              invoke=other_mains_invoke("chan-1")))
        assert {rid for rid, _ in outbox.topics(channels.INVOKE)} == {WINDOW_A, WINDOW_B}
        copy = pending.get("chan-1")
        assert copy is not None and copy.held_by == "build-server"

        # answered there: it closes; a late copy of the same opening shows nothing again
        inbox.ended(InboxRow(channel="chan-1", main_id="", machine="build-server", state="answered",
                             window="window-z"))
        inbox.opened(InboxRow(channel="chan-1", main_id="", machine="build-server", state="open",
                              invoke=other_mains_invoke("chan-1")))
        assert pending.get("chan-1") is None and len(outbox.topics(channels.INVOKE)) == 2
        await desk.close()
        assert inbox.reads == []
        await store.close()

    asyncio.run(body())
