"""The 9-step round trip across real processes: wire peer <-> main <-> demo MCP server."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from kit.demo import demo_stdio_entry
from kit.main import RunningMain


def tool_text(reply: dict[str, Any]) -> Any:
    assert "result" in reply, reply
    return json.loads(reply["result"]["content"][0]["text"])


def invoke_for(peer: Any) -> dict[str, Any]:
    return peer.expect_topic("msgElicitationTransferInvoke")


@pytest.fixture(params=["stdio", "http"])
def any_transport_main(request: pytest.FixtureRequest, main_factory: Callable[..., RunningMain]) -> RunningMain:
    if request.param == "stdio":
        running = main_factory({"demo": demo_stdio_entry()})
    else:
        url = request.getfixturevalue("http_demo_server")
        running = main_factory({"demo": {"url": url}})
    running.wait_server_ready("demo")
    return running


def test_accept_with_values_reaches_the_server_exactly(any_transport_main: RunningMain) -> None:
    peer = any_transport_main.peer()
    channel = peer.call_tool("demo", "book_table", {"restaurant": "Noma"})
    invoke = invoke_for(peer)
    params = invoke["request"]["params"]
    assert invoke["request"]["server"] == "demo"
    assert params["mode"] == "form" and params["message"] == "Book a table at Noma?"
    assert invoke["origin"] == peer.window
    assert invoke["responseChannel"].startswith("msgElicitationTransferResult-")
    assert invoke["expiresAt"] > invoke["createdAt"]

    values = {"name": "Grace", "party_size": 4, "outdoor": True, "budget": 42.5, "cuisine": "japanese"}
    peer.answer(invoke, "accept", values)
    dismiss = peer.expect_topic("msgElicitationTransferDismiss")
    assert dismiss == {"responseChannel": invoke["responseChannel"], "reason": "answered", "by": peer.window}
    assert tool_text(peer.expect_topic(channel)) == {"action": "accept", "content": values}


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_are_distinguishable_at_the_server(any_transport_main: RunningMain, action: str) -> None:
    peer = any_transport_main.peer()
    channel = peer.call_tool("demo", "book_table", {})
    invoke = invoke_for(peer)
    peer.answer(invoke, action, {"name": "dropped"})  # content on decline/cancel is dropped
    assert tool_text(peer.expect_topic(channel)) == {"action": action, "content": None}


def test_cli_call_shows_the_result_of_an_elicitation_answered_in_a_window(demo_main: RunningMain) -> None:
    import subprocess
    import sys

    from kit.env import child_env
    from kit.paths import ROOT

    window = demo_main.peer(name="answering-window")
    cli = subprocess.Popen([sys.executable, "-m", "cli_process", "call", "demo", "book_table",
                            '{"restaurant": "Septime"}', "--connection", str(demo_main.connection)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    invoke = invoke_for(window)
    assert invoke["origin"] != window.window  # the CLI asked, not this window
    window.answer(invoke, "accept", {"name": "Lin", "party_size": 2})
    out, err = cli.communicate(timeout=30)
    assert cli.returncode == 0, err
    assert json.loads(out) == {"action": "accept", "content": {"name": "Lin", "party_size": 2}}


def test_unknown_server_and_unknown_tool_are_errors_not_hangs(demo_main: RunningMain) -> None:
    peer = demo_main.peer()
    reply = peer.expect_topic(peer.call_tool("nope", "echo", {"text": "x"}))
    assert reply["error"]["code"] == -32602 and "unknown server 'nope'" in reply["error"]["message"]
    reply = peer.expect_topic(peer.call_tool("demo", "no_such_tool", {}))
    assert "error" in reply or reply["result"].get("isError") is True


def test_a_request_waits_for_a_window_and_reaches_the_next_one_that_attaches(demo_main: RunningMain) -> None:
    controller = demo_main.peer(name="controller", role="controller")
    channel = controller.call_tool("demo", "book_table", {})
    # No renderer yet: the request waits in main; a window attaching later gets it in welcome.
    status = json.loads(demo_main.cli("status", "--json").stdout)
    window = demo_main.peer(name="late-window", hello=False)
    welcome = window.hello()
    pending = welcome["pending"]
    if not pending:  # the call may still be on its way to the server; it then arrives as an invoke
        pending = [invoke_for(window)]
    assert [p["request"]["server"] for p in pending] == ["demo"]
    window.answer(pending[0], "accept", {"name": "Late", "party_size": 1})
    assert tool_text(controller.expect_topic(channel))["content"] == {"name": "Late", "party_size": 1}
    assert status["servers"][0]["name"] == "demo"
