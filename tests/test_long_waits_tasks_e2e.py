"""A host that asks for a task on its call while the approval takes longer than its request timeout
(issue 36, item 4), across real processes: a real main and demo server, `elicitron serve`, a
contract-only window answering the card, and the TypeScript SDK's task API
(`client.experimental.tasks.callToolStream`, the tasks of MCP 2025-11-25) with a 3 s request timeout.
The person answers once the host has polled for 6 s; the call succeeds through the task.
"""

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import npm_kit
import pytest
from consent_kit import ConsentMain, demo, invoke_of, launch
from gateway_kit import serve_params
from kit.env import child_env, short_tmp_dir
from kit.paths import ROOT, TESTS
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
                                  "elicitron": {"waitRetrySeconds": 1.0}}))
    running = launch(config, runtime, home, ["demo"])
    yield running
    running.stop()
    subprocess.run(["rm", "-rf", str(runtime)], check=False)


def run_ts_task_host(main: ConsentMain, arguments: dict[str, Any]) -> "subprocess.Popen[str]":
    package, version, name = npm_kit.TS_SDK
    node, modules = npm_kit.ensure_packages(f"{name}-{version}", {package: version})
    serve = serve_params(main.connection, "--server", "demo")
    spec = {"command": serve.command, "args": serve.args, "env": child_env(), "cwd": str(ROOT),
            "tool": "echo", "arguments": arguments, "timeoutMs": HOST_TIMEOUT_S * 1000}
    return subprocess.Popen([str(node), str(TESTS / "ts_task_host.mjs"), str(modules / package), json.dumps(spec)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)


@pytest.mark.timeout(600)  # the first run installs the SDK and Node with npm
def test_a_typescript_host_with_a_3_s_timeout_gets_its_result_through_a_task_when_the_person_answers_at_6_s(
        main: ConsentMain) -> None:
    if not npm_kit.npm_available():
        pytest.skip("npm is not installed (CI installs it): the Node host cannot be installed")
    window = main.peer(name="phone")
    proc = run_ts_task_host(main, {"text": "worth the wait"})
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
