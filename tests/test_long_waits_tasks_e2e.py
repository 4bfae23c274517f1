"""A host that asks for a task on its call while the approval takes longer than its request timeout
(issue 36, item 4), across real processes: a real main and demo server, `elicitron serve`, a
contract-only window answering the card, and the TypeScript SDK's task API
(`client.experimental.tasks.callToolStream`, the tasks of MCP 2025-11-25: the host asks for the
task) and mcp's Python `Client` with a tasks extension of its own (`ClientExtension` with a
`ResultClaim` for `resultType: "task"`, MCP 2026-07-28 / SEP-2663: main decides on the task), both with
a 3 s request timeout. The person answers once the host has polled for 6 s; the call succeeds through
the task.
"""

import json
import queue
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import npm_kit
import pytest
from consent_kit import ConsentMain, demo, invoke_of, launch
from gateway_kit import Host, HostLoop, open_beside, serve_params, text_of
from kit.env import child_env, short_tmp_dir
from kit.paths import ROOT, TESTS
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict
from test_long_waits_e2e import Lines, allow_once

pytestmark = pytest.mark.slow

HOST_TIMEOUT_S = 3.0
ANSWER_AT_S = 6.0


@pytest.fixture
def main(tmp_path: Path) -> Iterator[ConsentMain]:
    """A main whose demo server asks before every call, and tells a call with neither progress nor a
    task to retry at 1 s (a task must not take that path)."""
    runtime = short_tmp_dir()
    home = Path(tempfile.mkdtemp(prefix="long-tasks-", dir=tmp_path))
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": demo(toolApproval="ask")},
                                  "elicitron": {"waitRetrySeconds": 1.0, "waitTaskSeconds": 1.5}}))
    running = launch(config, runtime, home, ["demo"])
    yield running
    running.stop()
    subprocess.run(["rm", "-rf", str(runtime)], check=False)


