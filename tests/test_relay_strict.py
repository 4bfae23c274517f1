"""Consent is decided on every message or the message does not pass (issue 33, finding 1).

The relay reads envelopes with msgspec (strict JSON); servers read with laxer parsers: pydantic takes
NaN and Infinity, `JSON.parse` a float id (`7.0`, `8e0`) and a number out of range. A message the relay
cannot read strictly is answered with a JSON-RPC error and never reaches the other side, in either
direction. In process, with plain values (`RelaySession`, no sockets); tests/test_relay_fuzz.py
sends the same forms through real hosts, serve, main and servers.
"""

import json
from typing import Any

import pytest
from test_relay_core import FORM, MODERN, decoded, initialize, raw, req, session

CALL = b'{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"text":%s}}}'

# Each: what a lax parser of some SDK reads as a tools/call, and msgspec (strict JSON) does not.
LAX_CALLS = {
    "NaN in the arguments": CALL % (b"101", b"NaN"),
    "Infinity in the arguments": CALL % (b"102", b"Infinity"),
    "-Infinity in the arguments": CALL % (b"103", b"-Infinity"),
    "a float id": CALL % (b"7.0", b'"x"'),
    "an exponent id": CALL % (b"8e0", b'"x"'),
    "a number out of range": CALL % (b"104", b"1e999"),
    "a BOM before the message": b"\xef\xbb\xbf" + CALL % (b"105", b'"x"'),
    "invalid UTF-8 in a string": CALL % (b"106", b'"\xff\xfe"'),
    "a lone surrogate escape": CALL % (b"107", b'"\\ud800"'),
    "a raw control character in a string": CALL % (b"109", b'"a\tb"'),
}


def _deny() -> Any:
    relay, ports, sent = session()
    ports.decision = "deny"
    return relay, ports, sent


@pytest.mark.parametrize("form", list(LAX_CALLS), ids=list(LAX_CALLS))
def test_a_call_the_relay_cannot_read_is_answered_with_an_error_and_never_sent(form: str) -> None:
    relay, ports, sent = _deny()
    relay.from_host(LAX_CALLS[form])
    assert sent == []  # the server never saw it, so no tool ran
    [answer] = decoded(ports.host)
    assert answer["error"]["code"] in (-32700, -32600)
    assert "not sent to the server" in answer["error"]["message"]


def test_deep_nesting_is_refused_or_decided_never_sent_unread() -> None:
    """msgspec's depth limit depends on the Python it runs on: refused, or read and denied."""
    relay, ports, sent = _deny()
    relay.from_host(CALL % (b"108", b"[" * 5000 + b"]" * 5000))
    assert sent == []
    [answer] = decoded(ports.host)
    assert answer["error"]["code"] == -32700 if "error" in answer else answer["result"]["isError"] is True


# Values inside params are read only where a decision needs them; the envelope always is.
IN_PARAMS = ("a number out of range", "invalid UTF-8 in a string")
IN_ENVELOPE = [form for form in LAX_CALLS if form not in IN_PARAMS]


@pytest.mark.parametrize("form", IN_ENVELOPE, ids=IN_ENVELOPE)
def test_an_unreadable_envelope_is_refused_when_no_decision_is_needed_too(form: str) -> None:
    relay, ports, sent = session()  # toolApproval off: calls pass unread, but never unreadable ones
    relay.from_host(LAX_CALLS[form])
    assert sent == []
    assert len(ports.host) == 1


@pytest.mark.parametrize("form", IN_PARAMS, ids=IN_PARAMS)
def test_with_nothing_to_decide_the_arguments_pass_unread_as_the_host_wrote_them(form: str) -> None:
    relay, ports, sent = session()  # every call is allowed: what the server makes of them is its own
    relay.from_host(LAX_CALLS[form])
    assert sent == [LAX_CALLS[form]] and ports.host == []


