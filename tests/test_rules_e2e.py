"""Remembered answers and config rules across real processes: a real main, the demo MCP server,
contract-only wire peers as windows, and the CLI as a user runs it."""

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consent_kit import ConsentMain, ConsentMains, demo, invoke_of, started_mains, write_consent_config


@pytest.fixture
def consent_mains(tmp_path: Path) -> Iterator[ConsentMains]:
    yield from started_mains(tmp_path)


DAY_MS = 24 * 3600 * 1000
BOOKING = {"name": "Ada", "party_size": 3}


def booked(window: Any, channel: str) -> dict[str, Any]:
    """The demo's book_table result: the answer as the server received it."""
    reply = window.expect_topic(channel)
    assert "result" in reply, reply
    answer: dict[str, Any] = json.loads(reply["result"]["content"][0]["text"])
    return answer


def remember(invoke: dict[str, Any], window: Any, action: str, scope: str, until: int | None = None,
             content: dict[str, Any] | None = None) -> None:
    body: dict[str, Any] = {"action": action, "remember": {"scope": scope}}
    if until is not None:
        body["remember"]["until"] = until
    if content is not None:
        body["content"] = content
    window.send(invoke["responseChannel"], body)


def test_a_remembered_answer_is_given_with_no_window_and_audited_with_its_rule(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo()})
    window = main.peer(name="remembering window")
    caller = main.peer(name="cli", role="controller")
    first = caller.call_tool("demo", "book_table", {"restaurant": "Noma"})
    invoke = invoke_of(window)
    remember(invoke, window, "accept", "always", content=BOOKING)
    assert booked(caller, first) == {"action": "accept", "content": BOOKING}
    rules = window.expect_topic("rules")["rules"]  # pushed live to the window
    assert [(r["kind"], r["source"], r["server"], r["scope"], r["action"], r["fields"]) for r in rules] == [
        ("answer", "user", "demo", "always", "accept", ["name", "party_size", "outdoor", "budget", "cuisine"])]
    assert rules[0]["message"] == "Book a table at Noma?"
    assert rules[0]["createdBy"] == f"remembering window ({window.window})"
    assert "content" not in rules[0], "remembered values never go on the wire"
    window.close()

    # No window attached now: the same question is answered at once by the rule.
    again = caller.call_tool("demo", "book_table", {"restaurant": "Noma"})
    assert booked(caller, again) == {"action": "accept", "content": BOOKING}
    row = next(r for r in main.audit() if r["ruleId"] == rules[0]["id"])
    assert (row["server"], row["outcome"], row["window"], row["message"]) == (
        "demo", "accept", None, "Book a table at Noma?")
    listed = main.rules()
    assert [r["id"] for r in listed] == [rules[0]["id"]]
    assert json.loads(main.cli("status", "--json").stdout)["pending"] == []  # nothing ever opened

    # Another question (another restaurant: another message) is not the same question.
    other = caller.call_tool("demo", "book_table", {"restaurant": "Septime"})
    late = main.peer(name="late window", hello=False)
    welcome = late.hello()
    pending = welcome["pending"] or [invoke_of(late)]
    assert pending[0]["request"]["params"]["message"] == "Book a table at Septime?"
    late.answer(pending[0], "decline")
    assert booked(caller, other)["action"] == "decline"


def test_a_remembered_decline_answers_and_the_same_schema_in_another_order_is_the_same_question(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo()})
    window = main.peer()
    schema: dict[str, Any] = {"type": "object", "properties": {"ok": {"type": "boolean", "default": False},
                                               "why": {"type": "string"}}, "required": ["ok"]}
    first = window.call_tool("demo", "ask", {"message": "Share  your\ncontacts?", "schema": schema})
    remember(invoke_of(window), window, "decline", "session")
    assert booked(window, first) == {"action": "decline", "content": None}
    # Same question: keys in another order, other whitespace in the message, another default.
    reordered = {"required": ["ok"], "properties": {"why": {"type": "string"},
                                                    "ok": {"default": True, "type": "boolean"}}, "type": "object"}
    second = window.call_tool("demo", "ask", {"message": "Share your contacts?", "schema": reordered})
    assert booked(window, second) == {"action": "decline", "content": None}
    # Another schema (a field more) is another question.
    bigger = {**schema, "properties": {**schema["properties"], "whom": {"type": "string"}}}
    third = window.call_tool("demo", "ask", {"message": "Share your contacts?", "schema": bigger})
    window.answer(invoke_of(window), "accept", {"ok": True})
    assert booked(window, third)["action"] == "accept"


