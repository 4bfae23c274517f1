"""`elicitron serve` with mcp's own `Client` as the host, against one real main for the module.

main runs the demo server three times (elicitation routes windows, host, first) and the probe
server; every host is a real `elicitron serve` process; windows are the real renderer under
pytest-qt or a contract-only wire peer.
"""

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from gateway_kit import (
    PROBE_SERVER,
    Host,
    HostLoop,
    open_beside,
    probe_entry,
    serve_params,
    status_json,
    text_of,
)
from kit.demo import demo_stdio_entry
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT
from kit.peer import WirePeer
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QLabel, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot

from renderer_process.bridge import MainBridge
from renderer_process.main_window import MainWindow

pytestmark = pytest.mark.slow  # real mains, gateways and hosts

BOOKING = {"name": "Grace", "party_size": 4}


@pytest.fixture(scope="module")
def gw_main(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMain]:
    runtime = short_tmp_dir()
    config = write_config(tmp_path_factory.mktemp("gw") / "mcp.json", {
        "demo": demo_stdio_entry(),
        "probe": probe_entry(),
        "to_host": demo_stdio_entry(elicitationRoute="host"),
        "to_first": demo_stdio_entry(elicitationRoute="first"),
        "to_host_legacy": demo_stdio_entry(elicitationRoute="host", protocolMode="legacy"),
    })
    running = start_main(config, runtime)
    try:
        for name in ("demo", "probe", "to_host", "to_first", "to_host_legacy"):
            running.wait_server_ready(name)
        yield running
    finally:
        running.stop()
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


@pytest.fixture(scope="module")
def hosts() -> Iterator[HostLoop]:
    loop = HostLoop()
    yield loop
    loop.close()


@pytest.fixture
def window(gw_main: RunningMain) -> Iterator[WirePeer]:
    """A contract-only window: sees invokes and dismissals, answers when told."""
    peer = gw_main.peer("wire-window")
    yield peer
    peer.close()


def find[T: QObject](parent: QObject, kind: type[T], name: str) -> T:
    widget = parent.findChild(kind, name)
    assert widget is not None, f"no {kind.__name__} named {name!r}"
    return widget


def open_host(loop: HostLoop, main: RunningMain, name: str, *args: str, **options: Any) -> Host:
    return open_beside(Host(loop, serve_params(main.connection, *args), name, **options), main)


def accept_with(content: dict[str, Any], seen: list[types.ElicitRequestParams]) -> Any:
    async def callback(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params)
        return types.ElicitResult(action="accept", content=content)

    return callback


# ---- listing and calling, answered in a real window ---------------------------------------------


