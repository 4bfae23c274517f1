"""host_cancels.py: whose call a 2025-era server's withdrawn elicitation was for (no I/O)."""

from pathlib import Path

from main_process.clock import SettableClock
from main_process.relay.host_cancels import ATTRIBUTION_WINDOW_S, HostCancels


def cancels() -> tuple[HostCancels, SettableClock]:
    clock = SettableClock()
    return HostCancels(clock), clock


def test_a_request_made_while_only_cancelled_calls_were_in_flight_is_the_hosts_at_once() -> None:
    known, _ = cancels()
    known.asked(7, frozenset({1}))
    known.asked(8, frozenset({1, 2}))
    assert known.call_cancelled(1) == [7]
    assert known.call_cancelled(2) == [8]  # both calls it could be for are cancelled now


def test_the_servers_withdrawal_after_a_hosts_cancel_is_explained_once() -> None:
    known, _ = cancels()
    known.asked(7, frozenset({1, 2}))
    known.asked(8, frozenset({1, 2}))
    assert known.call_cancelled(2) == []  # 7 and 8 may be call 1's
    assert known.withdrawn(8) is True
    assert known.withdrawn(7) is False  # call 2's cancel explained one withdrawal already


def test_a_withdrawal_later_than_the_window_is_not_taken_as_the_cancels_reply() -> None:
    known, clock = cancels()
    known.asked(7, frozenset({1, 2}))
    known.call_cancelled(1)
    clock.advance(ATTRIBUTION_WINDOW_S + 1)
    assert known.withdrawn(7) is False


def test_a_request_made_outside_any_call_is_never_attributed() -> None:
    known, _ = cancels()
    known.asked(7, frozenset())
    known.asked(8, frozenset({1}))
    assert known.call_cancelled(1) == [8]
    assert known.withdrawn(7) is False


def test_a_cancel_no_open_request_may_be_for_is_not_kept() -> None:
    known, _ = cancels()
    known.asked(7, frozenset({1, 2}))
    known.forget(7)  # answered
    assert known.call_cancelled(1) == []
    known.asked(8, frozenset({2, 3}))
    assert known.withdrawn(8) is False  # call 1 was never a candidate of request 8



def test_the_protocol_states_the_window_main_uses() -> None:
    protocol = (Path(__file__).parents[1] / "shared" / "PROTOCOL.md").read_text()
    assert f"within {ATTRIBUTION_WINDOW_S:g} s of the host cancelling" in protocol
