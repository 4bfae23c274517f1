"""A denied tool never runs, whatever lax JSON a host sends (issue 33, finding 1), across real processes.

Two servers on `toolApproval: "deny"`: the Python SDK's (pydantic reads NaN, Infinity, a float id)
and the TypeScript SDK's server-everything (`JSON.parse` reads a float or exponent id and a number
out of range). A raw host sends each lax form of a `tools/call` through `elicitron serve --server`
(main holds its pipes) and through main's `--mcp-http` `/mcp/<server>`. Every answer must be a
JSON-RPC error or the denial: never the tool's own result. The in-process cases are in
tests/test_relay_strict.py.
"""

import json
import queue
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT
from kit.zygote import launched
from test_everything_server import everything_binary

pytestmark = pytest.mark.slow  # real main, serve, servers

TIMEOUT_S = 30.0
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "fuzz-host", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TALLIED = b'{"jsonrpc":"2.0","id":300,"method":"tools/call","params":{"name":"tallied","arguments":{}}}'
# The params (open at the end) of a tool each server runs for anyone who asks.
TOOLS = {"py": b'{"name":"tally","arguments":{"text":"denied tool ran"}',
         "everything": b'{"name":"echo","arguments":{"message":"denied tool ran"}'}


def lax_calls(server: str, merged: bool = False) -> dict[str, bytes]:
    """Each lax form of a tools/call of `server`'s tool, by name (`merged`: under its gateway name
    `<server>__<tool>`)."""
    params = _params(server, merged)

    def call(request_id: bytes, extra: bytes = b"", value: bytes | None = None) -> bytes:
        body = params + (b',"x":' + value if value is not None else b"") + b"}"
        return b'{"jsonrpc":"2.0","id":' + request_id + b',"method":"tools/call","params":' + body + extra + b"}"

    return {
        "NaN": call(b"101", value=b"NaN"),
        "Infinity": call(b"102", value=b"Infinity"),
        "-Infinity": call(b"103", value=b"-Infinity"),
        "float id": call(b"7.0"),
        "exponent id": call(b"8e0"),
        "number out of range": call(b"104", value=b"1e999"),
        "BOM": b"\xef\xbb\xbf" + call(b"105"),
        "invalid UTF-8": call(b"106", value=b'"\xff\xfe"'),
        "lone surrogate": call(b"107", value=b'"\\ud800"'),
        "deep nesting": call(b"108", value=b"[" * 1000 + b"]" * 1000),
        "duplicate keys": call(b"109", extra=b',"method":"tools/call","id":109'),
        "duplicate method": b'{"jsonrpc":"2.0","id":110,"method":"ping","method":"tools/call","params":' + params + b"}}",
    }


def _params(server: str, merged: bool) -> bytes:
    return TOOLS[server].replace(b'"name":"', b'"name":"' + server.encode() + b"__") if merged else TOOLS[server]


def tallied(merged: bool) -> bytes:
    return TALLIED.replace(b'"tallied"', b'"py__tallied"') if merged else TALLIED


def assert_never_ran(answers: list[bytes]) -> None:
    """Each answer is an error or Elicitron's denial (whose sentence says the tool was not called)."""
    assert answers, "no answer at all"
    for answer in answers:
        message = json.loads(answer)
        if "error" in message:
            assert message["error"]["code"] in (-32700, -32600, -32602), message
            continue
        assert message["result"].get("isError") is True and b"was not called" in answer, message


@pytest.fixture(scope="module")
def fuzz_main() -> Iterator[RunningMain]:
    home = short_tmp_dir("eli-fuzz-")
    servers = {"py": {**launched(ROOT / "tests" / "tally_server.py"),
                      "toolApproval": "deny", "toolApprovalOverrides": {"tallied": "allow"}},
               "everything": {"command": everything_binary(), "args": ["stdio"], "toolApproval": "deny"}}
    running = start_main(write_config(home / "mcp.json", servers), home, "--mcp-http", "0", home=home)
    try:
        running.wait_server_ready("py")
        running.wait_server_ready("everything")
        running.wait_status(lambda status: (status.get("mcpHttp") or {}).get("state") == "listening",
                            "its MCP HTTP endpoint listening")
        yield running
    finally:
        running.stop()
        shutil.rmtree(home, ignore_errors=True)