def test_a_host_lists_both_servers_prefixed_and_its_call_is_answered_in_a_real_window(
    qtbot: QtBot, gw_main: RunningMain, hosts: HostLoop
) -> None:
    bridge = MainBridge(gw_main.connection, "desk")
    window = MainWindow(name="desk", opener=lambda _url: None)
    qtbot.addWidget(window)
    window.attach(bridge)
    window.show()
    bridge.start()
    host = open_host(hosts, gw_main, "Claude Desktop")
    try:
        names = host.tool_names()
        assert {"demo__book_table", "demo__echo", "probe__block", "probe__mixed"} <= set(names)
        assert all("__" in name for name in names)
        instructions = host.client.instructions or ""
        assert "## demo\nElicitron's demo server" in instructions and "## probe\nThe probe" in instructions

        pending = host.start(lambda c: c.call_tool("demo__book_table", {"restaurant": "La Passerelle"}))
        qtbot.waitUntil(lambda: window.current_card() is not None, timeout=20_000)
        card = window.current_card()
        assert card is not None
        assert find(card, QLabel, "via").text() == "via Claude Desktop"
        assert find(card, QLabel, "message").text() == "Book a table at La Passerelle?"
        qtbot.waitUntil(lambda: "Claude Desktop (1 call)" in window.hosts_label.text(), timeout=5_000)
        name = find(card, QLineEdit, "field:name")
        name.clear()
        qtbot.keyClicks(name, "Grace Hopper")
        qtbot.mouseClick(find(card, QPushButton, "accept"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(pending.done, timeout=20_000)
        answer = json.loads(text_of(pending.result()))
        assert answer["action"] == "accept"
        assert answer["content"]["name"] == "Grace Hopper" and answer["content"]["party_size"] == 2
        qtbot.waitUntil(lambda: window.hosts_label.text() == "Hosts: Claude Desktop", timeout=5_000)
        audit = json.loads(gw_main.cli_plain("audit", "--json", "--server", "demo").stdout)
        assert [(e["via"], e["outcome"]) for e in audit if e["message"] == "Book a table at La Passerelle?"] == [
            ("Claude Desktop", "accept")]
    finally:
        host.close()
        bridge.close()


def test_one_server_alone_lists_exactly_what_the_server_lists_directly(gw_main: RunningMain, hosts: HostLoop) -> None:
    direct = Host(hosts, StdioServerParameters(command=sys.executable, args=[str(PROBE_SERVER)], env=child_env()),
                  "direct").open()
    alone = open_host(hosts, gw_main, "alone", "--server", "probe")
    try:
        expected = direct.run(lambda c: c.list_tools()).tools
        got = alone.run(lambda c: c.list_tools()).tools
        assert [t.model_dump() for t in got] == [t.model_dump() for t in expected]
        assert alone.client.instructions == direct.client.instructions
        assert alone.call("add", {"a": 2, "b": 3}).structured_content == {"sum": 5}
    finally:
        alone.close()
        direct.close()


def test_results_resources_prompts_and_progress_pass_through_unchanged(gw_main: RunningMain, hosts: HostLoop) -> None:
    direct = Host(hosts, StdioServerParameters(command=sys.executable, args=[str(PROBE_SERVER)], env=child_env()),
                  "direct").open()
    host = open_host(hosts, gw_main, "checker")
    try:
        for tool in ("mixed", "fails"):
            via, plain = host.call(f"probe__{tool}"), direct.call(tool)
            assert via.content == plain.content
            assert via.structured_content == plain.structured_content and via.is_error == plain.is_error
        assert host.call("probe__fails").is_error is True

        steps: list[tuple[float, float | None, str | None]] = []

        async def with_progress(client: Client) -> types.CallToolResult:
            async def note(progress: float, total: float | None, message: str | None) -> None:
                steps.append((progress, total, message))
            return await client.call_tool("probe__count", {"steps": 3}, progress_callback=note)

        assert text_of(host.run(with_progress)) == "counted to 3"
        assert steps == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]

        resources = host.run(lambda c: c.list_resources()).resources
        assert [(r.name, str(r.uri)) for r in resources] == [("probe__greeting", "probe://greeting")]
        templates = host.run(lambda c: c.list_resource_templates()).resource_templates
        assert [(t.name, t.uri_template) for t in templates] == [("probe__item", "probe://items/{item}")]
        read = host.run(lambda c: c.read_resource("probe://greeting")).contents[0]
        assert isinstance(read, types.TextResourceContents) and read.text == "hello from the probe"
        item = host.run(lambda c: c.read_resource("probe://items/7")).contents[0]
        assert isinstance(item, types.TextResourceContents) and item.text == "item 7"
        prompts = host.run(lambda c: c.list_prompts()).prompts
        assert [p.name for p in prompts] == ["probe__greet"]
        message = host.run(lambda c: c.get_prompt("probe__greet", {"who": "Ada"})).messages[0]
        assert isinstance(message.content, types.TextContent) and message.content.text == "Say hello to Ada."
    finally:
        host.close()
        direct.close()


# ---- cancellation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_hosts_cancellation_reaches_the_server_and_dismisses_its_card(
    gw_main: RunningMain, hosts: HostLoop, window: WirePeer, mode: str
) -> None:
    host = open_host(hosts, gw_main, f"canceller-{mode}", mode=mode)
    try:
        reached = threading.Event()

        async def blocking(client: Client) -> types.CallToolResult:
            async def note(progress: float, total: float | None, message: str | None) -> None:
                reached.set()
            return await client.call_tool("probe__block", {"tag": f"cancel-{mode}", "steps": 1}, progress_callback=note)

        blocked = host.start(blocking)
        asking = host.start(lambda c: c.call_tool("demo__book_table", {"restaurant": f"cancel-{mode}"}))
        assert reached.wait(20), "the call never reached the server"
        _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                                  and b["request"]["params"]["message"] == f"Book a table at cancel-{mode}?", 20)
        assert invoke["via"] == f"canceller-{mode}"
        blocked.cancel()
        asking.cancel()
        # the host's own probe process saw it (each host has its own session with each server)
        assert text_of(host.call("probe__was_cancelled", {"tag": f"cancel-{mode}"}, timeout=20)) == \
            f"cancel-{mode} was cancelled"
        _, dismiss = window.expect(lambda t, b: t == "msgElicitationTransferDismiss"
                                   and b["responseChannel"] == invoke["responseChannel"], 20)
        assert dismiss["reason"] == "cancelled"
        assert text_of(host.call("demo__echo", {"text": "still here"})) == "still here"
    finally:
        host.close()


