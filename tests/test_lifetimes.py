"""Lifetimes and policies of requests across the real boundary: server cancellation, expiry,
rate limit, decline-all, unsupported schemas, URL mode with completion and -32042 retry."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from kit.demo import demo_stdio_entry
from kit.main import RunningMain


def started(main_factory: Callable[..., RunningMain], **entry: Any) -> RunningMain:
    running = main_factory({"demo": demo_stdio_entry(**entry)})
    running.wait_server_ready("demo")
    return running


def result_text(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    return reply["result"]["content"][0]["text"]


def test_a_request_the_server_cancels_is_dismissed_everywhere(main_factory: Callable[..., RunningMain]) -> None:
    main = started(main_factory, protocolMode="legacy")
    window, other = main.peer(name="w1"), main.peer(name="w2")
    call = window.call_tool("demo", "ask_briefly", {"seconds": 1.5})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    other.expect_topic("msgElicitationTransferInvoke")
    for peer in (window, other):
        dismiss = peer.expect_topic("msgElicitationTransferDismiss")
        assert dismiss == {"responseChannel": invoke["responseChannel"], "reason": "cancelled"}
    assert result_text(window.expect_topic(call)) == "server gave up waiting"
    window.answer(invoke, "accept", {"name": "Too late", "party_size": 1})
    assert window.expect_error(invoke["responseChannel"])["code"] == "already-answered"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_unanswered_request_expires_and_the_server_gets_cancel(
    main_factory: Callable[..., RunningMain], mode: str
) -> None:
    main = started(main_factory, elicitationTimeoutSeconds=1, protocolMode=mode)
    window = main.peer()
    call = window.call_tool("demo", "book_table", {})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    assert invoke["expiresAt"] - invoke["createdAt"] == 1000
    assert window.expect_topic("msgElicitationTransferDismiss")["reason"] == "expired"
    assert json.loads(result_text(window.expect_topic(call))) == {"action": "cancel", "content": None}


def test_beyond_the_burst_requests_are_cancelled_with_a_notice(main_factory: Callable[..., RunningMain]) -> None:
    main = started(main_factory, elicitationBurst=2)
    window = main.peer()
    calls = [window.call_tool("demo", "book_table", {"restaurant": f"r{i}"}) for i in range(3)]
    notice = window.expect_topic("notice")
    assert notice["server"] == "demo" and "more than 2 requests" in notice["message"]
    invokes = [window.expect_topic("msgElicitationTransferInvoke") for _ in range(2)]
    for invoke in invokes:
        window.answer(invoke, "decline")
    actions = sorted(json.loads(result_text(window.expect_topic(call)))["action"] for call in calls)
    assert actions == ["cancel", "decline", "decline"]


def test_decline_all_from_a_server_for_this_session(demo_main: RunningMain) -> None:
    window = demo_main.peer()
    window.send("msgServerPolicy", {"server": "demo", "declineAll": True})
    assert "declining every request" in window.expect_topic("notice")["message"]
    call = window.call_tool("demo", "book_table", {})
    assert json.loads(result_text(window.expect_topic(call))) == {"action": "decline", "content": None}
    assert not [t for t, _ in window.received if t == "msgElicitationTransferInvoke"]
    window.send("msgServerPolicy", {"server": "demo", "declineAll": False})
    window.call_tool("demo", "book_table", {})
    assert window.expect_topic("msgElicitationTransferInvoke")["request"]["server"] == "demo"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_unsupported_schema_is_refused_with_32602_and_a_notice(
    main_factory: Callable[..., RunningMain], mode: str
) -> None:
    main = started(main_factory, protocolMode=mode)
    window = main.peer()
    schema = {"type": "object", "properties": {"address": {"type": "object", "properties": {}}}}
    reply = window.expect_topic(window.call_tool("demo", "ask", {"message": "Where?", "schema": schema}))
    notice = window.expect_topic("notice")
    assert notice["level"] == "warning" and "'address'" in notice["message"]
    text = reply["error"]["message"] if "error" in reply else result_text(reply)
    assert "address" in text and "unsupported" in text.lower()
    assert not [t for t, _ in window.received if t == "msgElicitationTransferInvoke"]
    assert main.proc.poll() is None


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_url_mode_accept_carries_no_content(main_factory: Callable[..., RunningMain], mode: str) -> None:
    main = started(main_factory, protocolMode=mode)
    window = main.peer()
    call = window.call_tool("demo", "open_link", {"url": "https://example.com/x"})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    params = invoke["request"]["params"]
    assert params["mode"] == "url" and params["url"] == "https://example.com/x"
    window.answer(invoke, "accept", {"smuggled": "value"})
    assert json.loads(result_text(window.expect_topic(call))) == {"action": "accept", "content": None}


def test_url_required_error_is_presented_then_the_call_retried_once(
    main_factory: Callable[..., RunningMain],
) -> None:
    main = started(main_factory, protocolMode="legacy")
    window = main.peer()
    call = window.call_tool("demo", "needs_auth", {"account": "ada"})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    assert invoke["request"]["params"]["url"] == "https://auth.example.com/login?account=ada"
    assert invoke["origin"] == window.window
    window.answer(invoke, "accept")
    # The user finishes in the browser; the server says so, and main retries the original call.
    window.call_tool("demo", "complete_auth", {"account": "ada"})
    complete = window.expect_topic("msgElicitationComplete")
    assert complete == {"server": "demo", "elicitationId": "auth-ada"}
    assert result_text(window.expect_topic(call)) == "authorized as ada"


def test_url_required_declined_returns_the_original_error(main_factory: Callable[..., RunningMain]) -> None:
    main = started(main_factory, protocolMode="legacy")
    window = main.peer()
    call = window.call_tool("demo", "needs_auth", {"account": "bob"})
    window.answer(window.expect_topic("msgElicitationTransferInvoke"), "decline")
    reply = window.expect_topic(call)
    assert reply["error"]["code"] == -32042
