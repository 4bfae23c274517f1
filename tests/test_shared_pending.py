"""The pending lifecycle on a store many mains share, on its own (no sockets, no database): a
window's answer is a claim, and nobody hears of it before the store decided it; another main's
request is a copy that only the store's truth closes. The real store and mains: test_team_inbox.py."""

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_pending import FORM, MINUTE, WINDOW_A, WINDOW_B, Outbox, request, result

from main_process.consent.audit_writer import AuditWriter
from main_process.consent.pending import Elicitation, PendingRequest, PendingRequests, RequestOptions
from main_process.store.factory import open_store
from main_process.store.records import Approver, Claim, QuorumVote
from shared import channels
from shared.messages import ElicitationInvoke, ElicitationRequest, ElicitationResult, QuorumInfo


class Store:
    """The shared store as pending sees it: records what it is told, and holds each claim until
    the test decides it."""

    machine = "laptop-a"

    def __init__(self) -> None:
        self.published: list[str] = []
        self.endings: list[tuple[str, str]] = []
        self.claims: list[tuple[str, ElicitationResult, Approver, Callable[[Claim], None]]] = []
        self.votes: list[tuple[str, str, ElicitationResult, Callable[[QuorumVote], None]]] = []
        self.counted: list[tuple[str, str, str]] = []  # approvals counted here (the store away): (channel, person, window)

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

    def counted_here(self, pending: PendingRequest, person: str, window: str) -> None:
        self.counted.append((pending.channel, person, window))


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


APPROVAL_PARAMS = {"mode": "form", "message": "Allow demo/cancel_booking?", "requestedSchema": {
    "type": "object", "properties": {"decision": {"type": "string", "enum": ["allow-once", "deny"]}},
    "required": ["decision"]}}


def test_an_approver_on_this_main_of_another_mains_quorum_is_counted_by_the_store(tmp_path: Path) -> None:
    """Windows named ana (A) and ben (B) on this main; the quorum approval is another main's copy."""
    async def body() -> None:
        outbox = Outbox()
        store = open_store(None, audit_path=tmp_path / "audit.sqlite3")
        names = {"window-a": "ana", "window-b": "ben"}
        pending = PendingRequests(outbox, asyncio.get_running_loop(), audit=AuditWriter(store.audit,
                                                                                       asyncio.get_running_loop()),
                                  window_name=names.get)
        shared = Store()
        pending.shared = shared
        quorum = QuorumInfo(needed=2, approvers=["ana", "ben", "chen"], approved=[])
        invoke = ElicitationInvoke(request=ElicitationRequest(server="demo", params=APPROVAL_PARAMS),
                                   response_channel="chan-q", created_at=1, expires_at=None, origin=None,
                                   kind="approval", machine="build-server", quorum=quorum)
        assert pending.open_copy(invoke, "build-server")
        [copy] = pending.all()

        def counts() -> list[list[str]]:
            return [body["quorum"]["approved"] for rid, body in outbox.topics(channels.INVOKE) if rid == WINDOW_A]

        pending.answer(WINDOW_A, "window-a", "chan-q", result("accept", {"decision": "allow-once"}))
        [(channel, person, decides, counted)] = shared.votes
        assert (channel, person, decides.content) == ("chan-q", "ana", {"decision": "allow-once"})
        counted(QuorumVote("counted", ("ana",)))  # the store counted it: the windows here show "1 of 2"
        assert counts() == [[], ["ana"]]

        pending.recount_from_store(copy, ["ana"])  # this main's own read of the same count: nothing new
        pending.recount_from_store(copy, [])  # an older read never takes a count back
        assert counts() == [[], ["ana"]]

        pending.answer(WINDOW_B, "window-b", "chan-q", result("accept", {"decision": "allow-once"}))
        shared.votes[1][3](QuorumVote("won", ("ana", "ben")))  # ben's decided it: the copy leaves the windows
        assert {(rid, body["by"]) for rid, body in outbox.topics(channels.DISMISS)} == \
            {(WINDOW_A, "window-b"), (WINDOW_B, "window-b")}
        assert pending.get("chan-q") is None and await store.audit.entries() == []  # its main's to audit
        await store.close()

    asyncio.run(body())


def test_a_quorum_of_this_main_is_counted_here_while_the_store_is_unreachable(tmp_path: Path) -> None:
    async def body() -> None:
        outbox = Outbox()
        store = open_store(None, audit_path=tmp_path / "audit.sqlite3")
        loop = asyncio.get_running_loop()
        pending = PendingRequests(outbox, loop, audit=AuditWriter(store.audit, loop),
                                  window_name={"window-a": "ana", "window-b": "ben"}.get)
        shared = Store()
        pending.shared = shared
        answers: list[ElicitationResult] = []
        quorum = QuorumInfo(needed=2, approvers=["ana", "ben"], approved=[])
        opened = pending.open(Elicitation.read("demo", APPROVAL_PARAMS),
                              RequestOptions(timeout_s=60, kind="approval", quorum=quorum), answers.append)
        for window, routing_id in (("window-a", WINDOW_A), ("window-b", WINDOW_B)):
            pending.answer(routing_id, window, opened.channel, result("accept", {"decision": "allow-once"}))
            shared.votes[-1][3](QuorumVote("unreachable"))
        assert answers == [ElicitationResult(action="accept", content={"decision": "allow-once"})]
        # each approval is handed to the store to count once it is back, before the request ends there
        assert shared.counted == [(opened.channel, "ana", "window-a"), (opened.channel, "ben", "window-b")]
        assert shared.endings == [(opened.channel, "accept")]
        [entry] = await store.audit.entries()
        assert (entry.decision, entry.window_name) == ("allow-once", "ana, ben")
        await store.close()

    asyncio.run(body())
