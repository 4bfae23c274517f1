"""Quorum approvals across mains (issue 35, item 3): two real mains on the session's private
PostgreSQL, mcp's own `Client` on `elicitron serve` of main A calling a tool a `quorum: 2` rule
covers, and contract-only windows named as approvers on both mains. "1 of 2" reaches every window
on every main after the first approval; the second, on either main, completes the call; a deny by
any approver ends it; one person approving twice, from any main, counts once; two approvals at
once on two mains complete it exactly once; the audit names every approver and the machine of each."""

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from consent_kit import ConsentMain, invoke_of
from gateway_kit import Host, HostLoop, serve_params, text_of
from kit.peer import WirePeer
from kit.postgres import PostgresServer
from team_kit import Mains, audit_rows
from test_team_inbox import Windows, dismiss_of

from main_process.store.factory import open_store
from main_process.store.interface import SharedInbox
from main_process.store.records import Approver, QuorumVote
from shared import channels
from shared.codec import encode
from shared.messages import (
    DECISION_PROPERTY,
    ElicitationInvoke,
    ElicitationRequest,
    ElicitationResult,
    QuorumApprover,
    QuorumInfo,
)

APPROVERS = ["ana", "ben", "chen"]
QUORUM_RULE = {"server": "demo", "tool": "cancel_*", "quorum": 2, "approvers": APPROVERS}
INVOKE = "msgElicitationTransferInvoke"
Team = tuple[Mains, ConsentMain, ConsentMain, Host]


# ---- the store alone: two mains' connections counting at once ----------------------------------------


def test_approvals_at_once_on_two_mains_stores_decide_each_request_once_and_one_person_counts_once(
        pg_url: str) -> None:
    """20 requests, each approved by ana on one main's connection and chen on the other's at the
    same moment: every one is decided exactly once, with both approvers; ben approving on both at
    once counts once and decides nothing."""
    allow_once = ElicitationResult(action="accept", content={DECISION_PROPERTY: "allow-once"})

    async def vote(inbox: SharedInbox, invoke: ElicitationInvoke, person: str) -> QuorumVote:
        return await inbox.vote(invoke, person, allow_once, Approver(window=f"{person}-w", machine=inbox.machine,
                                                                    name=person), "allow-once")

    async def scenario() -> None:
        laptop, server = open_store(pg_url, machine="laptop-a"), open_store(pg_url, machine="build-server")
        try:
            await asyncio.gather(laptop.open(), server.open())
            held, other = laptop.inbox, server.inbox
            assert held is not None and other is not None
            await held.join("main-a", 0, 1)
            invokes = [quorum_invoke() for _ in range(20)]
            for invoke in invokes:
                assert await held.publish(invoke, encode(channels.INVOKE, invoke)[1])
            votes = await asyncio.gather(*(vote(inbox, invoke, person) for invoke in invokes
                                           for inbox, person in ((held, "ana"), (other, "chen"))))
            for pair in zip(votes[::2], votes[1::2], strict=True):
                assert sorted(v.result for v in pair) == ["counted", "won"]
                assert sorted(next(v for v in pair if v.result == "won").people) == ["ana", "chen"]
            entries = {entry.channel: entry for entry in await laptop.audit.entries()}
            assert all(sorted(entries[i.response_channel].approvers or [], key=lambda a: a.person) ==
                       [QuorumApprover(person="ana", machine="laptop-a"), QuorumApprover(person="chen",
                                                                                         machine="build-server")]
                       for i in invokes)

            twice = quorum_invoke()
            assert await held.publish(twice, encode(channels.INVOKE, twice)[1])
            both = await asyncio.gather(vote(held, twice, "ben"), vote(other, twice, "ben"))
            assert [(v.result, v.people) for v in both] == [("counted", ("ben",))] * 2
            assert (await vote(other, twice, "ana")).people == ("ben", "ana")
            assert (await vote(held, twice, "chen")).result == "lost"  # decided already: nothing more counts
        finally:
            await asyncio.gather(laptop.close(), server.close())

    asyncio.run(scenario())


def quorum_invoke() -> ElicitationInvoke:
    now_ms = time.time_ns() // 1_000_000
    return ElicitationInvoke(
        request=ElicitationRequest(server="demo", params={"mode": "form", "message": "Allow cancel_booking?",
                                                          "requestedSchema": {"type": "object", "properties": {}}}),
        response_channel=channels.new_result_channel(), created_at=now_ms, expires_at=now_ms + 60_000, origin=None,
        kind="approval", quorum=QuorumInfo(needed=2, approvers=APPROVERS, approved=[]))


# ---- two real mains ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def team(postgres: PostgresServer) -> Iterator[Team]:
    """Main A ("laptop-a", whose gateway the host calls through) and main B ("build-server") on one
    store, both with the quorum rule, for the whole module. Each test ends its call."""
    database = postgres.new_database()
    mains = Mains(postgres.url(database), rules=[QUORUM_RULE])
    loop = HostLoop()
    host: Host | None = None
    try:
        a, b = mains.start_all("laptop-a", "build-server")
        host = Host(loop, serve_params(a.connection, "--server", "demo"), "Claude Desktop").open()
        yield mains, a, b, host
    finally:
        if host is not None:
            host.close()
        loop.close()
        mains.close()
        postgres.drop_database(database)