def test_status_and_the_windows_list_hosts_with_their_calls_in_flight(
    gw_main: RunningMain, hosts: HostLoop, window: WirePeer
) -> None:
    host = open_host(hosts, gw_main, "Cursor")
    try:
        reached = threading.Event()

        async def blocking(client: Client) -> types.CallToolResult:
            async def note(progress: float, total: float | None, message: str | None) -> None:
                reached.set()
            return await client.call_tool("probe__block", {"tag": "status", "steps": 1}, progress_callback=note)

        blocked = host.start(blocking)
        assert reached.wait(20)
        window.expect(lambda t, b: t == "peers" and any(
            p["role"] == "host" and p["name"] == "Cursor" and p.get("calls") == 1 for p in b["peers"]), 10)
        report = status_json(gw_main)
        assert [(p["name"], p.get("calls")) for p in report["peers"] if p["role"] == "host"] == [("Cursor", 1)]
        text = gw_main.cli("status").stdout
        assert "hosts (1):" in text and "Cursor" in text and "1 call in flight" in text
        blocked.cancel()
        window.expect(lambda t, b: t == "peers" and any(
            p["role"] == "host" and p["name"] == "Cursor" and p.get("calls") == 0 for p in b["peers"]), 10)
    finally:
        host.close()


# ---- where elicitations go ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_route_host_asks_a_host_that_can_answer_and_the_windows_for_one_that_cannot(
    gw_main: RunningMain, hosts: HostLoop, window: WirePeer, mode: str
) -> None:
    seen: list[types.ElicitRequestParams] = []
    able = open_host(hosts, gw_main, f"able-{mode}", mode=mode, elicitation=accept_with(BOOKING, seen))
    unable = open_host(hosts, gw_main, f"unable-{mode}", mode=mode)
    try:
        answer = json.loads(text_of(able.call("to_host__book_table", {"restaurant": "Host Only"})))
        assert answer == {"action": "accept", "content": BOOKING}
        assert [p.message for p in seen] == ["Book a table at Host Only?"]

        pending = unable.start(lambda c: c.call_tool("to_host__book_table", {"restaurant": "No UI"}))
        _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                                  and b["request"]["server"] == "to_host", 20)
        assert invoke["via"] == f"unable-{mode}"
        assert invoke["request"]["params"]["message"] == "Book a table at No UI?"  # the first one never came here
        window.answer(invoke, "accept", {"name": "Win", "party_size": 1})
        answer = json.loads(text_of(pending.result(20)))
        assert answer["content"]["name"] == "Win"
    finally:
        able.close()
        unable.close()


