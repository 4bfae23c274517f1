"""The pending lifecycle on a store many mains share, on its own (no sockets, no database): a
window's answer is a claim, and nobody hears of it before the store decided it; another main's
request is a copy that only the store's truth closes. The real store and mains: test_team_inbox.py."""

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_pending import FORM, MINUTE, WINDOW_A, WINDOW_B, Outbox, request, result

from main_process.consent.audit_writer import AuditWriter
from main_process.consent.pending import PendingRequest, PendingRequests
from main_process.store.factory import open_store
from main_process.store.records import Approver, Claim, QuorumVote
from shared import channels
from shared.messages import ElicitationInvoke, ElicitationRequest, ElicitationResult


class Store:
    """The shared store as pending sees it: records what it is told, and holds each claim until
    the test decides it."""

    machine = "laptop-a"

    def __init__(self) -> None:
        self.published: list[str] = []
        self.endings: list[tuple[str, str]] = []
        self.claims: list[tuple[str, ElicitationResult, Approver, Callable[[Claim], None]]] = []
        self.votes: list[tuple[str, str, ElicitationResult, Callable[[QuorumVote], None]]] = []

    def shares(self, pending: PendingRequest) -> bool:
        return True

    def opened(self, pending: PendingRequest) -> None:
        self.published.append(pending.channel)

    def claim(self, pending: PendingRequest, answer: ElicitationResult, approver: Approver, decision: str | None,
              then: Callable[[Claim], None]) -> None:
        self.claims.append((pending.channel, answer, approver, then))

    def vote(self, pending: PendingRequest, person: str, answer: ElicitationResult, approver: Approver,
             decision: str | None, then: Callable[[QuorumVote], None]) -> None:
        self.votes.append((pending.channel, person, answer, then))

    def ended(self, pending: PendingRequest, outcome: str) -> None:
        self.endings.append((pending.channel, outcome))


def requests(tmp_path: Path, outbox: Outbox) -> tuple[PendingRequests, Store, Any]:
    loop = asyncio.get_running_loop()
    store = open_store(None, audit_path=tmp_path / "audit.sqlite3")
    pending = PendingRequests(outbox, loop, audit=AuditWriter(store.audit, loop),
                              window_name=lambda window: f"{window}'s name", window_user=lambda _window: "ana")
    shared = Store()
    pending.shared = shared
    return pending, shared, store


def test_an_answer_is_heard_of_only_once_the_store_decided_it(tmp_path: Path) -> None:
    async def body() -> None:
        outbox = Outbox()
        pending, shared, store = requests(tmp_path, outbox)
        answers: list[ElicitationResult] = []
        opened = pending.open(request(), MINUTE, answers.append)
        assert shared.published == [opened.channel]

        pending.answer(WINDOW_B, "window-b", opened.channel, result("accept", {"name": "Ada"}))
        pending.answer(WINDOW_A, "window-a", opened.channel, result("accept", {"name": "Bob"}))
        assert answers == [] and outbox.topics(channels.DISMISS) == []  # nobody heard of either yet
        (_, first, approver, won), (_, _, _, lost) = shared.claims
        assert (approver.window, approver.machine, approver.label) == ("window-b", "laptop-a", "window-b's name (ana)")

        won("won")
        assert answers == [first] == [ElicitationResult(action="accept", content={"name": "Ada"})]
        assert {rid for rid, body in outbox.topics(channels.DISMISS) if body["by"] == "window-b"} == {WINDOW_A, WINDOW_B}
        lost("lost")
        [(rid, error)] = outbox.topics(channels.ERROR)
        assert (rid, error["code"], error["topic"]) == (WINDOW_A, "already-answered", opened.channel)
        assert shared.endings == []  # decided by the claim: nothing more to tell the store

        withdrawn = pending.open(request(), MINUTE, answers.append)
        pending.withdraw(withdrawn, "cancelled")  # ended here: the store hears so, and the audit row is this main's
        assert shared.endings == [(withdrawn.channel, "cancelled")]
        assert [entry.channel for entry in await store.audit.entries()] == [withdrawn.channel]
        await store.close()

    asyncio.run(body())


def test_another_mains_request_is_a_copy_only_the_store_closes(tmp_path: Path) -> None:
    async def body() -> None:
        outbox = Outbox()
        pending, shared, store = requests(tmp_path, outbox)
        invoke = ElicitationInvoke(request=ElicitationRequest(server="demo", params=FORM), response_channel="chan-1",
                                   created_at=1, expires_at=None, origin=None, machine="build-server")
        assert pending.open_copy(invoke, "build-server")
        assert {rid for rid, body in outbox.topics(channels.INVOKE) if body["machine"] == "build-server"} == \
            {WINDOW_A, WINDOW_B}
        [copy] = pending.all()

        pending.withdraw_server("demo")  # this main's demo server went away: not the other main's
        assert pending.get("chan-1") is copy and shared.endings == []

        pending.close_copy(copy, "server-closed", None)  # its main is gone
        assert [body["reason"] for _, body in outbox.topics(channels.DISMISS)] == ["server-closed"] * 2
        assert pending.open_copy(invoke, "build-server")  # it was only cut off, and is back
        [again] = pending.all()
        pending.close_copy(again, "accept", "window-z")
        assert not pending.open_copy(invoke, "build-server")  # answered: never shown again
        assert shared.endings == [] and await store.audit.entries() == []
        await store.close()

    asyncio.run(body())
