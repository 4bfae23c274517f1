"""Servers that misbehave get clear errors and never hang main or a window."""

import json
import sys
from collections.abc import Callable

from kit.demo import demo_stdio_entry
from kit.main import RunningMain
from kit.paths import DEMO_SERVER


def test_a_tool_that_never_answers_times_out_with_an_error(main_factory: Callable[..., RunningMain]) -> None:
    main = main_factory({"demo": demo_stdio_entry(toolTimeoutSeconds=1)})
    window = main.peer()
    reply = window.expect_topic(window.call_tool("demo", "hang", {}))
    assert reply["error"]["code"] == -32001 and "toolTimeoutSeconds" in reply["error"]["message"]
    echo = window.expect_topic(window.call_tool("demo", "echo", {"text": "alive"}))
    assert echo["result"]["content"][0]["text"] == "alive"


def test_a_server_writing_garbage_to_stdout_still_serves_or_fails_clearly(
    main_factory: Callable[..., RunningMain],
) -> None:
    noisy = {"command": "sh", "args": ["-c", (f"echo 'this is not JSON-RPC'; printf '\\x00\\xff{{{{\\n'; "
                                              f"exec {sys.executable} {DEMO_SERVER}")]}
    main = main_factory({"noisy": noisy})
    window = main.peer()
    _, body = window.expect(lambda t, b: t == "servers" and b["servers"][0]["status"] in ("ready", "failed"), 60)
    server = body["servers"][0]
    if server["status"] == "ready":
        call = window.call_tool("noisy", "book_table", {})
        window.answer(window.expect_topic("msgElicitationTransferInvoke"), "decline")
        assert json.loads(window.expect_topic(call)["result"]["content"][0]["text"])["action"] == "decline"
    else:
        assert server["error"]
    assert main.proc.poll() is None


def test_a_server_that_cannot_start_is_reported_not_hung(main_factory: Callable[..., RunningMain]) -> None:
    main = main_factory({"ghost": {"command": "/nonexistent/mcp-server"}, "demo": demo_stdio_entry()})
    window = main.peer()
    _, body = window.expect(lambda t, b: t == "servers" and any(
        s["name"] == "ghost" and s["status"] == "failed" for s in b["servers"]), 60)
    ghost = next(s for s in body["servers"] if s["name"] == "ghost")
    assert "/nonexistent/mcp-server" in ghost["error"] or "No such file" in ghost["error"]
    reply = window.expect_topic(window.call_tool("ghost", "anything", {}))
    assert "failed" in reply["error"]["message"]
    main.wait_server_ready("demo")