def test_route_host_works_with_a_handshake_era_server_too(gw_main: RunningMain, hosts: HostLoop) -> None:
    seen: list[types.ElicitRequestParams] = []
    host = open_host(hosts, gw_main, "modern-host", elicitation=accept_with(BOOKING, seen))
    try:
        answer = json.loads(text_of(host.call("to_host_legacy__book_table", {"restaurant": "Old School"})))
        assert answer == {"action": "accept", "content": BOOKING}
        assert [p.message for p in seen] == ["Book a table at Old School?"]
    finally:
        host.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_route_first_the_window_answers_first_and_the_host_is_told_once(
    gw_main: RunningMain, hosts: HostLoop, window: WirePeer, mode: str
) -> None:
    asked = threading.Event()
    release = asyncio.Event()
    outcome: list[str] = []

    async def slow_host(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        outcome.append("answered")
        return types.ElicitResult(action="accept", content={"name": "Host", "party_size": 9})

    host = open_host(hosts, gw_main, f"slow-{mode}", mode=mode, elicitation=slow_host)
    try:
        pending = host.start(lambda c: c.call_tool("to_first__book_table", {"restaurant": "Race"}))
        _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                                  and b["request"]["server"] == "to_first", 20)
        assert asked.wait(20), "the host was not asked"
        window.answer(invoke, "accept", {"name": "Window", "party_size": 2})
        _, dismiss = window.expect(lambda t, b: t == "msgElicitationTransferDismiss"
                                   and b["responseChannel"] == invoke["responseChannel"], 10)
        assert (dismiss["reason"], dismiss["by"]) == ("answered", window.window)
        if mode == "auto":  # 2026-07-28: the host's question cannot be withdrawn; its late answer is ignored
            hosts.loop.call_soon_threadsafe(release.set)
        answer = json.loads(text_of(pending.result(20)))
        assert answer["content"] == {"name": "Window", "party_size": 2}
        if mode == "legacy":
            assert outcome == ["cancelled"]  # its elicitation/create was cancelled
        else:
            assert outcome == ["answered"]
    finally:
        hosts.loop.call_soon_threadsafe(release.set)
        host.close()


def test_route_first_the_host_answers_first_and_the_windows_are_dismissed(
    gw_main: RunningMain, hosts: HostLoop, window: WirePeer
) -> None:
    seen: list[types.ElicitRequestParams] = []
    host = open_host(hosts, gw_main, "quick", elicitation=accept_with(BOOKING, seen))
    try:
        answer = json.loads(text_of(host.call("to_first__book_table", {"restaurant": "Quick"})))
        assert answer == {"action": "accept", "content": BOOKING}
        _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                                  and b["request"]["server"] == "to_first", 10)
        assert invoke["via"] == "quick"
        _, dismiss = window.expect(lambda t, b: t == "msgElicitationTransferDismiss"
                                   and b["responseChannel"] == invoke["responseChannel"], 10)
        assert dismiss["reason"] == "answered" and dismiss["by"] != window.window
        window.answer(invoke, "accept", {"name": "Late", "party_size": 1})
        assert window.expect_error(invoke["responseChannel"])["code"] == "already-answered"  # once
    finally:
        host.close()


# ---- bad input ---------------------------------------------------------------------------------------


