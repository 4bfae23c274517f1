"""Every server at once through Elicitron (`elicitron serve` without --server, and `/mcp` over
HTTP), with mcp's own `Client` as the host in both eras: the host's own sessions with the
conformance server and the demo server, merged (main_process/relay/merge/). What the old all-servers
gateway could not pass on is what this checks: logging, sampling, roots, elicitation to the host,
completions, resource subscriptions and `subscriptions/listen`, prompts, progress, capabilities."""

import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from gateway_kit import HostLoop, serve_params
from kit.demo import demo_stdio_entry
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT
from kit.zygote import launched
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

pytestmark = [pytest.mark.slow,  # a real main, gateways, servers and hosts
              pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]  # logging/setLevel

CONFORMANCE = ROOT / "tests" / "conformance_server.py"
ROOT_URI = "file:///work/merged"


@pytest.fixture(scope="module")
def merged_main(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMain]:
    runtime = short_tmp_dir()
    config = write_config(tmp_path_factory.mktemp("merged") / "mcp.json", {
        "conf": {**launched(CONFORMANCE), "elicitationRoute": "host"},
        "demo": demo_stdio_entry(),
    })
    running = start_main(config, runtime, "--mcp-http", "0")
    try:
        running.wait_server_ready("conf")
        running.wait_server_ready("demo")
        running.wait_status(lambda status: (status.get("mcpHttp") or {}).get("state") == "listening",
                            "its MCP HTTP endpoint listening")
        assert "mcpHttpUrl" in running.info
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def hosts() -> Iterator[HostLoop]:
    loop = HostLoop()
    yield loop
    loop.close()


class Seen:
    """What the host's callbacks saw."""

    def __init__(self) -> None:
        self.logs: list[Any] = []
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.elicited: list[Any] = []
        self.roots_asked = 0
        self.notifications: list[str] = []
        self.notified = anyio.Event()  # set (and renewed) on each notification, for waiters

    def note(self, method: str) -> None:
        self.notifications.append(method)
        self.notified.set()
        self.notified = anyio.Event()

    async def wait_for(self, method: str) -> None:
        while method not in self.notifications:
            await self.notified.wait()


def host(main: RunningMain, transport: str, mode: str, seen: Seen) -> Client:
    async def sampling(context: ClientRequestContext,
                       params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen.sampled.append(params)
        return types.CreateMessageResult(role="assistant", model="merged-test",
                                         content=types.TextContent(type="text", text="hello from the host"))

    async def roots(context: ClientRequestContext) -> types.ListRootsResult:
        seen.roots_asked += 1
        return types.ListRootsResult.model_validate({"roots": [{"uri": ROOT_URI, "name": "work"}]})

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.elicited.append(params)
        return types.ElicitResult(action="accept", content={"response": "from the host"})

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        seen.logs.append(params.data)

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str):
            seen.note(method)

    if transport == "stdio":
        server: Any = serve_params(main.connection)
    else:
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {main.info['mcpHttpToken']}"})
        server = streamable_http_client(main.info["mcpHttpUrl"], http_client=client)
    return Client(server, mode=mode, sampling_callback=sampling, list_roots_callback=roots, elicitation_callback=elicit,
                  logging_callback=log, message_handler=on_message, log_level="info" if mode == "auto" else None,
                  client_info=types.Implementation(name=f"merged-{transport}-{mode}", version="1"), cache=None)


def run(loop: HostLoop, client: Client, body: Callable[[Client], Awaitable[None]], timeout: float = 120) -> None:
    async def session() -> None:
        async with client:
            with anyio.fail_after(timeout - 5):
                await body(client)

    loop.run(session(), timeout)