def test_remember_that_main_cannot_keep_is_refused_and_the_request_stays_pending(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo()})
    window = main.peer()
    call = window.call_tool("demo", "book_table", {})
    invoke = invoke_of(window)
    channel = invoke["responseChannel"]
    remember(invoke, window, "accept", "until", until=int(time.time() * 1000) - DAY_MS, content=BOOKING)
    assert "future" in window.expect_error(channel)["message"]
    remember(invoke, window, "cancel", "always")
    assert window.expect_error(channel)["code"] == "bad-body"
    window.answer(invoke, "accept", BOOKING)  # the request was still pending
    assert booked(window, call)["action"] == "accept"
    url_call = window.call_tool("demo", "open_link", {})
    url_invoke = invoke_of(window)
    remember(url_invoke, window, "accept", "always")
    assert "never remembered" in window.expect_error(url_invoke["responseChannel"])["message"]
    window.answer(url_invoke, "decline")
    window.expect_topic(url_call)
    assert main.rules() == []


def test_a_config_rule_answers_headless_a_misfit_is_skipped_with_a_notice_and_url_requests_still_ask(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo()}, rules=[
        {"server": "demo", "message": "Book a table*", "answer": {"action": "accept", "content": BOOKING}},
        {"server": "demo", "message": "Pick*", "answer": {"action": "accept", "content": {"color": "mauve"}}},
        {"server": "demo", "answer": {"action": "accept"}},  # any message, even a URL request's
    ])
    caller = main.peer(name="cli", role="controller")
    headless = caller.call_tool("demo", "book_table", {"restaurant": "Anywhere"})
    assert booked(caller, headless) == {"action": "accept", "content": BOOKING}
    row = next(r for r in main.audit() if r["ruleId"] == "config-1")
    assert row["outcome"] == "accept" and row["window"] is None

    window = main.peer()
    schema = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "blue"]}},
              "required": ["color"]}
    misfit = window.call_tool("demo", "ask", {"message": "Pick a color", "schema": schema})
    notices = [window.expect_topic("notice")["message"] for _ in range(2)]
    assert [n.split()[1] for n in notices] == ["config-2", "config-3"]  # neither answer fits
    assert all("does not fit" in n for n in notices)
    invoke = invoke_of(window)  # so it is asked in the window
    assert invoke["request"]["params"]["message"] == "Pick a color"
    window.answer(invoke, "accept", {"color": "blue"})
    assert booked(window, misfit)["content"] == {"color": "blue"}

    url_call = window.call_tool("demo", "open_link", {})
    url_invoke = invoke_of(window)  # config-3 matches any message, yet a URL request is asked
    assert url_invoke["request"]["params"]["mode"] == "url"
    window.answer(url_invoke, "decline")
    window.expect_topic(url_call)
    listed = main.rules()
    assert [(r["id"], r["source"]) for r in listed] == [("config-1", "config"), ("config-2", "config"),
                                                       ("config-3", "config")]
    refused = main.cli("rules", "revoke", "config-1")
    assert refused.returncode == 1 and "config rule" in refused.stderr

    assert main.config is not None  # the config changes: `elicitron reload` replaces its rules
    write_consent_config(main.config, {"demo": demo()}, rules=[
        {"server": "demo", "tool": "echo", "decision": "deny"}])
    assert main.cli("reload").returncode == 0
    pushed = window.expect(lambda t, b: t == "rules" and len(b["rules"]) == 1)[1]["rules"]
    assert [(r["id"], r["kind"], r["tool"], r["decision"]) for r in pushed] == [("config-1", "tool", "echo", "deny")]
    again = caller.call_tool("demo", "book_table", {"restaurant": "Anywhere"})
    window.answer(invoke_of(window), "decline")  # no answer rule any more: asked
    assert booked(caller, again)["action"] == "decline"


