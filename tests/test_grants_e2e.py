"""Grants across real processes (issue 36 item 2): a real main and demo MCP server, a host peer as
the `elicitron serve` gateway is one, a contract-only window. The approval offers grants
(`approval.grants`), the answer names one (`grant`), and a grant never covers more than that."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consent_kit import ConsentMains, WireHost, demo, invoke_of, started_mains, text_of


@pytest.fixture
def consent_mains(tmp_path: Path) -> Iterator[ConsentMains]:
    yield from started_mains(tmp_path)


def allow_with(window: Any, invoke: dict[str, Any], decision: str, grant: dict[str, Any]) -> None:
    window.send(invoke["responseChannel"], {"action": "accept", "content": {"decision": decision}, "grant": grant})


def test_a_session_grant_for_exact_arguments_asks_again_for_other_arguments(consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window = main.peer(name="laptop")
    host = WireHost(main, name="Claude")

    first = host.call("demo", "echo", {"text": "hello"})
    invoke = invoke_of(window)
    assert invoke["approval"]["grants"] == {"arguments": ["exact", "pattern", "any"],
                                            "durations": ["session", "hour", "until", "always"],
                                            "pattern": {"text": "hello"}}
    channel = invoke["responseChannel"]
    allow_with(window, invoke, "allow-session", {"arguments": "pattern", "pattern": {"text": "bye*"}})
    refused = window.expect_error(channel)
    assert refused["code"] == "invalid-content"  # a window asks again
    assert refused["message"] == "the pattern does not cover the call it is given on: text"
    allow_with(window, invoke, "allow-always", {"arguments": "exact", "duration": "session"})
    assert window.expect_error(channel)["code"] == "bad-body"  # a session grant goes with allow-session
    allow_with(window, invoke, "allow-session", {"arguments": "exact", "duration": "session"})  # still pending
    assert text_of(host.result(first)) == "hello"

    assert text_of(host.result(host.call("demo", "echo", {"text": "hello"}))) == "hello"  # no card: granted
    other = host.call("demo", "echo", {"text": "something else"})
    asked = invoke_of(window)  # other arguments: asked again
    assert asked["approval"]["arguments"] == {"text": "something else"}
    window.answer(asked, "accept", {"decision": "deny"})
    assert host.result(other)["isError"] is True

    [rule] = main.rules()
    assert (rule["tool"], rule["scope"], rule["arguments"], rule["host"]) == ("echo", "session", "exact", "Claude")
    listed = main.cli("rules")
    assert listed.returncode == 0, listed.stderr
    assert "tool echo with exactly the approved arguments → allow (Claude only)" in listed.stdout
    assert "this session" in listed.stdout


def test_a_single_use_grant_for_arguments_like_these_applies_once_and_is_stored_until_used(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window = main.peer()
    host = WireHost(main)

    first = host.call("demo", "echo", {"text": "/tmp/a"})
    invoke = invoke_of(window)
    assert invoke["approval"]["grants"]["pattern"] == {"text": "/tmp/*"}
    allow_with(window, invoke, "allow-always", {"arguments": "pattern", "pattern": {"text": "/tmp/*"},
                                                "duration": "hour", "singleUse": True})
    assert text_of(host.result(first)) == "/tmp/a"
    [rule] = main.rules()
    assert (rule["arguments"], rule["pattern"], rule["singleUse"], rule["scope"]) == (
        "pattern", {"text": "/tmp/*"}, True, "until")
    assert "tool echo with text like “/tmp/*” → allow, one call only" in main.cli("rules").stdout

    assert text_of(host.result(host.call("demo", "echo", {"text": "/tmp/b"}))) == "/tmp/b"  # the one use
    again = host.call("demo", "echo", {"text": "/tmp/c"})
    window.answer(invoke_of(window), "accept", {"decision": "allow-once"})  # used up: asked again
    assert text_of(host.result(again)) == "/tmp/c"
    assert main.rules() == []
