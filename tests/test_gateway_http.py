"""`elicitron main --mcp-http`: MCP hosts over streamable HTTP, through main's gateway child."""

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine
from typing import Any

import mcp_types as types
import pytest
from gateway_kit import Host, HostLoop, status_json, text_of
from kit.demo import demo_stdio_entry
from kit.main import RunningMain
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

pytestmark = pytest.mark.slow  # real mains, gateways and hosts

LIST_TOOLS = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'



@pytest.fixture
def http_main(main_factory: Callable[..., RunningMain]) -> RunningMain:
    main = main_factory({"demo": demo_stdio_entry()}, "--mcp-http", "0")
    main.wait_server_ready("demo")
    main.wait_status(lambda status: (status.get("mcpHttp") or {}).get("state") == "listening",
                     "its MCP HTTP endpoint listening")
    assert "MCP hosts over HTTP: http://127.0.0.1:" in main.cli("status").stdout  # as a user sees it
    return main


def post(url: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=LIST_TOOLS, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {}
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"{}")


def http_host(loop: HostLoop, url: str, token: str, name: str, mode: str) -> Host:
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Host(loop, streamable_http_client(url, http_client=client), name, mode=mode).open()


def book_table(restaurant: str) -> Callable[[Client], Coroutine[Any, Any, types.CallToolResult]]:
    return lambda client: client.call_tool("demo__book_table", {"restaurant": restaurant})


def invoke_asking(message: str) -> Callable[[str, Any], bool]:
    return lambda t, b: t == "msgElicitationTransferInvoke" and b["request"]["params"]["message"] == message


def test_http_needs_the_token_refuses_foreign_origins_and_hosts_and_serves_a_full_call(
    http_main: RunningMain, hosts: HostLoop
) -> None:
    url, token = http_main.info["mcpHttpUrl"], http_main.info["mcpHttpToken"]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    assert post(url, {})[0] == 401
    assert post(url, {"Authorization": "Bearer wrong"})[0] == 401
    status, body = post(url, {"Authorization": f"Bearer {token}", "Origin": "http://evil.example"})
    assert status == 403 and "Origin" in body["error"]
    assert post(url, {"Authorization": f"Bearer {token}", "Host": "evil.example:80"})[0] == 403

    window = http_main.peer("wire-window")
    for mode in ("legacy", "auto"):
        host = http_host(hosts, url, token, "http-host", mode)
        try:
            assert "demo__book_table" in host.tool_names()
            assert text_of(host.call("demo__echo", {"text": f"over http, {mode}"})) == f"over http, {mode}"
            pending = host.start(book_table(mode))
            _, invoke = window.expect(invoke_asking(f"Book a table at {mode}?"), 20)
            assert invoke["via"] == "http-host"
            window.answer(invoke, "accept", {"name": "Web", "party_size": 5})
            assert json.loads(text_of(pending.result(20)))["content"] == {"name": "Web", "party_size": 5}
            assert [p["name"] for p in status_json(http_main)["peers"] if p["role"] == "host"] == ["http-host"]
        finally:
            host.close()

    alone = http_host(hosts, f"{url}/demo", token, "one-server", "auto")
    try:
        assert "book_table" in alone.tool_names()
        assert text_of(alone.call("echo", {"text": "unprefixed"})) == "unprefixed"
    finally:
        alone.close()
    done = http_main.cli("serve", "--print-config", "--http")
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout[done.stdout.index("{"):done.stdout.index("\n}") + 2])
    assert first["mcpServers"]["elicitron"] == {"url": url, "headers": {"Authorization": f"Bearer {token}"}}