def text(result: Any) -> str:
    items = getattr(result, "content", None) or [getattr(m, "content", None) for m in getattr(result, "messages", [])]
    return "".join(getattr(item, "text", "") for item in items if item is not None)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_every_feature_of_both_servers_reaches_the_host_under_prefixed_names(
    merged_main: RunningMain, hosts: HostLoop, transport: str, mode: str
) -> None:
    seen = Seen()

    async def body(client: Client) -> None:
        assert client.server_info is not None and client.server_info.name == "elicitron"
        # auto: the host went 2026-07-28 (every server speaks it); legacy: the handshake era
        assert (client.protocol_version == "2026-07-28") == (mode == "auto")
        capabilities = client.server_capabilities
        assert capabilities.logging is not None and capabilities.completions is not None
        assert capabilities.resources is not None and capabilities.resources.subscribe is True
        assert capabilities.prompts is not None and capabilities.tools is not None
        instructions = client.instructions or ""
        assert "## demo\nElicitron's demo server" in instructions and "servers: conf, demo" in instructions

        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"conf__test_simple_text", "conf__test_sampling", "demo__echo", "demo__book_table"} <= names
        assert all(name.startswith(("conf__", "demo__")) for name in names)
        assert text(await client.call_tool("demo__echo", {"text": "merged"})) == "merged"
        assert text(await client.call_tool("conf__test_simple_text", {})) == "This is a simple text response for testing."

        # sampling and roots: on the call's stream (handshake era) or as input rounds the host answers
        assert text(await client.call_tool("conf__test_sampling", {"prompt": "Say hi"})) == \
            "LLM response: hello from the host"
        assert seen.sampled and seen.sampled[-1].messages[0].content.text == "Say hi"  # type: ignore[union-attr]
        assert text(await client.call_tool("conf__test_input_required_result_list_roots", {})) == "Found 1 root(s)"
        assert seen.roots_asked >= 1
        # elicitation the server's route sends to the host
        answer = text(await client.call_tool("conf__test_elicitation", {"message": "Your name?"}))
        assert answer == 'User response: action=accept, content={"response": "from the host"}'
        assert seen.elicited

        # progress, by the host's own token
        steps: list[float] = []

        async def note(progress: float, total: float | None, message: str | None) -> None:
            steps.append(progress)

        await client.call_tool("conf__test_tool_with_progress", {}, progress_callback=note)
        assert steps == [0, 50, 100]

        # logging
        if mode == "legacy":
            await client.set_logging_level("debug")
            await client.call_tool("conf__test_tool_with_logging", {})
            assert "Tool execution completed" in seen.logs
        else:  # per request (_meta logLevel), as the host asked
            await client.call_tool("conf__test_logging_tool", {})
            assert "Diagnostic trace logging activated" in seen.logs

        # prompts and completions
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        assert {"conf__test_simple_prompt", "conf__test_prompt_with_arguments"} <= prompts
        got = await client.get_prompt("conf__test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert text(got) == "Prompt with arguments: arg1='a', arg2='b'"
        done = await client.complete(types.PromptReference(type="ref/prompt", name="conf__test_prompt_with_arguments"),
                                     {"name": "arg1", "value": "x"})
        assert done.completion.values == []
        done = await client.complete(types.ResourceTemplateReference(type="ref/resource",
                                                                     uri="test://template/{id}/data"),
                                     {"name": "id", "value": "1"})
        assert done.completion.values == []

        # resources: names prefixed, URIs as the server wrote them, reads by URI and by template
        resources = {str(r.uri): r.name for r in (await client.list_resources()).resources}
        assert resources["test://static-text"] == "conf__static-text"
        templates = {t.uri_template: t.name for t in (await client.list_resource_templates()).resource_templates}
        assert templates["test://template/{id}/data"] == "conf__template"
        read = (await client.read_resource("test://static-text")).contents[0]
        assert isinstance(read, types.TextResourceContents) and read.text
        read = (await client.read_resource("test://template/7/data")).contents[0]
        assert isinstance(read, types.TextResourceContents) and '"id": "7"' in read.text

        # subscriptions: resources/subscribe in the handshake era, subscriptions/listen on 2026-07-28
        if mode == "legacy":
            await client.subscribe_resource("test://watched-resource")
            await client.unsubscribe_resource("test://watched-resource")
            await client.call_tool("conf__test_trigger_tool_change", {})
            with anyio.fail_after(10):
                await seen.wait_for("notifications/tools/list_changed")
        else:
            async with client.listen(tools_list_changed=True) as subscription:
                await client.call_tool("conf__test_trigger_tool_change", {})
                with anyio.fail_after(10):
                    async for _event in subscription:
                        break

        # Elicitron's own errors name the problem
        with pytest.raises(Exception) as caught:
            await client.call_tool("nope__echo", {})
        assert getattr(caught.value, "error", None) is not None and caught.value.error.code == -32602  # type: ignore[attr-defined]

    run(hosts, host(merged_main, transport, mode, seen), body)


def test_a_2026_host_discovers_elicitron_and_its_tasks_go_to_the_server_that_made_them(merged_main: RunningMain) -> None:
    tasks = "io.modelcontextprotocol/tasks"
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {tasks: {}}}}
    proc = subprocess.Popen([sys.executable, "-m", "cli_process", "serve", "--connection", str(merged_main.connection)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env(),
                            cwd=ROOT)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                     "params": {**params, "_meta": meta}}).encode() + b"\n")
        proc.stdin.flush()
        while True:
            message = json.loads(proc.stdout.readline())
            if message.get("id") == request_id:
                return message

    try:
        discovered = ask(1, "server/discover", {})["result"]
        assert "2026-07-28" in discovered["supportedVersions"]
        assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "elicitron"
        assert tasks in discovered["capabilities"]["extensions"] and discovered["resultType"] == "complete"
        created = ask(2, "tools/call", {"name": "conf__slow_compute", "arguments": {"seconds": 0.2, "label": "x"}})
        assert created["result"]["resultType"] == "task"
        task_id = created["result"]["taskId"]
        deadline = time.monotonic() + 30
        n = 3
        while True:
            status = ask(n, "tasks/get", {"taskId": task_id})["result"]
            if status["status"] == "completed":
                break
            assert time.monotonic() < deadline, status
            n += 1
            # The protocol's own wait between polls (tasks/get has no push): the interval the task states.
            time.sleep((status.get("pollIntervalMs") or created["result"].get("pollIntervalMs") or 100) / 1000)
        assert status["result"]["content"][0]["text"] == "computed x in 0.2 s"
        echoed = ask(n + 1, "tools/call", {"name": "demo__echo", "arguments": {"text": "modern"}})["result"]
        assert echoed["content"][0]["text"] == "modern" and echoed["resultType"] == "complete"
    finally:
        proc.stdin.close()
        proc.wait(20)
