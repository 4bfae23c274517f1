"""A host cannot tell Elicitron's relay from the server direct (PROTOCOL §14, docs/hosts.md "How
serve relays"): real hosts run the same scripted session twice, DIRECT (on the conformance server,
started as a host would start it) and THROUGH (`elicitron serve --server conformance`, or main's
`--mcp-http` `/mcp/conformance`, against a main that has the server configured with
`"elicitationRoute": "host"`), and what each host observed must be equal.

Hosts: mcp's own `Client` (both eras: `mode="legacy"` and `mode="auto"`, over stdio and over
streamable HTTP), the TypeScript SDK's client (tests/ts_host.mjs), and the MCP Inspector's CLI.

The server is tests/conformance_server.py with one addition (tests/subscribing_conformance_server.py): it accepts
`resources/subscribe` and, as the resource changes, sends `notifications/resources/updated` for it
on the subscribe request's own stream, so a subscription has an update to deliver (the conformance
server alone remembers subscriptions and never sends one).

Normalised before comparing, and only these (each legitimately differs between any two runs, direct
or not): tasks' `taskId` (a uuid4 the server mints), `createdAt`/`lastUpdatedAt` (the server's clock).
Nothing else is: request ids, progress tokens, server request ids, error codes, messages and data
are compared as they are. Two host-side artefacts are kept out of the records instead: mcp numbers
`subscriptions/listen` ids process-wide (each session here numbers from 1, as a host process of its
own would), and the TypeScript SDK's onprogress drops a notification that arrives in the same read
as the call's answer (tests/ts_host.mjs records progress as it arrives).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal

import mcp.client.subscriptions as mcp_subscriptions
import mcp_types as types
import npm_kit
import pytest
from gateway_kit import serve_params
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT, TESTS
from kit.procs import end_process
from kit.zygote import launched
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.inbound import MCP_METHOD_HEADER, MCP_NAME_HEADER, MCP_PROTOCOL_VERSION_HEADER
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from pydantic import BaseModel, ConfigDict

pytestmark = [
    pytest.mark.slow,  # real mains, gateways, servers and hosts
    # logging/setLevel, resources/subscribe, roots and sampling are what a handshake-era host uses
    pytest.mark.filterwarnings(f"ignore::{MCPDeprecationWarning.__module__}.{MCPDeprecationWarning.__name__}"),
]

SERVER = "conformance"
SERVER_URL_ENTRY = "conformance-url"  # the same server over HTTP, configured in main as a `url` server
TASKS = "io.modelcontextprotocol/tasks"
TIMEOUT_S = 30.0
Json = dict[str, Any]

# The conformance server, plus a resources/updated after each subscribe (see the module docstring),
# forked from the test zygote (kit/zygote.py): each host run starts one, direct and through, and
# importing mcp for each was most of this module's CPU.
@functools.cache
def server_argv() -> list[str]:
    """Its command line (made on first use: the zygote starts only for the tests that run)."""
    entry = launched(TESTS / "subscribing_conformance_server.py")
    return [entry["command"], *entry["args"]]
ROOT_URI = "file:///work/project"  # the one root the hosts list


# ---- processes: the server over HTTP, and main ---------------------------------------------------


def start_http_server(timeout_s: float = TIMEOUT_S) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen([*server_argv(), "--http", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=child_env(), cwd=ROOT)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("LISTENING "):
        end_process(proc)
        raise AssertionError(f"the conformance server did not start over HTTP: {line!r}")
    return proc, line.split()[1]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """The conformance server (server_argv()) over streamable HTTP: the direct URL hosts use."""
    proc, url = start_http_server()
    yield url
    end_process(proc)
    assert proc.stdout is not None
    proc.stdout.close()


@pytest.fixture(scope="module")
def main(server_url: str) -> Iterator[RunningMain]:
    """One main for the module: the server over stdio (`conformance`) and as a `url` server
    (`conformance-url`), both `"elicitationRoute": "host"`, and MCP hosts over HTTP."""
    home = short_tmp_dir("eli-transparent-")
    servers = {SERVER: {"command": server_argv()[0], "args": server_argv()[1:], "elicitationRoute": "host"},
               SERVER_URL_ENTRY: {"url": server_url, "elicitationRoute": "host"}}
    running = start_main(write_config(home / "mcp.json", servers), home, "--mcp-http", "0", home=home)
    try:
        running.wait_server_ready(SERVER)
        running.wait_server_ready(SERVER_URL_ENTRY)
        deadline = time.monotonic() + TIMEOUT_S
        while "mcpHttpUrl" not in running.info:  # main adds it to its connection file once serving
            assert running.proc.poll() is None and time.monotonic() < deadline, running.stderr.tail()
            running.stderr.wait_change(running.stderr.size, 0.1)
        yield running
    finally:
        running.stop()
        shutil.rmtree(home, ignore_errors=True)


def direct_stdio() -> StdioServerParameters:
    """The server's own entry, as a host's config starts it."""
    return StdioServerParameters(command=server_argv()[0], args=server_argv()[1:], env=child_env(), cwd=str(ROOT))


def http_transport(url: str, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))


def relay_url(main: RunningMain, server: str) -> str:
    return f"{main.info['mcpHttpUrl']}/{server}"


# ---- the tasks extension (SEP-2663), for mcp's Client ----------------------------------------------


class TaskRequest(types.Request[dict[str, Any], str]):
    """tasks/get, tasks/update, tasks/cancel: the task's id also goes in the Mcp-Name header."""

    name_param = "taskId"


