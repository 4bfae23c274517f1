"""A quorum approval across real processes: mcp's own `Client` on `elicitron serve`, a real main and
the demo server, and two contract-only windows named ana and ben (approvers of a `quorum: 2` rule)."""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from consent_kit import ConsentMains, demo, invoke_of, started_mains
from gateway_kit import Host, HostLoop, serve_params, text_of

pytestmark = pytest.mark.slow  # a real main, gateway, host and server

QUORUM_RULE = {"server": "demo", "tool": "cancel_*", "quorum": 2, "approvers": ["ana", "ben", "chen"]}


@pytest.fixture
def consent_mains(tmp_path: Path) -> Iterator[ConsentMains]:
    yield from started_mains(tmp_path)


@pytest.fixture(scope="module")
def hosts() -> Iterator[HostLoop]:
    loop = HostLoop()
    yield loop
    loop.close()


def recount(channel: str) -> Callable[[str, Any], bool]:
    return lambda t, b: t == "msgElicitationTransferInvoke" and b["responseChannel"] == channel


def dismissed(channel: str) -> Callable[[str, Any], bool]:
    return lambda t, b: t == "msgElicitationTransferDismiss" and b["responseChannel"] == channel


def allow(window: Any, invoke: dict[str, Any]) -> None:
    window.answer(invoke, "accept", {"decision": "allow-once"})


def test_two_approvers_complete_a_quorum_call_and_a_deny_by_either_ends_it(
        consent_mains: ConsentMains, hosts: HostLoop) -> None:
    main = consent_mains({"demo": demo()}, rules=[QUORUM_RULE])
    host = Host(hosts, serve_params(main.connection, "--server", "demo"), "Claude Desktop").open()
    ana, ben, stranger = main.peer(name="ana"), main.peer(name="ben"), main.peer(name="dan")
    try:
        call = host.start(lambda c: c.call_tool("cancel_booking", {"restaurant": "A"}))
        first = invoke_of(ana)
        channel = first["responseChannel"]
        assert first["quorum"] == {"needed": 2, "approvers": ["ana", "ben", "chen"], "approved": []}
        for window in (ben, stranger):
            invoke_of(window)

        stranger.answer(first, "accept", {"decision": "allow-once"})  # not listed: refused, stays open
        refusal = stranger.expect_error(channel)
        assert refusal["code"] == "not-approver"
        assert "dan is not an approver of this call (approvers: ana, ben, chen)" in refusal["message"]

        allow(ana, first)  # "1 of 2" to every window
        counts = [window.expect(recount(channel))[1]["quorum"] for window in (ana, ben, stranger)]
        assert all(q == {"needed": 2, "approvers": ["ana", "ben", "chen"], "approved": ["ana"]} for q in counts)
        allow(ana, first)  # ana again: counts once
        assert all(window.expect(recount(channel))[1]["quorum"]["approved"] == ["ana"] for window in (ana, ben))
        assert not call.done()

        allow(ben, first)  # the second approval completes the call
        assert text_of(call.result(30)) == "cancelled the booking at A"
        assert ben.expect(dismissed(channel))[1]["reason"] == "answered"

        denied = host.start(lambda c: c.call_tool("cancel_booking", {"restaurant": "B"}))
        second = invoke_of(ana)
        allow(ana, second)
        ben.expect(recount(second["responseChannel"]))
        ben.answer(second, "accept", {"decision": "deny"})  # a deny by any approver ends it
        result = denied.result(30)
        assert result.is_error is True and '(in the window "ben")' in text_of(result)
        ana.expect(dismissed(second["responseChannel"]))

        rows = main.audit_until(lambda rows: sum(r["kind"] == "approval" and r["outcome"] is not None
                                                 for r in rows) >= 2)
        decided = sorted((r["decision"], r["windowName"]) for r in rows if r["kind"] == "approval" and r["decision"])
        assert decided == [("allow-once", "ana, ben"), ("deny", "ana, ben")]
    finally:
        host.close()