def test_revoking_makes_the_next_request_ask_again_in_a_window_already_open(consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo()})
    window = main.peer(name="open window")
    first = window.call_tool("demo", "book_table", {})
    remember(invoke_of(window), window, "accept", "always", content=BOOKING)
    booked(window, first)
    rule_id = window.expect(lambda t, b: t == "rules" and b["rules"])[1]["rules"][0]["id"]
    answered = window.call_tool("demo", "book_table", {})
    assert booked(window, answered)["content"] == BOOKING

    done = main.cli("rules", "revoke", rule_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"revoked {rule_id}"
    assert window.expect(lambda t, b: t == "rules" and b["rules"] == [])  # the open window sees it live
    asked = window.call_tool("demo", "book_table", {})
    invoke = invoke_of(window)
    window.answer(invoke, "decline")
    assert booked(window, asked)["action"] == "decline"
    unknown = main.cli("rules", "revoke", rule_id)
    assert unknown.returncode == 1 and "no such rule" in unknown.stderr


def test_rules_survive_kill_9_can_be_revoked_with_main_down_and_session_rules_end_with_main(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo()})
    window = main.peer()
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    for message, scope in (("Kept?", "always"), ("Until?", "until"), ("Gone?", "always"), ("Session?", "session")):
        call = window.call_tool("demo", "ask", {"message": message, "schema": schema})
        until = int(time.time() * 1000) + DAY_MS if scope == "until" else None
        remember(invoke_of(window), window, "accept", scope, until=until, content={"ok": True})
        booked(window, call)
    assert len(main.rules()) == 4
    main.proc.send_signal(signal.SIGKILL)
    main.proc.wait(timeout=10)

    offline = main.cli("rules", "--json")  # no main: the store itself
    assert offline.returncode == 0 and "not running" in offline.stderr
    stored = {r["message"]: r for r in json.loads(offline.stdout)}
    assert {m: r["scope"] for m, r in stored.items()} == {"Kept?": "always", "Until?": "until", "Gone?": "always"}
    revoked = main.cli("rules", "revoke", stored["Gone?"]["id"])
    assert revoked.returncode == 0 and revoked.stdout.strip() == f"revoked {stored['Gone?']['id']}"

    restarted: ConsentMain = consent_mains.again(main)  # type: ignore[attr-defined]
    caller = restarted.peer(name="cli", role="controller")  # no window attached
    for message in ("Kept?", "Until?"):
        call = caller.call_tool("demo", "ask", {"message": message, "schema": schema})
        assert booked(caller, call) == {"action": "accept", "content": {"ok": True}}
    asked = caller.call_tool("demo", "ask", {"message": "Session?", "schema": schema})
    window = restarted.peer()
    invoke = invoke_of_welcome_or_next(window)
    assert invoke["request"]["params"]["message"] == "Session?"
    window.answer(invoke, "decline")
    assert booked(caller, asked)["action"] == "decline"
    gone = caller.call_tool("demo", "ask", {"message": "Gone?", "schema": schema})
    window.answer(invoke_of(window), "decline")
    assert booked(caller, gone)["action"] == "decline"
    assert restarted.rules_path.stat().st_mode & 0o777 == 0o600


def invoke_of_welcome_or_next(window: Any) -> dict[str, Any]:
    """A request that was pending before `window` attached: in its welcome, or right after."""
    welcome = next((body for topic, body in window.received if topic == "welcome"), None)
    if welcome is not None and welcome["pending"]:
        pending: dict[str, Any] = welcome["pending"][0]
        return pending
    return invoke_of(window)