class CreatedTask(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class AnyResult(BaseModel):
    """Whatever a request of a method the SDK does not know came back with, as it came."""

    model_config = ConfigDict(extra="allow")


async def send_raw(session: ClientSession, request: types.Request[Any, Any]) -> Json:
    """`request` (a method the SDK does not know) sent as the Client sends any request; its result."""
    return (await session.send_request(request, AnyResult)).model_dump()


async def task_request(client: Client, method: str, task_id: str, **params: Any) -> Json:
    return await send_raw(client.session, TaskRequest(method=method, params={"taskId": task_id, **params}))


class Tasks(ClientExtension):
    """Claims `resultType: "task"` on tools/call: polls tasks/get (every pollIntervalMs, as the
    server asks) until the task ends, answering input_required with `answers`; records each state."""

    identifier = TASKS

    def __init__(self, seen: list[Json], answers: Json) -> None:
        self.seen, self.answers = seen, answers  # `seen`: the Observer's, which its take() empties

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.seen.append({"created": created.model_dump(by_alias=True, mode="json", exclude_none=True)})
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            state = await send_raw(ctx.session, TaskRequest(method="tasks/get",
                                                            params={"taskId": created.task_id}))
            last = self.seen[-1].get("get") or self.seen[-1].get("created") or {}
            if last.get("status") != state.get("status"):  # each state once: how many polls a state
                self.seen.append({"get": state})  # lasts is timing, not what the server did
            if state["status"] == "input_required":
                responses = {key: self.answers[key] for key in state["inputRequests"]}
                self.seen.append({"update": await send_raw(ctx.session, TaskRequest(
                    method="tasks/update", params={"taskId": created.task_id, "inputResponses": responses}))})
            elif state["status"] == "failed":  # a protocol-level error: the call's error
                raise MCPError.from_error_data(types.ErrorData.model_validate(state["error"]))
            elif state["status"] in ("completed", "cancelled"):
                return types.CallToolResult.model_validate(state.get("result") or {"content": []})
            else:  # the protocol's own wait between polls: the server's pollIntervalMs
                await asyncio.sleep((state.get("pollIntervalMs") or 100) / 1000)
        raise AssertionError(f"the task never ended: {self.seen}")


# ---- what a host observes -----------------------------------------------------------------------


def dump(value: Any) -> Any:
    if isinstance(value, list):
        return [dump(item) for item in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return value


def error_of(failure: BaseException) -> Json:
    if isinstance(failure, MCPError):
        return {"error": dump(failure.error)}
    return {"raised": type(failure).__name__, "message": str(failure)}


async def outcome(make: Callable[[], Awaitable[Any]]) -> Any:
    """What a request came back with: its result, or its error (code, message, data)."""
    try:
        return {"result": dump(await asyncio.wait_for(make(), TIMEOUT_S))}
    except (MCPError, RuntimeError, ValueError) as failure:
        return error_of(failure)


TIMESTAMPS = ("createdAt", "lastUpdatedAt")


def normalised(record: Any, ids: dict[str, str] | None = None) -> Any:
    """`record` with what differs between any two runs replaced by stable stand-ins: each task id by
    its order of appearance, the server's timestamps by a placeholder."""
    ids = {} if ids is None else ids
    if isinstance(record, dict):
        out = {}
        for key, value in record.items():
            if key == "taskId" and isinstance(value, str):
                out[key] = ids.setdefault(value, f"<task {len(ids) + 1}>")
            elif key in TIMESTAMPS and isinstance(value, str):
                out[key] = "<timestamp>"
            else:
                out[key] = normalised(value, ids)
        return out
    if isinstance(record, list):
        return [normalised(item, ids) for item in record]
    if isinstance(record, str):
        for task_id, stand_in in ids.items():
            record = record.replace(task_id, stand_in)
    return record


class Observer:
    """The host's callbacks, recording what the server asked and sent."""

    def __init__(self) -> None:
        self.sampling: list[Json] = []
        self.elicitations: list[Json] = []
        self.roots = 0
        self.logs: list[Json] = []
        self.notifications: list[Json] = []
        self.progress: list[Json] = []
        self.tasks: list[Json] = []  # the states of the tasks a call became (Tasks)
        self.asked = asyncio.Event()  # an elicitation arrived that `hold` keeps unanswered
        self.released = asyncio.Event()  # ... and the server withdrew it (its callback was cancelled)
        self.hold = False
        self._arrived = asyncio.Event()  # set on each callback, for `until`

    def _note(self) -> None:
        self._arrived.set()

    def count(self, method: str) -> int:
        return sum(n["method"] == method for n in self.notifications)

    async def until(self, holds: Callable[[], bool], timeout_s: float = 10.0) -> None:
        """Until `holds()`: for what arrives apart from a request's answer (a notification on another
        stream, or handed to a callback after the answer). Gives up quietly after `timeout_s`: what
        arrived is recorded, and the comparison shows what did not."""
        deadline = time.monotonic() + timeout_s
        while not holds() and (left := deadline - time.monotonic()) > 0:
            self._arrived.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)

    async def on_sampling(self, context: ClientRequestContext,
                          params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampling.append({"id": context.request_id, "params": dump(params)})
        asked = params.messages[0].content
        prompt = asked.text if isinstance(asked, types.TextContent) else "?"
        return types.CreateMessageResult(role="assistant", model="host-model", stop_reason="endTurn",
                                         content=types.TextContent(type="text",
                                                                   text=f"the host read {prompt!r}"))

    async def on_elicitation(self, context: ClientRequestContext,
                             params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicitations.append({"id": context.request_id, "params": dump(params)})
        if self.hold:
            self.asked.set()
            try:
                await asyncio.Event().wait()  # never answered: the call is cancelled meanwhile
            except asyncio.CancelledError:
                self.released.set()
                raise
        schema = params.requested_schema if isinstance(params, types.ElicitRequestFormParams) else {}
        fields = schema.get("properties", {})
        content: dict[str, str | int | float | bool | list[str] | None] = {
            name: "yes" if spec.get("type") == "string" else True for name, spec in fields.items()
            if spec.get("type") in ("string", "boolean")}
        return types.ElicitResult(action="accept", content=content)

    async def on_roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.roots += 1
        return types.ListRootsResult.model_validate({"roots": [{"uri": ROOT_URI, "name": "project"}]})

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(dump(params))
        self._note()

    async def on_message(self, message: Any) -> None:
        logged = isinstance(message, types.LoggingMessageNotification)  # on_log has it
        if isinstance(message, types.ServerNotification) and not logged:
            self.notifications.append(dump(message))
            self._note()

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append({"progress": progress, "total": total, "message": message})
        self._note()

    def take(self) -> Json:
        """What arrived since the last take, and start afresh."""
        taken = {"sampling": self.sampling, "elicitations": self.elicitations, "roots": self.roots,
                 "logs": self.logs, "notifications": self.notifications, "progress": self.progress,
                 "tasks": list(self.tasks)}
        self.sampling, self.elicitations, self.roots = [], [], 0
        self.logs, self.notifications, self.progress = [], [], []
        self.tasks.clear()  # the list Tasks appends to
        return {k: v for k, v in taken.items() if v}


TASK_ANSWERS: Json = {"confirm": {"action": "accept", "content": {"confirm": True}}}


async def python_session(server: Any, mode: str) -> Json:
    """The scripted host session; what the host observed, step by step."""
    seen = Observer()
    client = Client(server, mode=mode, cache=None, log_level="debug",
                    client_info=types.Implementation(name="transparency-host", version="1.0"),
                    sampling_callback=seen.on_sampling, elicitation_callback=seen.on_elicitation,
                    list_roots_callback=seen.on_roots, logging_callback=seen.on_log,
                    message_handler=seen.on_message, extensions=[Tasks(seen.tasks, TASK_ANSWERS)])
    record: Json = {}

    async def step(name: str, make: Callable[[], Awaitable[Any]], until: Callable[[], bool] | None = None,
                   ) -> None:
        answer = await outcome(make)
        if until is not None:
            await seen.until(until)
        record[name] = {"answer": answer, **seen.take()}

    async with client:
        session, call = client.session, client.call_tool
        record["connected"] = {
            "protocolVersion": client.protocol_version,
            "serverInfo": dump(client.server_info),
            "capabilities": dump(client.server_capabilities),
            "instructions": client.instructions,
            "initialize": dump(session.initialize_result),
            "discover": dump(session.discover_result),
        }
        modern = session.discover_result is not None
        await step("tools/list", client.list_tools)
        await step("resources/list", client.list_resources)
        await step("resources/templates/list", client.list_resource_templates)
        await step("prompts/list", client.list_prompts)
        await step("resources/read", lambda: client.read_resource("test://template/7/data"))
        await step("prompts/get", lambda: client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}))
        await step("tools/call", lambda: call("test_multiple_content_types", {}))
        await step("sampling", lambda: call("test_sampling", {"prompt": "What is 2+2?"}))
        await step("roots", lambda: call("test_input_required_result_list_roots", {}))
        await step("elicitation", lambda: call("test_elicitation", {"message": "Your name?"}))
        await step("multiple inputs", lambda: call("test_input_required_result_multiple_inputs", {}))
        await step("logging/setLevel", lambda: client.set_logging_level("debug"))
        # each tool logs on the call's own stream: three entries, and one
        await step("logging", lambda: call("test_tool_with_logging", {}), lambda: len(seen.logs) >= 3)
        await step("logging opt-in", lambda: call("test_logging_tool", {}), lambda: len(seen.logs) >= 1)
        await step("progress", lambda: call("test_tool_with_progress", {}, progress_callback=seen.on_progress),
                   lambda: len(seen.progress) >= 3 and seen.count("notifications/progress") >= 3)
        await step("completion/complete", lambda: client.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
            {"name": "arg1", "value": "a"}))
        await step("resources/subscribe", lambda: client.subscribe_resource("test://watched-resource"),
                   None if modern else lambda: seen.count("notifications/resources/updated") >= 1)
        await step("resources/unsubscribe", lambda: client.unsubscribe_resource("test://watched-resource"))
        # handshake era: the server also says so on its own (over HTTP: on the session's GET stream)
        await step("list changed", lambda: client.call_tool("test_trigger_tool_change", {}),
                   None if modern else lambda: seen.count("notifications/tools/list_changed") >= 1)
        if modern:
            async def listened() -> Json:
                async with client.listen(tools_list_changed=True, prompts_list_changed=True) as subscription:
                    await client.call_tool("test_trigger_prompt_change", {})
                    async for event in subscription:  # the event, and its notification to the message handler
                        await seen.until(lambda: seen.count("notifications/prompts/list_changed") >= 1)
                        return {"honored": dump(subscription.honored), "event": type(event).__name__}
                return {"ended": True}

            await step("subscriptions/listen", listened)
        await step("ping", session.send_ping)
        await step("error: unknown resource", lambda: client.read_resource("test://no-such-resource"))
        await step("error: unknown tool", lambda: client.call_tool("no_such_tool", {}))
        await step("error: tool error result", lambda: client.call_tool("test_error_handling", {}))
        if modern:  # each 2026-07-28 request declares its own capabilities: this one none
            await step("error: needs a capability", lambda: bare_request(
                client, "tools/call", {"name": "test_missing_capability", "arguments": {}}))
        else:  # the extension is only on the 2026-07-28 wire
            await step("error: needs a capability", lambda: client.call_tool("failing_job", {}))
        await step("unknown method", lambda: send_raw(
            session, types.Request[dict[str, Any], str](method="vendor.example/unknown", params={"x": 1})))
        record["cancellation"] = await cancellation(client, seen, modern)
        await step("after cancellation", lambda: client.call_tool("greet", {"name": "again"}))
        if modern:
            await step("tasks: completes", lambda: call("slow_compute", {"seconds": 0.2, "label": "t"}))
            await step("tasks: input_required", lambda: call("confirm_delete", {"filename": "a.txt"}))
            await step("tasks: failing", lambda: call("failing_job", {}))
            await step("tasks: protocol error", lambda: call("protocol_error_job", {}))
            record["tasks: cancel"] = await cancel_task(client)
            await step("tasks: unknown task", lambda: task_request(client, "tasks/get", "no-such-task"))
    return normalised(record)


