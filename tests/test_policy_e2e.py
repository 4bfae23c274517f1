"""Policy files across real processes: main with the demo server and a Cedar file that forbids one
tool and permits another, a host (mcp's `Client` through `elicitron serve --server demo`), the
structured denial it gets (SEP-2643's envelope and Elicitron's own in `_meta`), the audit and a
reload with a bad file; and a forbid on `elicit` declining the server's question in the host's session."""

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from consent_kit import ConsentMain, demo, launch
from gateway_kit import Host, HostLoop, serve_params, text_of
from kit.env import short_tmp_dir

pytestmark = pytest.mark.slow  # a real main, demo server, gateway and host

POLICIES = """\
@id("no-cancels")
@reason("bookings are cancelled by a person")
forbid(principal, action == Action::"callTool", resource == Tool::"demo/cancel_booking");

@id("hello-echo")
permit(principal == Host::"Claude Desktop", action == Action::"callTool", resource == Tool::"demo/echo")
when { context.arguments has text && context.arguments.text like "hello*" };
"""


@pytest.fixture
def main(tmp_path: Path) -> Iterator[ConsentMain]:
    """toolApproval "ask": without a policy every call would wait for a card (no window is attached)."""
    (tmp_path / "team.cedar").write_text(POLICIES)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": demo(toolApproval="ask")},
                                  "elicitron": {"policies": ["team.cedar"],
                                                "rules": [{"server": "demo", "tool": "hang", "decision": "deny"}]}}))
    runtime = short_tmp_dir()
    running = launch(config, runtime, tmp_path, ["demo"])
    yield running
    running.stop()
    shutil.rmtree(runtime, ignore_errors=True)


def test_a_forbid_names_its_policy_a_permit_needs_no_card_and_the_audit_says_which(
        main: ConsentMain, hosts: HostLoop, tmp_path: Path) -> None:
    host = Host(hosts, serve_params(main.connection, "--server", "demo"), "Claude Desktop").open()
    try:
        permitted = host.call("echo", {"text": "hello, policy"})
        assert permitted.is_error is not True and text_of(permitted) == "hello, policy"

        forbidden = host.call("cancel_booking", {})
        assert forbidden.is_error is True
        assert text_of(forbidden).startswith("Policy 'no-cancels' in the user's Elicitron configuration forbids this "
                                             "call: bookings are cancelled by a person. demo/cancel_booking was not "
                                             "called.")
        assert forbidden.meta is not None
        assert forbidden.meta["elicitron/denial"] == {
            "deniedBy": "policy", "id": "no-cancels", "reason": "bookings are cancelled by a person", "retry": "no",
            "server": "demo", "tool": "cancel_booking"}
        envelope = forbidden.meta["io.modelcontextprotocol/authorization"]
        assert (envelope["reason"], envelope["remediation"]) == ("insufficient_authorization", "unavailable")

        by_rule = host.call("hang", {})  # no policy matches: the config rule denies it, by its id
        assert by_rule.is_error is True and "(config-1)" in text_of(by_rule) and by_rule.meta is not None
        assert by_rule.meta["elicitron/denial"]["id"] == "config-1"
        assert by_rule.meta["elicitron/denial"]["retry"] == "until-config-changed"
        assert main.status()["pending"] == []  # no call ever became a card

        (tmp_path / "team.cedar").write_text(POLICIES.replace("resource == Tool::", "resource == Tol::", 1))
        reload = main.cli("reload")
        assert reload.returncode == 0, reload.stderr
        assert f"note: policies: {tmp_path / 'team.cedar'}:3:" in reload.stdout
        assert "the last good set (2 policies) stays in force" in reload.stdout
        status = main.cli("status")
        assert "policies: 2 from" in status.stdout and "not reloaded: " in status.stdout
        again = host.call("cancel_booking", {})  # the last good set still forbids it
        assert again.is_error is True and "no-cancels" in text_of(again)
    finally:
        host.close()

    rows = main.audit_until(lambda rows: sum(1 for r in rows if r.get("tool")) >= 4)
    by_tool = {(row["tool"], row["ruleId"]) for row in rows if row.get("tool")}
    assert by_tool == {("echo", "policy:hello-echo"), ("cancel_booking", "policy:no-cancels"), ("hang", "config-1")}
    denied = next(row for row in rows if row["channel"] == envelope["authorizationContextId"])
    assert (denied["ruleId"], denied["reason"]) == ("policy:no-cancels", "bookings are cancelled by a person")
    table = main.cli("audit").stdout
    assert "policy no-cancels" in table and "policy hello-echo" in table


ELICIT_POLICIES = """\
@id("booking-by-policy")
permit(principal, action == Action::"callTool", resource == Tool::"demo/book_table");

@id("no-asking")
@reason("demo asks nobody through an agent")
forbid(principal == Host::"Claude Desktop", action == Action::"elicit", resource == Server::"demo");
"""


def test_a_forbid_on_elicit_declines_the_servers_question_before_any_card(tmp_path: Path, hosts: HostLoop) -> None:
    (tmp_path / "team.cedar").write_text(ELICIT_POLICIES)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": demo(toolApproval="ask")},
                                  "elicitron": {"policies": ["team.cedar"]}}))
    runtime = short_tmp_dir()
    main = launch(config, runtime, tmp_path, ["demo"])
    host = Host(hosts, serve_params(main.connection, "--server", "demo"), "Claude Desktop").open()
    try:
        booked = host.call("book_table", {"restaurant": "Policy"})  # permitted, then its question declined
        assert booked.is_error is not True
        assert json.loads(text_of(booked)) == {"action": "decline", "content": None}
        assert main.status()["pending"] == []  # no card opened, neither for the call nor its question
        rows = main.audit_until(lambda rows: any(row.get("ruleId") == "policy:no-asking" for row in rows))
        declined = next(row for row in rows if row.get("ruleId") == "policy:no-asking")
        assert (declined["server"], declined["message"], declined["via"], declined["outcome"], declined["reason"]) == (
            "demo", "Book a table at Policy?", "Claude Desktop", "decline", "demo asks nobody through an agent")
    finally:
        host.close()
        main.stop()
        shutil.rmtree(runtime, ignore_errors=True)