def test_the_error_carries_the_id_a_lax_reader_finds_so_the_host_stops_waiting() -> None:
    relay, ports, _sent = _deny()
    relay.from_host(LAX_CALLS["a float id"])
    relay.from_host(LAX_CALLS["NaN in the arguments"])
    assert [answer["id"] for answer in decoded(ports.host)] == [7, 101]
    assert [answer["error"]["code"] for answer in decoded(ports.host)] == [-32600, -32700]


def test_duplicate_keys_are_read_as_every_sdk_reads_them_the_last_one_wins() -> None:
    relay, ports, sent = _deny()
    relay.from_host(b'{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call",'
                    b'"params":{"name":"x"},"params":{"name":"echo","arguments":{}}}')
    assert sent == []  # decided as the tools/call the server would read, and denied
    [answer] = decoded(ports.host)
    assert answer["result"]["isError"] is True


def test_a_modern_call_with_an_unreadable_argument_is_refused_not_passed_as_malformed() -> None:
    relay, ports, sent = _deny()
    message = (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"n":1e999},'
               b'"_meta":' + json.dumps(MODERN).encode() + b"}}")
    relay.from_host(message)
    assert sent == []
    [answer] = decoded(ports.host)
    assert answer["id"] == 5 and answer["error"]["code"] == -32700


def test_a_call_whose_name_or_arguments_cannot_be_decided_on_is_refused() -> None:
    relay, ports, sent = _deny()
    relay.from_host(req(1, "tools/call", {"name": ["echo"], "arguments": {}}))
    relay.from_host(req(2, "tools/call", {"name": "echo", "arguments": ["x"]}))
    assert sent == []
    assert [(a["id"], a["error"]["code"]) for a in decoded(ports.host)] == [(1, -32602), (2, -32602)]


def test_a_batch_with_an_unreadable_call_refuses_that_one_and_a_broken_batch_is_refused_whole() -> None:
    relay, ports, sent = _deny()
    relay.from_host(b"[" + LAX_CALLS["a float id"] + b"," + req(3, "ping") + b"]")
    assert decoded(sent) == [{"jsonrpc": "2.0", "id": 3, "method": "ping"}]
    assert decoded(ports.host)[0]["id"] == 7
    relay.from_host(b"[" + LAX_CALLS["NaN in the arguments"] + b"]")
    assert len(sent) == 1
    assert decoded(ports.host)[1]["error"]["code"] == -32700


def test_an_initialize_that_is_not_strict_json_is_refused() -> None:
    relay, ports, sent = session()
    relay.from_host(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{},"x":1e999}}')
    assert sent == []
    assert decoded(ports.host)[0]["error"]["code"] == -32700


# ---- the server's side ---------------------------------------------------------------------------

def test_a_servers_elicitation_the_relay_cannot_read_never_reaches_the_host() -> None:
    relay, ports, sent = session(route="windows")
    initialize(relay, {"elicitation": {"form": {}}})
    params = json.dumps(FORM).encode()[:-1] + b',"x":NaN}'
    relay.from_server(b'{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":' + params + b"}")
    assert ports.host == [] and ports.cards == []
    [answer] = decoded(sent)
    assert answer["id"] == 9 and answer["error"]["code"] == -32700


def test_a_servers_answer_the_relay_cannot_read_is_an_error_for_the_hosts_request() -> None:
    relay, ports, _sent = session()
    relay.from_host(req(4, "tools/call", {"name": "echo", "arguments": {}}))
    assert ports.calls == 1
    relay.from_server(b'{"jsonrpc":"2.0","id":4,"result":{"content":[],"n":NaN}}')
    [answer] = decoded(ports.host)
    assert answer["id"] == 4 and answer["error"]["code"] == -32603
    assert ports.calls == 0


def test_a_servers_unreadable_notification_is_dropped() -> None:
    relay, ports, sent = session()
    relay.from_server(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"n":Infinity}}')
    relay.from_server(raw({"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": 1}}))
    assert decoded(ports.host) == [{"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": 1}}]
    assert sent == []