async def bare_request(client: Client, method: str, params: Json) -> Json:
    """A 2026-07-28 request with an envelope of its own that declares no client capabilities (every
    request of that era carries its own), sent as the Client sends any request."""
    version = client.protocol_version
    meta = {PROTOCOL_VERSION_META_KEY: version, CLIENT_CAPABILITIES_META_KEY: {},
            CLIENT_INFO_META_KEY: {"name": "transparency-host", "version": "1.0"}}
    headers = {MCP_PROTOCOL_VERSION_HEADER: version, MCP_METHOD_HEADER: method, MCP_NAME_HEADER: params["name"]}
    dispatcher = client.session._dispatcher  # the Client stamps its own envelope on every other request
    return await dispatcher.send_raw_request(method, {**params, "_meta": meta}, {"headers": headers})


async def cancellation(client: Client, seen: Observer, modern: bool) -> Json:
    """Cancel a call in flight. Handshake era: a call whose elicitation the host keeps unanswered;
    the server, seeing the cancellation, withdraws its elicitation (the host's callback is
    cancelled). 2026-07-28 (no server requests on that wire, and a cancelled request gets no
    answer): a slow call, cancelled as it runs; the session goes on."""
    seen.hold = not modern
    # 2026-07-28: declaring no tasks extension for this request, so that the call runs as it is asked
    slow = {"name": "slow_compute", "arguments": {"seconds": 60}}
    call = asyncio.ensure_future(client.call_tool("test_elicitation", {"message": "Hold on"}) if not modern
                                 else bare_request(client, "tools/call", slow))
    if not modern:
        await asyncio.wait_for(seen.asked.wait(), TIMEOUT_S)
    else:  # the call is on the wire once a request sent after it on the same session is answered
        result_marker = await outcome(lambda: client.call_tool("greet", {"name": "marker"}))
        assert "result" in result_marker, result_marker
    call.cancel()
    result: Json = {}
    try:
        await asyncio.wait_for(call, TIMEOUT_S)
        result["call"] = "completed"
    except asyncio.CancelledError:
        result["call"] = "cancelled"
    except MCPError as failure:
        result["call"] = error_of(failure)
    if not modern:
        with suppress(TimeoutError):
            await asyncio.wait_for(seen.released.wait(), TIMEOUT_S)
        result["server withdrew its elicitation"] = seen.released.is_set()
    seen.hold = False
    return {**result, **seen.take()}