class StdioHost:
    """A host that writes raw lines to `elicitron serve --server NAME` and reads its answers."""

    def __init__(self, main: RunningMain, server: str | None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli_process", "serve", "--connection", str(main.connection),
             *(["--server", server] if server is not None else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), cwd=ROOT)
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> bytes:
        """The next response (the server's own notifications and requests are skipped)."""
        while True:
            try:
                line = self._lines.get(timeout=TIMEOUT_S)
            except queue.Empty:
                raise AssertionError(f"no answer in {TIMEOUT_S:.0f} s") from None
            if not line:
                assert self.proc.stderr is not None
                raise AssertionError(f"serve ended without an answer: {self.proc.stderr.read().decode()[-2000:]}")
            if "method" not in json.loads(line):
                return line

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            assert self.proc.wait(TIMEOUT_S) == 0
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.mark.parametrize("merged", [False, True], ids=["server", "merged"])
@pytest.mark.parametrize("server", ["py", "everything"])
def test_no_lax_form_of_a_denied_call_runs_through_serve(fuzz_main: RunningMain, server: str, merged: bool) -> None:
    host = StdioHost(fuzz_main, None if merged else server)
    try:
        host.send(json.dumps(INITIALIZE).encode())
        assert "result" in json.loads(host.answer())
        host.send(json.dumps(INITIALIZED).encode())
        answers = []
        for line in lax_calls(server, merged).values():
            host.send(line)
            answers.append(host.answer())
        assert_never_ran(answers)
        # The same call, strict: denied by toolApproval (the path is live and decides).
        host.send(b'{"jsonrpc":"2.0","id":200,"method":"tools/call","params":' + _params(server, merged) + b"}}")
        denial = json.loads(host.answer())
        assert denial["id"] == 200 and denial["result"]["isError"] is True
        if server == "py":  # the server itself says no call of its tool ran
            host.send(tallied(merged))
            assert json.loads(host.answer())["result"]["structuredContent"] == {"result": 0}
    finally:
        host.close()


def _post(url: str, token: str, body: bytes, session: str | None) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), refused.read()


def _messages(content_type: str, body: bytes) -> list[bytes]:
    if "text/event-stream" not in content_type:
        return [body] if body.strip() else []
    return [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:") and line[5:].strip()]


def _http_session(main: RunningMain, server: str) -> tuple[Callable[[bytes], list[bytes]], str]:
    url, token = f"{main.info['mcpHttpUrl']}/{server}", main.info["mcpHttpToken"]
    status, headers, body = _post(url, token, json.dumps(INITIALIZE).encode(), None)
    assert status == 200, body
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    _post(url, token, json.dumps(INITIALIZED).encode(), session)

    def send(raw: bytes) -> list[bytes]:
        _status, got, reply = _post(url, token, raw, session)
        return _messages({k.lower(): v for k, v in got.items()}.get("content-type", ""), reply)
    return send, session


@pytest.mark.parametrize("server", ["py", "everything"])
def test_no_lax_form_of_a_denied_call_runs_through_http(fuzz_main: RunningMain, server: str) -> None:
    send, _session = _http_session(fuzz_main, server)
    answers: list[bytes] = []
    for line in lax_calls(server).values():
        # (The SDK's HTTP transport in front of the relay reads a float id as a notification: 202, no
        # answer. Whatever it passes on is decided on again, and the server's count below tells.)
        answers += [m for m in send(line) if b'"id"' in m and b'"method"' not in m]
    assert_never_ran(answers)
    params = TOOLS[server]
    [denial] = send(b'{"jsonrpc":"2.0","id":200,"method":"tools/call","params":' + params + b"}}")
    assert json.loads(denial)["result"]["isError"] is True
    if server == "py":
        [count] = send(TALLIED)
        assert json.loads(count)["result"]["structuredContent"] == {"result": 0}
