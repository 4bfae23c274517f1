"""A host's call whose approval takes longer than the host waits (issue 36, item 4), across real
processes: a real main and demo server, `elicitron serve`, a contract-only window answering the
card, and two hosts whose request timeout is 1 s:

- the TypeScript SDK's Client with `resetTimeoutOnProgress`: main's progress keeps it waiting, and
  the card is answered only after its timeout passed twice; the call succeeds;
- mcp's Python Client with `read_timeout_seconds` (it sends no progress token): it is told the
  approval is still pending and to retry; the card is answered; the retry succeeds with no second card
  (through `serve --server demo`, and through the merged session, `demo__echo`).
"""

import json
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import npm_kit
import pytest
from consent_kit import ConsentMain, demo, invoke_of, launch
from gateway_kit import Host, HostLoop, open_beside, serve_params, text_of
from kit.env import child_env, short_tmp_dir
from kit.paths import ROOT, TESTS
from kit.peer import WirePeer

pytestmark = pytest.mark.slow

HOST_TIMEOUT_S = 1.0


@pytest.fixture
def main(tmp_path: Path) -> Iterator[ConsentMain]:
    """A main whose demo server asks before every call, with short waits: progress every 0.25 s, and
    "still pending" at 0.5 s (below the hosts' 1 s)."""
    runtime = short_tmp_dir()
    home = Path(tempfile.mkdtemp(prefix="long-waits-", dir=tmp_path))
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": demo(toolApproval="ask")},
                                  "elicitron": {"waitProgressSeconds": 0.25, "waitRetrySeconds": 0.5}}))
    running = launch(config, runtime, home, ["demo"])
    yield running
    running.stop()
    subprocess.run(["rm", "-rf", str(runtime)], check=False)


def allow_once(window: WirePeer, invoke: dict[str, Any]) -> None:
    window.answer(invoke, "accept", {"decision": "allow-once"})


class Lines:
    """A child's stdout, one JSON object per line, read on a thread (the test waits on it with a
    timeout, keeping the window's heartbeat going meanwhile)."""

    def __init__(self, proc: "subprocess.Popen[str]") -> None:
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        assert proc.stdout is not None
        stdout = proc.stdout

        def read() -> None:
            for line in stdout:
                self._lines.put(json.loads(line))
            self._lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def next(self, window: WirePeer, timeout_s: float = 30.0) -> dict[str, Any]:
        waited = 0.0
        while True:
            try:
                line = self._lines.get(timeout=0.2)
            except queue.Empty:
                waited += 0.2
                window.heartbeat_if_due()
                assert waited < timeout_s, "the host wrote nothing more"
                continue
            assert line is not None, "the host ended without writing its result"
            window.heartbeat_if_due()
            return line


@pytest.mark.timeout(600)  # the first run installs the SDK and Node with npm
def test_a_typescript_host_with_a_1_s_timeout_keeps_waiting_on_progress_until_the_person_answers(
        main: ConsentMain) -> None:
    if not npm_kit.npm_available():
        pytest.skip("npm is not installed (CI installs it): the Node host cannot be installed")
    package, version, name = npm_kit.TS_SDK
    node, modules = npm_kit.ensure_packages(f"{name}-{version}", {package: version})
    window = main.peer(name="phone")
    serve = serve_params(main.connection, "--server", "demo")
    spec = {"command": serve.command, "args": serve.args, "env": child_env(), "cwd": str(ROOT),
            "tool": "echo", "arguments": {"text": "worth the wait"}, "timeoutMs": HOST_TIMEOUT_S * 1000}
    proc = subprocess.Popen([str(node), str(TESTS / "ts_long_wait_host.mjs"), str(modules / package), json.dumps(spec)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    try:
        lines = Lines(proc)
        assert lines.next(window, 60) == {"connected": True}
        invoke = invoke_of(window)
        assert invoke["approval"]["arguments"] == {"text": "worth the wait"}
        progress: list[dict[str, Any]] = []
        while not progress or progress[-1]["elapsedMs"] < 2 * HOST_TIMEOUT_S * 1000:  # its timeout passed twice
            line = lines.next(window)
            assert "progress" in line, line  # not an error: the host is still waiting
            progress.append(line)
        values = [line["progress"]["progress"] for line in progress]
        assert values == sorted(set(values))  # they increase
        assert progress[0]["progress"]["message"].startswith("waiting for approval on ")
        allow_once(window, invoke)
        while "progress" in (line := lines.next(window)):
            pass
        assert line["result"]["content"] == [{"type": "text", "text": "worth the wait"}], line
        assert not line["result"].get("isError")
        assert line["elapsedMs"] > 2 * HOST_TIMEOUT_S * 1000
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("merged", [False, True], ids=["one server", "merged"])
def test_a_python_host_without_progress_is_told_to_retry_and_the_retry_gets_the_answer_without_a_second_card(
        main: ConsentMain, hosts: HostLoop, merged: bool) -> None:
    window = main.peer(name="phone")
    serve = serve_params(main.connection) if merged else serve_params(main.connection, "--server", "demo")
    host = open_beside(Host(hosts, serve, "Python host"), main)
    tool = "demo__echo" if merged else "echo"
    try:
        call = host.start(lambda c: c.call_tool(tool, {"text": "worth the wait"}, read_timeout_seconds=HOST_TIMEOUT_S))
        invoke = invoke_of(window)
        first = call.result(30)
        assert first.is_error is True
        assert "still pending" in text_of(first) and "same arguments" in text_of(first)
        allow_once(window, invoke)  # the card stayed open: the person answers it now
        window.expect(lambda topic, body: topic == "msgElicitationTransferDismiss"
                      and body["responseChannel"] == invoke["responseChannel"])
        retry = host.call(tool, {"text": "worth the wait"}, timeout=30)  # a second card would leave it waiting
        assert retry.is_error is not True and text_of(retry) == "worth the wait"
        done = main.cli("audit", "--json")
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)
        approvals = [row for row in rows if row["kind"] == "approval"]
        assert [(row["decision"], row["tool"], row["window"]) for row in approvals] == [
            ("allow-once", "echo", window.window)]  # one card, answered once, for both calls
    finally:
        host.close()