@pytest.fixture
def windows() -> Iterator[Windows]:
    opened = Windows()
    yield opened
    for peer in opened.all:
        peer.close()


def recount(channel: str, approved: list[str]) -> Callable[[str, Any], bool]:
    """The invoke sent again with this count."""
    return lambda t, b: t == INVOKE and b["responseChannel"] == channel and b["quorum"]["approved"] == approved


def allow(window: WirePeer, channel: str) -> None:
    window.send(channel, {"action": "accept", "content": {"decision": "allow-once"}})


def cancel(host: Host, restaurant: str) -> Any:
    return host.start(lambda c: c.call_tool("cancel_booking", {"restaurant": restaurant}))


def shown(*windows: WirePeer) -> str:
    """The one approval every window shows (on both mains: the same channel); its channel."""
    invokes = [invoke_of(window) for window in windows]
    assert {invoke["responseChannel"] for invoke in invokes} == {invokes[0]["responseChannel"]}
    assert all(invoke["quorum"] == {"needed": 2, "approvers": APPROVERS, "approved": []} for invoke in invokes)
    return str(invokes[0]["responseChannel"])


def decided_row(main: ConsentMain, mains: Mains, channel: str) -> dict[str, Any]:
    [row] = [row for row in audit_rows(main, mains.url, 1) if row["channel"] == channel and row["outcome"]]
    return row


def test_one_of_two_shows_on_every_main_a_second_approval_counts_once_and_another_completes_the_call(
        team: Team, windows: Windows) -> None:
    mains, a, b, host = team
    ana, ben_on_b, chen = windows.open(a, "ana"), windows.open(b, "ben"), windows.open(b, "chen")
    call = cancel(host, "A")
    channel = shown(ana, ben_on_b, chen)

    allow(ben_on_b, channel)  # an approver on B, the main that does not hold the call: "1 of 2" everywhere
    for window in (ana, ben_on_b, chen):
        window.expect(recount(channel, ["ben"]))

    ben_on_a = windows.open(a, "ben")  # ben again, now from a window on A: still one approval
    [welcome] = [body for topic, body in ben_on_a.received if topic == "welcome"]
    assert [p["quorum"]["approved"] for p in welcome["pending"]] == [["ben"]]  # a window attaching later: the count
    allow(ben_on_a, channel)
    ben_on_a.expect(recount(channel, ["ben"]))
    assert not call.done()

    allow(ana, channel)  # the second person completes the call
    assert text_of(call.result(30)) == "cancelled the booking at A"
    for window in (ben_on_b, chen, ben_on_a):
        assert dismiss_of(window, channel)["reason"] == "answered"

    row = decided_row(b, mains, channel)
    assert (row["decision"], row["windowName"], row["machine"]) == ("allow-once", "ben, ana", "laptop-a")
    assert row["approvers"] == [{"person": "ben", "machine": "build-server"}, {"person": "ana", "machine": "laptop-a"}]
    assert [line for line in a.cli("audit").stdout.splitlines() if "ben on build-server, ana on laptop-a" in line]


def test_a_deny_by_an_approver_on_another_main_ends_the_call(team: Team, windows: Windows) -> None:
    mains, a, b, host = team
    ana, ben = windows.open(a, "ana"), windows.open(b, "ben")
    call = cancel(host, "B")
    channel = shown(ana, ben)

    allow(ana, channel)
    ben.expect(recount(channel, ["ana"]))
    ben.send(channel, {"action": "accept", "content": {"decision": "deny"}})
    result = call.result(30)
    assert result.is_error is True and '(in the window "ben")' in text_of(result)
    for window in (ana, ben):
        assert dismiss_of(window, channel)["reason"] == "answered"

    row = decided_row(a, mains, channel)
    assert (row["decision"], row["windowName"], row["machine"], row["answerMachine"]) == \
        ("deny", "ana, ben", "laptop-a", "build-server")
    assert row["approvers"] == [{"person": "ana", "machine": "laptop-a"}, {"person": "ben", "machine": "build-server"}]


def test_two_approvals_at_once_on_two_mains_complete_the_call_once(team: Team, windows: Windows) -> None:
    mains, a, b, host = team
    ana, chen = windows.open(a, "ana"), windows.open(b, "chen")
    call = cancel(host, "C")
    channel = shown(ana, chen)

    allow(ana, channel)
    allow(chen, channel)
    assert text_of(call.result(30)) == "cancelled the booking at C"
    for window in (ana, chen):
        assert dismiss_of(window, channel)["reason"] == "answered"
        assert [body for topic, body in window.received if topic == "error"] == []  # neither approval was lost

    row = decided_row(a, mains, channel)
    assert sorted(row["windowName"].split(", ")) == ["ana", "chen"]
    assert sorted((p["person"], p["machine"]) for p in row["approvers"]) == [("ana", "laptop-a"),
                                                                            ("chen", "build-server")]