def run_ts_task_host(main: ConsentMain, arguments: dict[str, Any], merged: bool = False) -> "subprocess.Popen[str]":
    package, version, name = npm_kit.TS_SDK
    node, modules = npm_kit.ensure_packages(f"{name}-{version}", {package: version})
    serve = serve_params(main.connection) if merged else serve_params(main.connection, "--server", "demo")
    spec = {"command": serve.command, "args": serve.args, "env": child_env(), "cwd": str(ROOT),
            "tool": "demo__echo" if merged else "echo", "arguments": arguments, "timeoutMs": HOST_TIMEOUT_S * 1000}
    return subprocess.Popen([str(node), str(TESTS / "ts_task_host.mjs"), str(modules / package), json.dumps(spec)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)


@pytest.mark.timeout(600)  # the first run installs the SDK and Node with npm
@pytest.mark.parametrize("merged", [False, True], ids=["one server", "merged"])
def test_a_typescript_host_with_a_3_s_timeout_gets_its_result_through_a_task_when_the_person_answers_at_6_s(
        main: ConsentMain, merged: bool) -> None:
    if not npm_kit.npm_available():
        pytest.skip("npm is not installed (CI installs it): the Node host cannot be installed")
    window = main.peer(name="phone")
    proc = run_ts_task_host(main, {"text": "worth the wait"}, merged)
    try:
        lines = Lines(proc)
        connected = lines.next(window, 60)
        assert connected["connected"] is True
        assert connected["serverTasks"]["requests"]["tools"]["call"] == {}  # main declares tasks
        created = lines.next(window)
        assert created["taskCreated"]["status"] == "working", created
        invoke = invoke_of(window)
        assert invoke["approval"]["arguments"] == {"text": "worth the wait"}
        statuses: list[dict[str, Any]] = []
        while not statuses or statuses[-1]["elapsedMs"] < ANSWER_AT_S * 1000:  # past its timeout twice
            line = lines.next(window)
            assert "taskStatus" in line, line  # not an error, not a "retry": the task still works
            statuses.append(line)
        assert {line["taskStatus"]["status"] for line in statuses} == {"working"}
        assert statuses[-1]["taskStatus"]["statusMessage"].startswith("waiting for approval on ")
        assert statuses[-1]["taskStatus"]["taskId"] == created["taskCreated"]["taskId"]
        allow_once(window, invoke)
        while "taskStatus" in (line := lines.next(window)):
            pass
        assert line["result"]["content"] == [{"type": "text", "text": "worth the wait"}], line
        assert not line["result"].get("isError")
        assert line["elapsedMs"] > ANSWER_AT_S * 1000
        proc.wait(30)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.timeout(600)
def test_a_denied_call_in_a_task_ends_with_the_denial_as_its_result(main: ConsentMain) -> None:
    if not npm_kit.npm_available():
        pytest.skip("npm is not installed (CI installs it): the Node host cannot be installed")
    window = main.peer(name="phone")
    proc = run_ts_task_host(main, {"text": "not this"})
    try:
        lines = Lines(proc)
        assert lines.next(window, 60)["connected"] is True
        assert "taskCreated" in lines.next(window)
        invoke = invoke_of(window)
        window.answer(invoke, "accept", {"decision": "deny"})
        while "taskStatus" in (line := lines.next(window)):
            pass
        assert line["result"]["isError"] is True, line
        assert "denied" in line["result"]["content"][0]["text"].lower()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class TaskHandle(Result):
    """SEP-2663's CreateTaskResult, as the host's extension reads it."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None


class TaskIdParams(RequestParams):
    task_id: str


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"


class DetailedTask(Result):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class PollingTasks(ClientExtension):
    """The tasks extension on mcp's `Client`: a task handle is polled with tasks/get until it ends;
    each poll is put on `polls` (with its time since the handle came) for the test to watch."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self) -> None:
        self.polls: queue.Queue[tuple[float, DetailedTask]] = queue.Queue()
        self.handles: list[TaskHandle] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.handles.append(handle)
        started = anyio.current_time()
        while True:
            await anyio.sleep((handle.poll_interval_ms or 1000) / 1000)  # the host's poll interval
            task = await ctx.session.send_request(GetTask(params=TaskIdParams(task_id=handle.task_id)),
                                                  DetailedTask, request_read_timeout_seconds=HOST_TIMEOUT_S)
            self.polls.put((anyio.current_time() - started, task))
            if task.status == "completed" and task.result is not None:
                return CallToolResult.model_validate(task.result)
            if task.status in ("failed", "cancelled"):
                raise RuntimeError(f"task {task.status}: {task.error}")


@pytest.mark.parametrize("merged", [False, True], ids=["one server", "merged"])
def test_a_python_host_that_declares_tasks_gets_a_task_after_the_threshold_and_its_result_when_the_person_answers(
        main: ConsentMain, hosts: HostLoop, merged: bool) -> None:
    window = main.peer(name="phone")
    tasks = PollingTasks()
    serve = serve_params(main.connection) if merged else serve_params(main.connection, "--server", "demo")
    host = Host(hosts, serve, "Python task host")
    host.client = Client(serve, extensions=[tasks], client_info=host.client.client_info, cache=None)
    tool = "demo__echo" if merged else "echo"
    open_beside(host, main)
    try:
        call = host.start(lambda c: c.call_tool(tool, {"text": "worth the wait"}, read_timeout_seconds=HOST_TIMEOUT_S))
        invoke = invoke_of(window)
        assert invoke["approval"]["arguments"] == {"text": "worth the wait"}
        assert "io.modelcontextprotocol/tasks" in (host.client.server_capabilities.extensions or {})
        polled: list[tuple[float, DetailedTask]] = []
        waited = 0.0
        while not polled or polled[-1][0] < ANSWER_AT_S - 1.5:  # the task came at 1.5 s: answer at ~6 s
            try:
                polled.append(tasks.polls.get(timeout=0.2))
            except queue.Empty:
                waited += 0.2
                assert waited < 30 and not call.done(), call.result() if call.done() else "no task polls"
            window.heartbeat_if_due()
        assert [handle.status for handle in tasks.handles] == ["working"]
        assert tasks.handles[0].status_message is not None
        assert tasks.handles[0].status_message.startswith("waiting for approval on ")
        assert {task.status for _, task in polled} == {"working"}  # not "still pending, retry"
        allow_once(window, invoke)
        result = call.result(30)
        assert result.is_error is not True and text_of(result) == "worth the wait"
    finally:
        host.close()


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"


class CancellingTasks(PollingTasks):
    """A host that gives up on its task at once: tasks/cancel, whose answer it keeps."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled: list[DetailedTask] = []

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.handles.append(handle)
        answer = await ctx.session.send_request(CancelTask(params=TaskIdParams(task_id=handle.task_id)), DetailedTask,
                                                request_read_timeout_seconds=HOST_TIMEOUT_S)
        self.cancelled.append(answer)
        return CallToolResult(content=[], is_error=True)


def test_tasks_cancel_withdraws_the_approval_card(main: ConsentMain, hosts: HostLoop) -> None:
    window = main.peer(name="phone")
    tasks = CancellingTasks()
    host = Host(hosts, serve_params(main.connection, "--server", "demo"), "Python task host")
    host.client = Client(serve_params(main.connection, "--server", "demo"), extensions=[tasks],
                         client_info=host.client.client_info, cache=None)
    open_beside(host, main)
    try:
        call = host.start(lambda c: c.call_tool("echo", {"text": "never mind"}, read_timeout_seconds=HOST_TIMEOUT_S))
        invoke = invoke_of(window)
        window.expect(lambda topic, body: topic == "msgElicitationTransferDismiss"
                      and body["responseChannel"] == invoke["responseChannel"])  # the card is gone
        call.result(30)
        assert [task.status for task in tasks.cancelled] == ["cancelled"]
    finally:
        host.close()