async def cancel_task(client: Client) -> Json:
    created = await client.session.call_tool("slow_compute", {"seconds": 60}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    task_id = created.task_id
    return {"created": dump(created),
            "cancel": await outcome(lambda: task_request(client, "tasks/cancel", task_id)),
            "get": await outcome(lambda: task_request(client, "tasks/get", task_id))}


DIRECT_RECORDS: dict[tuple[str, ...], Json] = {}  # each direct session once per module: it is the same each time


def direct_record(key: tuple[str, ...], make: Callable[[], Json]) -> Json:
    if key not in DIRECT_RECORDS:
        DIRECT_RECORDS[key] = make()
    return DIRECT_RECORDS[key]


def run_session(server: Any, mode: str) -> Json:
    # mcp numbers listen requests process-wide (listen-1, listen-2, ...): each session numbers from 1,
    # as a host process of its own would
    mcp_subscriptions._listen_ids = itertools.count(1)
    return asyncio.run(asyncio.wait_for(python_session(server, mode), 120))


def assert_same(direct: Json, through: Json) -> None:
    """Equal records; on a difference, each step that differs, direct and through."""
    differing = [key for key in direct.keys() | through.keys() if direct.get(key) != through.get(key)]
    assert not differing, "the host saw a difference in " + ", ".join(sorted(differing)) + ":\n" + "\n".join(
        f"  {key}:\n    direct:  {json.dumps(direct.get(key), sort_keys=True)}\n"
        f"    through: {json.dumps(through.get(key), sort_keys=True)}" for key in sorted(differing))


# ---- 1. mcp's Client over stdio: the server direct vs `elicitron serve --server conformance` -------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", [SERVER, SERVER_URL_ENTRY])
def test_a_python_host_over_stdio_sees_the_same_session_direct_and_through_serve(
    main: RunningMain, upstream: str, mode: str
) -> None:
    """`elicitron serve --server conformance` (main runs the server over stdio, as the host's own
    entry does) and `--server conformance-url` (main reaches the same server over HTTP)."""
    direct = direct_record(("python", "stdio", mode), lambda: run_session(direct_stdio(), mode))
    through = run_session(serve_params(main.connection, "--server", upstream), mode)
    assert direct["connected"]["protocolVersion"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert_same(direct, through)


# ---- 2. mcp's Client over streamable HTTP: the server's own URL vs main's /mcp/<server> ------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", [SERVER, SERVER_URL_ENTRY])
def test_a_python_host_over_http_sees_the_same_session_direct_and_through_mains_endpoint(
    main: RunningMain, server_url: str, upstream: str, mode: str
) -> None:
    """Through main's /mcp/conformance (main runs the server over stdio) and /mcp/conformance-url
    (main reaches the same server over HTTP), with the bearer token main's connection file names."""
    direct = direct_record(("python", "http", mode), lambda: run_session(http_transport(server_url), mode))
    through = run_session(http_transport(relay_url(main, upstream), main.info["mcpHttpToken"]), mode)
    assert direct["connected"]["protocolVersion"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert_same(direct, through)


# ---- 3. the TypeScript SDK's client (tests/ts_host.mjs) -------------------------------------------

def npm_install(package: str, version: str, name: str) -> tuple[Path, Path]:
    """Node 22 and the installed package's dir (npm_kit's cache, once per version)."""
    if not npm_kit.npm_available():
        pytest.skip("npm is not installed (CI installs it): the Node hosts cannot be installed")
    node, modules = npm_kit.ensure_packages(f"{name}-{version}", {package: version})
    return node, modules / package


@pytest.fixture(scope="module")
def ts_host() -> tuple[Path, Path]:
    return npm_install(*npm_kit.TS_SDK)


def stdio_spec(argv: list[str]) -> Json:
    return {"transport": "stdio", "command": argv[0], "args": argv[1:], "env": child_env(), "cwd": str(ROOT)}


def serve_argv(main: RunningMain, server: str) -> list[str]:
    """`elicitron serve --server NAME` as a host's config starts it (gateway_kit.serve_params)."""
    params = serve_params(main.connection, "--server", server)
    return [params.command, *params.args]


def run_ts_hosts(ts_host: tuple[Path, Path], *specs: Json) -> list[Json]:
    """tests/ts_host.mjs once per spec, all at once; each one's record."""
    node, sdk = ts_host
    procs = [subprocess.Popen([str(node), str(TESTS / "ts_host.mjs"), str(sdk), json.dumps(spec)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for spec in specs]
    records = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0 and out.strip(), f"ts_host.mjs exited {proc.returncode}:\n{err[-3000:]}"
        records.append(json.loads(out))
    return records


@pytest.mark.timeout(600)  # the first run installs the SDK and Node with npm
@pytest.mark.parametrize("upstream", [SERVER, SERVER_URL_ENTRY])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_typescript_host_sees_the_same_session_direct_and_through(
    main: RunningMain, server_url: str, ts_host: tuple[Path, Path], transport: str, upstream: str
) -> None:
    """The TypeScript SDK's Client: over stdio on the server vs on `serve --server`, and over
    streamable HTTP on the server's URL vs main's /mcp/<server> (with the bearer token)."""
    if transport == "stdio":
        direct, through = stdio_spec(server_argv()), stdio_spec(serve_argv(main, upstream))
    else:
        direct = {"transport": "http", "url": server_url}
        through = {"transport": "http", "url": relay_url(main, upstream),
                   "headers": {"Authorization": f"Bearer {main.info['mcpHttpToken']}"}}
    if ("ts", transport) in DIRECT_RECORDS:  # the direct session once (direct_record), the two at once
        seen_direct, (seen_through,) = DIRECT_RECORDS["ts", transport], run_ts_hosts(ts_host, through)
    else:
        seen_direct, seen_through = run_ts_hosts(ts_host, direct, through)
        DIRECT_RECORDS["ts", transport] = seen_direct
    assert seen_direct["connected"]["initialize"]["protocolVersion"] == "2025-11-25"
    assert seen_direct["sampling"]["sampling"] and seen_direct["resources/subscribe"].get("notifications")
    assert_same(seen_direct, seen_through)


# ---- 4. the MCP Inspector's CLI ------------------------------------------------------------------

# Every method the Inspector's --cli mode has that asks the server (`--method`: initialize, the lists,
# reads, gets, calls, logging/setLevel), errors too: all of them in the handshake era, and these (one
# of each kind) on 2026-07-28 as well. (skills/list and resources/directory/read it refuses itself
# once connected, the server declaring no skills: what they print follows from initialize's.)
INSPECTOR_RUNS: list[list[str]] = [
    ["--method", "initialize"],
    ["--method", "tools/list"],
    ["--method", "tools/call", "--tool-name", "failing_job"],  # 2026-07-28: a task, which the Inspector drives
    ["--method", "resources/read", "--uri", "test://no-such-resource"],
    ["--method", "prompts/get", "--prompt-name", "test_prompt_with_arguments", "--prompt-args", "arg1=a", "arg2=b"],
]
# Handshake era only. On 2026-07-28 the Inspector waits forever on a sampling request (it has no one
# to ask), direct or not, and refuses logging/setLevel itself. The other lists, reads and calls take
# the relay's path that the runs above take (each run costs a Node process and Python servers: the
# 2026 lists are the Python hosts' to check).
INSPECTOR_HANDSHAKE_RUNS: list[list[str]] = [
    ["--method", "tools/call", "--tool-name", "test_multiple_content_types"],
    ["--method", "tools/call", "--tool-name", "test_sampling", "--tool-arg", "prompt=hi"],
    ["--method", "resources/list"],
    ["--method", "resources/read", "--uri", "test://template/7/data"],
    ["--method", "resources/templates/list"],
    ["--method", "prompts/list"],
    ["--method", "logging/setLevel", "--log-level", "debug"],
]
# Its elicitations: test_an_elicitation_the_host_did_not_declare_goes_to_the_windows_and_...


@pytest.fixture(scope="module")
def inspector() -> tuple[Path, Path]:
    return npm_install(*npm_kit.INSPECTOR)


def run_inspector(inspector: tuple[Path, Path], home: Path, era: str, run: list[str], target: list[str],
                  ) -> Json:
    """One `inspector --cli` run: its exit code, its JSON result on stdout, its JSON error on stderr."""
    node, package = inspector
    # --connect-timeout: a loaded machine must not make one side "unreachable" (the default is 15 s)
    argv = [str(node), str(package / "clients" / "launcher" / "build" / "index.js"), "--cli", "--format", "json",
            "-q", "--connect-timeout", "60000", "--protocol-era", era, *run, "--", *target]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, cwd=ROOT, check=False,
                          env=child_env(HOME=str(home)))  # its catalog and secrets stay in `home`

    def parsed(text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError:
            return text.strip()
    return {"exit": done.returncode, "stdout": parsed(done.stdout), "stderr": parsed(done.stderr)}


@pytest.mark.timeout(600)  # the first run installs the Inspector and Node with npm
def test_the_inspector_cli_prints_the_same_for_every_method_direct_and_through_serve(
    main: RunningMain, inspector: tuple[Path, Path], tmp_path: Path
) -> None:
    """Each run in both eras (`--protocol-era legacy` and `modern`), on the server's own command and
    on `serve --server conformance`: exit code, stdout and stderr (JSON) equal."""
    target = {"direct": server_argv(), "through": serve_argv(main, SERVER)}
    runs = [("legacy", run) for run in INSPECTOR_RUNS + INSPECTOR_HANDSHAKE_RUNS]
    runs += [("modern", run) for run in INSPECTOR_RUNS]
    # Each run is a Node process and one or two Python servers: about a CPU's worth at a time, so
    # one more than there are CPUs keeps them all busy while a run waits on its processes starting
    with ThreadPoolExecutor(max_workers=(os.cpu_count() or 2) + 1) as pool:
        futures = {(way, f"{era}: {' '.join(run)}"): pool.submit(run_inspector, inspector, tmp_path, era, run, argv)
                   for era, run in runs for way, argv in target.items()}
        outputs = {key: future.result() for key, future in futures.items()}
    direct = {run: output for (way, run), output in outputs.items() if way == "direct"}
    through = {run: output for (way, run), output in outputs.items() if way == "through"}
    for era in ("legacy", "modern"):
        assert direct[f"{era}: --method initialize"]["exit"] == 0, direct[f"{era}: --method initialize"]
        assert direct[f"{era}: --method tools/list"]["exit"] == 0, direct[f"{era}: --method tools/list"]
    assert_same(direct, through)


def test_an_elicitation_the_host_did_not_declare_goes_to_the_windows_and_the_host_sees_their_answer(
    main: RunningMain, inspector: tuple[Path, Path], tmp_path: Path
) -> None:
    """The difference by design (PROTOCOL §14): the Inspector's CLI declares no elicitation
    capability, and the server asks anyway. Direct, the Inspector answers it itself (cancel); through,
    it never sees the request: Elicitron's windows answer it (here a window that cancels, as the
    Inspector does) and the host sees only the outcome. With no window to answer, the call waits for
    one (the Inspector gives up after 60 s), where direct it ends at once."""
    run = ["--method", "tools/call", "--tool-name", "test_elicitation", "--tool-arg", "message=Who are you?"]
    direct = run_inspector(inspector, tmp_path, "legacy", run, server_argv())
    window = main.peer("transparency-window")
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            through = pool.submit(run_inspector, inspector, tmp_path, "legacy", run, serve_argv(main, SERVER))
            _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                                      and b["request"]["params"]["message"] == "Who are you?", 60)
            assert invoke["via"] == "inspector-cli"
            window.answer(invoke, "cancel")
            assert through.result(90) == direct
    finally:
        window.close()
    assert direct["exit"] == 0 and "action=cancel" in json.dumps(direct["stdout"]), direct
