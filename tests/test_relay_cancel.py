"""A host's cancelled call takes its cards back (main's RelaySession, in process): the server
withdrawing its elicitation (handshake era), the host cancelling a call main holds while the windows
answer its input round (2026-07-28); and such a call counts as in flight meanwhile."""

from test_relay_core import FORM, MODERN, decoded, input_required, raw, req, resp, session

from shared.messages import ElicitationResult


def cancelled(request_id: int | str) -> bytes:
    return raw({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})


def test_a_server_withdrawing_its_elicitation_dismisses_the_windows_card_and_the_host_is_not_told() -> None:
    relay, ports, sent = session("windows")
    relay.from_host(req(1, "tools/call", {"name": "book", "arguments": {}}))
    relay.from_server(req(7, "elicitation/create", FORM))
    relay.from_host(cancelled(1))
    relay.from_server(cancelled(7))  # the server's tool was cancelled, and its question with it
    assert ports.cards[0].withdrawn
    assert ports.host == []  # the host never had that request
    assert [m.get("method") for m in decoded(sent)] == ["tools/call", "notifications/cancelled"]


def test_a_server_withdrawing_a_request_the_host_has_tells_the_host() -> None:
    relay, ports, _ = session("first")
    initialize_params = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
                         "clientInfo": {"name": "h", "version": "1"}}
    relay.from_host(req(0, "initialize", initialize_params))
    relay.from_server(req(7, "elicitation/create", FORM))
    relay.from_server(cancelled(7))
    assert ports.cards[0].withdrawn
    assert [m.get("method") for m in decoded(ports.host)] == ["elicitation/create", "notifications/cancelled"]


def test_a_modern_call_main_holds_for_the_windows_counts_and_its_cancellation_takes_the_cards_back() -> None:
    relay, ports, sent = session("windows")
    relay.from_host(req(11, "tools/call", {"name": "book", "arguments": {}, "_meta": MODERN}))
    relay.from_server(resp(11, input_required({"k": {"method": "elicitation/create", "params": FORM}})))
    assert ports.calls == 1  # the host still waits on its call
    relay.from_host(cancelled(11))
    assert ports.cards[0].withdrawn and ports.calls == 0
    ports.cards[0].resolve(ElicitationResult(action="accept", content={"name": "late"}))
    assert [m.get("method") for m in decoded(sent)] == ["tools/call", "notifications/cancelled"]  # no retry
    assert ports.host == []