def test_bad_input_gets_json_rpc_errors_naming_the_problem_and_touches_nobody_else(
    gw_main: RunningMain, hosts: HostLoop
) -> None:
    bystander = open_host(hosts, gw_main, "bystander")
    host = open_host(hosts, gw_main, "clumsy")
    raw = subprocess.Popen([sys.executable, "-m", "cli_process", "serve", "--connection", str(gw_main.connection)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env(),
                           cwd=ROOT)
    try:
        assert raw.stdin is not None and raw.stdout is not None
        raw.stdin.write(b"this is not json\n")
        raw.stdin.write(b'{"jsonrpc": "2.0", "id": 7, "method": 12}\n')
        raw.stdin.write(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "x", "arguments": {"t": "'
                        + b"y" * (5 << 20) + b'"}}}\n')
        raw.stdin.flush()
        replies = [json.loads(raw.stdout.readline()) for _ in range(3)]
        assert replies[0]["id"] is None and replies[0]["error"]["code"] == -32700
        assert "not strict JSON" in replies[0]["error"]["message"]
        assert replies[1]["id"] == 7 and replies[1]["error"]["code"] == -32600
        assert replies[2]["id"] == 8 and replies[2]["error"]["code"] == -32600
        assert "over 4,194,304 bytes" in replies[2]["error"]["message"]

        for name, expected in (("echo", "unknown tool 'echo': names here are <server>__<tool>"),
                               ("nope__echo", "unknown tool 'nope__echo'"),
                               ("demo__nope", "server 'demo' has no tool 'nope'")):
            with pytest.raises(MCPError) as caught:
                host.call(name, {"text": "x"})
            assert caught.value.error.code == -32602 and expected in caught.value.error.message
        big = "z" * (2 << 20)  # over the peer wire's 1 MiB: main holds the host's pipes, no wire between
        assert text_of(host.call("demo__echo", {"text": big})) == big  # as direct

        assert text_of(bystander.call("demo__echo", {"text": "fine"})) == "fine"
        assert text_of(host.call("demo__echo", {"text": "still fine"})) == "still fine"
        assert {s["name"]: s["status"] for s in status_json(gw_main)["servers"]} == {
            "demo": "ready", "probe": "ready", "to_host": "ready", "to_first": "ready", "to_host_legacy": "ready"}
    finally:
        raw.kill()
        raw.wait(10)
        host.close()
        bystander.close()


def test_a_host_that_sends_its_handshake_and_a_listing_at_once_gets_one_answer_each(gw_main: RunningMain) -> None:
    # serve answers `initialize` before its SDK is loaded; the SDK, handed the same line, must not
    # answer it a second time, and must know the host (the listing after it is served).
    raw = subprocess.Popen([sys.executable, "-m", "cli_process", "serve", "--connection", str(gw_main.connection)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env(),
                           cwd=ROOT)
    try:
        assert raw.stdin is not None and raw.stdout is not None
        raw.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
                        b'"2025-06-18", "capabilities": {}, "clientInfo": {"name": "eager-host", "version": "1"}}}\n'
                        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'
                        b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}\n')
        raw.stdin.flush()
        handshake = json.loads(raw.stdout.readline())
        assert handshake["id"] == 1 and handshake["result"]["protocolVersion"] == "2025-06-18"
        assert handshake["result"]["serverInfo"]["name"] == "elicitron"
        assert "## demo\nElicitron's demo server" in handshake["result"]["instructions"]
        listing = json.loads(raw.stdout.readline())
        assert listing["id"] == 2, listing  # not a second answer to `initialize`
        assert "demo__book_table" in {tool["name"] for tool in listing["result"]["tools"]}
        raw.stdin.close()
        assert raw.stdout.read() == b""  # nothing more, and serve ends with the host's stdin
        assert raw.wait(20) == 0
    finally:
        if raw.poll() is None:
            raw.kill()
            raw.wait(10)


# ---- configuration entries -----------------------------------------------------------------------------


def test_print_config_gives_entries_for_claude_desktop_cursor_and_vs_code(gw_main: RunningMain) -> None:
    done = gw_main.cli_plain("serve", "--print-config", "--server", "demo")
    assert done.returncode == 0, done.stderr
    blocks = [json.loads(block) for block in _json_blocks(done.stdout)]
    entry = blocks[0]["mcpServers"]["demo"]
    assert entry["args"][-2:] == ["--server", "demo"] and "serve" in entry["args"]
    assert blocks[1]["servers"]["demo"] == {"type": "stdio", **entry}
    done = gw_main.cli("serve", "--print-config", "--http")
    assert done.returncode == 1 and "--mcp-http" in done.stderr  # this main serves no HTTP


def _json_blocks(text: str) -> list[str]:
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("{") or current:
            current.append(line)
            if line == "}":
                blocks.append("\n".join(current))
                current = []
    return blocks

