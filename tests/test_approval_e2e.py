"""Tool-call approval across real processes: a real main and demo MCP server, a host peer exactly
as the `elicitron serve` gateway is one (role "host", relayed sessions: kit.relay_host), contract-only windows.

The host is `consent_kit.WireHost`; with the gateway merged, the same tests run with mcp's own
`Client` behind `elicitron serve` by swapping that one class."""

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from consent_kit import (
    ConsentMain,
    ConsentMains,
    WireHost,
    demo,
    invoke_of,
    started_mains,
    text_of,
    write_consent_config,
)
from kit.paths import DEMO_SERVER


@pytest.fixture
def consent_mains(tmp_path: Path) -> Iterator[ConsentMains]:
    yield from started_mains(tmp_path)


DECISIONS = ["allow-once", "allow-session", "allow-always", "deny"]


def decide(window: Any, invoke: dict[str, Any], decision: str) -> None:
    """Answer an approval the way any v1 window can: the form's one enum field."""
    window.answer(invoke, "accept", {"decision": decision})


def dismissed(channel: str) -> Callable[[str, Any], bool]:
    return lambda t, b: t == "msgElicitationTransferDismiss" and b["responseChannel"] == channel


def test_a_v1_window_answers_an_approval_by_decision_alone_and_deny_is_a_tool_error(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window = main.peer(name="v1 window")
    host = WireHost(main, name="Claude Desktop")

    call = host.call("demo", "echo", {"text": "hello"})
    invoke = invoke_of(window)
    params = invoke["request"]["params"]
    assert params["mode"] == "form"
    assert params["requestedSchema"]["required"] == ["decision"]
    assert params["requestedSchema"]["properties"]["decision"]["enum"] == DECISIONS
    assert params["message"].startswith('Claude Desktop wants to call demo/echo with {"text": "hello"}')
    assert (invoke["kind"], invoke["via"], invoke["origin"]) == ("approval", "Claude Desktop", host.peer.window)
    approval = invoke["approval"]
    assert (approval["server"], approval["tool"], approval["arguments"]) == ("demo", "echo", {"text": "hello"})
    assert approval["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    decide(window, invoke, "allow-once")
    assert text_of(host.result(call)) == "hello"

    denied = host.call("demo", "echo", {"text": "again"})  # allow-once is not remembered
    asked = invoke_of(window)
    decide(window, asked, "deny")
    result = host.result(denied)
    assert result["isError"] is True
    assert text_of(result).startswith('The user denied this call in Elicitron (in the window "v1 window"): '
                                      "demo/echo was not called.")
    assert result["_meta"] == {  # SEP-2643's envelope, and who denied it (no reason: a v1 window gives none)
        "io.modelcontextprotocol/authorization": {"reason": "insufficient_authorization", "remediation": "available",
                                                  "authorizationContextId": asked["responseChannel"]},
        "elicitron/denial": {"deniedBy": "person", "window": "v1 window", "retry": "maybe", "server": "demo",
                             "tool": "echo"}}

    declined = host.call("demo", "echo", {"text": "declined"})  # a v1 window's Decline denies too
    window.send(invoke_of(window)["responseChannel"], {"action": "decline", "reason": "not\nnow\x1b"})
    result = host.result(declined)  # the optional `reason` reaches the agent, one line of plain text
    assert result["isError"] is True and 'The user\'s reason: "not now".' in text_of(result)
    assert result["_meta"]["elicitron/denial"]["reason"] == "not now"

    rows = [r for r in main.audit() if r["kind"] == "approval"]
    assert sorted((r["decision"], r["via"], r["tool"], r["window"]) for r in rows) == [
        ("allow-once", "Claude Desktop", "echo", window.window), ("deny", "Claude Desktop", "echo", window.window),
        ("deny", "Claude Desktop", "echo", window.window)]
    assert all(r["arguments"] is None for r in rows), "arguments only with auditValues"
    assert [r["reason"] for r in rows if r["reason"]] == ["not now"]  # the person's reason is kept
    assert main.rules() == []


def test_always_allow_sticks_across_a_restart_and_allow_for_this_session_does_not(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window = main.peer()
    host = WireHost(main)

    first = host.call("demo", "echo", {"text": "1"})
    decide(window, invoke_of(window), "allow-always")
    assert text_of(host.result(first)) == "1"
    second = host.call("demo", "echo", {"text": "2"})  # no card: the call runs at once
    assert text_of(host.result(second)) == "2"

    # Two approvals of one tool wait; "allow for this session" on one answers its twin too.
    twins = [host.call("demo", "cancel_booking", {"restaurant": name}) for name in ("A", "B")]
    invokes = [invoke_of(window), invoke_of(window)]
    decide(window, invokes[0], "allow-session")
    dismissals = [window.expect(dismissed(i["responseChannel"]))[1] for i in invokes]
    assert dismissals[0]["by"] == window.window and dismissals[1]["rule"].startswith("r-")
    assert [text_of(host.result(c)) for c in twins] == ["cancelled the booking at A", "cancelled the booking at B"]
    third = host.call("demo", "cancel_booking", {})
    assert host.result(third)["isError"] is not True

    rules = {r["tool"]: r for r in main.rules()}
    assert (rules["echo"]["scope"], rules["echo"]["decision"]) == ("always", "allow")
    assert rules["cancel_booking"]["scope"] == "session"
    rows = main.audit_until(lambda rows: any(r["ruleId"] == rules["echo"]["id"] for r in rows))
    by_rule = [r for r in rows if r["ruleId"] == rules["echo"]["id"]]
    assert [(r["decision"], r["tool"], r["outcome"], r["via"]) for r in by_rule] == [
        ("allow-always", "echo", "accept", "Test Host")]

    restarted: ConsentMain = consent_mains.again(main)  # type: ignore[attr-defined]
    window = restarted.peer()
    host = WireHost(restarted)
    assert text_of(host.result(host.call("demo", "echo", {"text": "after restart"}))) == "after restart"
    asked = host.call("demo", "cancel_booking", {})
    invoke = invoke_of(window)  # the session's allowance ended with main
    assert invoke["approval"]["tool"] == "cancel_booking"
    decide(window, invoke, "deny")
    assert host.result(asked)["isError"] is True


def test_ask_destructive_asks_for_destructive_tools_and_not_for_read_only_ones(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask-destructive")})
    window = main.peer()
    host = WireHost(main)
    assert text_of(host.result(host.call("demo", "echo", {"text": "read-only"}))) == "read-only"
    destructive = host.call("demo", "cancel_booking", {})
    invoke = invoke_of(window)
    assert invoke["approval"]["annotations"] == {"destructiveHint": True, "openWorldHint": False}
    assert invoke["approval"]["title"] == "Cancel a booking"
    decide(window, invoke, "allow-once")
    assert text_of(host.result(destructive)) == "cancelled the booking at Chez MCP"
    host.call("demo", "book_table", {})  # says nothing: MCP's defaults make it destructive
    invoke = invoke_of(window)
    assert invoke["approval"]["tool"] == "book_table" and "annotations" not in invoke["approval"]
    host.close()  # the host goes away: its approval is withdrawn everywhere, saying the host went
    dismiss = window.expect(lambda t, b: t == "msgElicitationTransferDismiss"
                            and b["responseChannel"] == invoke["responseChannel"])[1]
    assert (dismiss["reason"], dismiss.get("cause")) == ("cancelled", "host-gone")


def test_calls_typed_by_the_user_are_never_asked_and_config_rules_decide_hosts_calls(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask", toolApprovalOverrides={"ask": "deny"})}, rules=[
        {"server": "demo", "tool": "cancel_*", "decision": "deny"},
        {"server": "demo", "tool": "echo", "decision": "allow"},
    ])
    window = main.peer()
    controller = main.peer(name="cli", role="controller")
    for caller in (window, controller):  # the call panel and `elicitron call`
        reply = caller.expect_topic(caller.call_tool("demo", "cancel_booking", {}))
        assert text_of(reply["result"]) == "cancelled the booking at Chez MCP"
    assert main.cli("call", "demo", "cancel_booking", "{}").returncode == 0

    host = WireHost(main)
    assert text_of(host.result(host.call("demo", "echo", {"text": "by config"}))) == "by config"
    denied = host.result(host.call("demo", "cancel_booking", {}))
    assert denied["isError"] is True and "rule in the user's Elicitron configuration (config-1)" in text_of(denied)
    by_rule = denied["_meta"]["elicitron/denial"]
    assert (by_rule["deniedBy"], by_rule["id"], by_rule["retry"]) == ("config", "config-1", "until-config-changed")
    assert denied["_meta"]["io.modelcontextprotocol/authorization"]["remediation"] == "unavailable"
    policy = host.result(host.call("demo", "ask", {"message": "x", "schema": {"type": "object"}}))
    assert policy["isError"] is True and "toolApproval" in text_of(policy)
    assert policy["_meta"]["elicitron/denial"]["id"] == "toolApproval"
    audited = main.audit_until(lambda rows: {"config-1", "config-2"} <= {r["ruleId"] for r in rows})
    rows = {r["ruleId"]: r for r in audited if r["ruleId"]}
    context = denied["_meta"]["io.modelcontextprotocol/authorization"]["authorizationContextId"]
    assert rows["config-1"]["channel"] == context  # the denial names its audit row
    assert (rows["config-1"]["decision"], rows["config-2"]["decision"]) == ("deny", "allow-always")
    assert not [t for t, _ in window.received if t == "msgElicitationTransferInvoke"], "nothing was asked"


def test_an_unanswered_approval_expires_as_a_deny(consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask", elicitationTimeoutSeconds=1)})
    window = main.peer()
    host = WireHost(main)
    call = host.call("demo", "echo", {"text": "nobody answers"})
    invoke_of(window)
    result = host.result(call)
    assert result["isError"] is True and text_of(result).startswith("Nobody answered the approval request")
    assert (result["_meta"]["elicitron/denial"]["deniedBy"], result["_meta"]["elicitron/denial"]["retry"]) == (
        "nobody", "yes")
    assert window.expect_topic("msgElicitationTransferDismiss")["reason"] == "expired"

    # A new toolApproval applies on reload without restarting the server.
    assert main.config is not None
    write_consent_config(main.config, {"demo": demo(toolApproval="deny", elicitationTimeoutSeconds=1)})
    reload = main.cli("reload")
    assert reload.returncode == 0 and "changed    demo (toolApproval, applied without a restart)" in reload.stdout, \
        reload.stdout + reload.stderr
    denied = host.result(host.call("demo", "echo", {"text": "after reload"}))
    assert denied["isError"] is True and "toolApproval" in text_of(denied)


def test_a_rule_revoked_while_a_call_waits_for_its_server_is_not_applied(consent_mains: ConsentMains,
                                                                         tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    # Every start of this server waits until the test lets it through the gate.
    gated = {"command": "/bin/sh", "args": ["-c", f'read go < "{gate}"; exec "{sys.executable}" "{DEMO_SERVER}"'],
             "toolApproval": "ask"}
    main = consent_mains({"gated": gated}, ready=())
    let_through(gate)
    main.wait_server_ready("gated")
    window = main.peer()
    host = WireHost(main)
    first = host.call("gated", "echo", {"text": "allowed"})
    let_through(gate)  # the host's own session with the server: its process waits at the gate too
    decide(window, invoke_of(window), "allow-always")
    assert text_of(host.result(first)) == "allowed"
    rule_id = main.rules()[0]["id"]

    restart = main.cli("server", "restart", "gated", "--wait", "0")
    assert restart.returncode == 0, restart.stderr  # restarted: the new start waits at the gate
    queued = host.call("gated", "echo", {"text": "queued"})  # waits for the server to be ready
    assert main.cli("rules", "revoke", rule_id).returncode == 0
    let_through(gate)
    invoke = invoke_of(window, timeout_s=60)  # asked: the revoked rule was not applied
    assert invoke["approval"]["arguments"] == {"text": "queued"}
    decide(window, invoke, "deny")
    assert host.result(queued)["isError"] is True


def let_through(gate: Path) -> None:
    with open(gate, "w") as fifo:  # blocks until the server's shell opens the gate to read
        fifo.write("go\n")
