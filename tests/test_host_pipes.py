"""Host pipes (PROTOCOL.md §14, host pipes): a local `serve` (with `--server NAME`, or without: every
server, merged by main) hands main the host's stdin and stdout, so a host's messages reach main with
no process in between, and serve takes them back whenever main stops or dies: real mains, real
serve processes, mcp's own Client as the host."""

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from gateway_kit import Host, HostLoop, probe_entry, serve_params, text_of
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain
from kit.paths import ROOT
from kit.procs import descendants, end_process
from mcp.shared.exceptions import MCPError

from shared.host_pipes import Handover, RecordReader, record, send_handover

pytestmark = pytest.mark.slow  # real mains, gateways and hosts

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "pipes-test", "version": "1"}}}



@pytest.fixture
def probe_main(main_factory: Any) -> RunningMain:
    main: RunningMain = main_factory({"probe": probe_entry()})
    main.wait_server_ready("probe")
    return main


def _serve(connection: Path, *args: str) -> "subprocess.Popen[bytes]":
    return subprocess.Popen([sys.executable, "-m", "cli_process", "serve", "--connection", str(connection), *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(), cwd=ROOT)


def _ask(proc: "subprocess.Popen[bytes]", message: dict[str, Any]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


def _pipes_of(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("pipe:"):
            found.add(target)
    return found


def test_main_holds_the_hosts_pipes_and_the_host_closing_its_stdin_ends_serve_and_the_server(
        probe_main: RunningMain) -> None:
    before = set(descendants(probe_main.pid))
    proc = _serve(probe_main.connection, "--server", "probe")
    try:
        answer = _ask(proc, INITIALIZE)
        assert answer["result"]["serverInfo"]["name"] == "gateway-probe"  # the server's own, as direct
        host_stdin = os.readlink(f"/proc/{proc.pid}/fd/0")
        assert host_stdin in _pipes_of(probe_main.pid)  # main reads the host's stdin itself
        _host_closes_stdin(proc, probe_main, host_stdin, before)
    finally:
        end_process(proc)



def _host_closes_stdin(proc: subprocess.Popen[bytes], main: RunningMain, host_stdin: str, before: set[int]) -> None:
    """The host closes serve's stdin: serve exits 0, the session's server processes stop and main
    lets go of the host's pipes."""
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    main.wait_status(lambda status: set(descendants(main.pid)) <= before, "the session's server process to be stopped")
    assert host_stdin not in _pipes_of(main.pid)


def test_serve_without_server_hands_main_its_pipes_and_main_merges_every_server(probe_main: RunningMain) -> None:
    before = set(descendants(probe_main.pid))
    proc = _serve(probe_main.connection)
    try:
        answer = _ask(proc, INITIALIZE)
        assert answer["result"]["serverInfo"]["name"] == "elicitron"  # every server, as one
        host_stdin = os.readlink(f"/proc/{proc.pid}/fd/0")
        assert host_stdin in _pipes_of(probe_main.pid)  # main reads the host's stdin itself
        listed = _ask(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert "probe__add" in [tool["name"] for tool in listed["result"]["tools"]]
        added = _ask(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "probe__add", "arguments": {"a": 2, "b": 3}}})
        assert added["result"]["structuredContent"] == {"sum": 5}
        _host_closes_stdin(proc, probe_main, host_stdin, before)
    finally:
        end_process(proc)


def test_hosts_coming_and_going_at_once_each_get_their_own_answers(probe_main: RunningMain) -> None:
    """Sessions end while others start: a descriptor main closed is soon another host's number, so
    closing one twice would cut another host off (uvloop's transports close what they were given)."""
    def one(index: int) -> tuple[int, str]:
        proc = _serve(probe_main.connection, "--server", "probe")
        try:
            _ask(proc, INITIALIZE)
            answer = _ask(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                 "params": {"name": "add", "arguments": {"a": index, "b": 1}}})
            assert proc.stdin is not None
            proc.stdin.close()
            return proc.wait(timeout=30), json.dumps(answer["result"]["structuredContent"])
        finally:
            end_process(proc)

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(one, range(18)))
    assert results == [(0, json.dumps({"sum": index + 1})) for index in range(18)]


MODES = {"server": ("--server", "probe"), "merged": ()}  # serve's arguments: one server, or every server


def _tool(mode: str, name: str) -> str:
    """What the host calls the probe's tool: its own name, or `probe__<name>` merged."""
    return name if mode == "server" else f"probe__{name}"


@contextmanager
def _host_of_its_own_main(hosts: HostLoop, tmp_path: Path, name: str, mode: str) -> Iterator[tuple[Host, Path]]:
    """A host on `serve [--server probe] --config ...` with no main running: serve starts one, then
    hands it the pipes. Its connection file, to stop or kill that main."""
    runtime = short_tmp_dir()
    connection = runtime / "connection.json"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"probe": probe_entry()}, "elicitron": {"autoOpenWindow": False}}))
    # exec'd: the tests look at serve's own pipes (_serve_stdin)
    host = Host(hosts, serve_params(connection, *MODES[mode], "--config", str(config), exec_serve=True), name)
    try:
        host.open(120)
        yield host, connection
    finally:
        host.close()
        _stop(connection)
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


def _serve_stdin(connection: Path) -> str:
    """The pipe the host writes to serve (its stdin): the serve this test started on `connection`."""
    serves = [pid for pid, command in descendants(os.getpid()).items()
              if " serve " in f" {command} " and str(connection) in command]
    assert len(serves) == 1, serves
    return os.readlink(f"/proc/{serves[0]}/fd/0")


def _stop(connection: Path) -> "subprocess.CompletedProcess[bytes]":
    return subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                          check=False, capture_output=True, timeout=60, env=child_env(), cwd=ROOT)


@pytest.mark.parametrize("mode", MODES)
def test_a_main_killed_mid_call_fails_the_call_and_the_next_call_reaches_a_new_main(
        hosts: HostLoop, tmp_path: Path, mode: str) -> None:
    with _host_of_its_own_main(hosts, tmp_path, "doomed", mode) as (host, connection):
        first_pid = host.call(_tool(mode, "pid")).structured_content
        main_pid = json.loads(connection.read_text())["pid"]
        assert _serve_stdin(connection) in _pipes_of(main_pid)  # main holds the host's pipes
        blocked = host.start(lambda client: client.call_tool(_tool(mode, "block"), {"tag": "killed"}))
        host.call(_tool(mode, "count"), {"steps": 0})  # the blocked call is at the server by now (in order)
        os.kill(main_pid, signal.SIGKILL)
        with pytest.raises(MCPError, match="main went away"):
            blocked.result(30)  # an answer, not a wait: serve knew the call was open
        again = host.call(_tool(mode, "pid"), timeout=120).structured_content  # a new main, the handshake replayed
        assert isinstance(again, dict) and again != first_pid


@pytest.mark.parametrize("mode", MODES)
def test_main_stopping_answers_the_open_call_and_gives_the_pipes_back(hosts: HostLoop, tmp_path: Path,
                                                                      mode: str) -> None:
    with _host_of_its_own_main(hosts, tmp_path, "stopped", mode) as (host, connection):
        blocked = host.start(lambda client: client.call_tool(_tool(mode, "block"), {"tag": "stopped"}))
        host.call(_tool(mode, "count"), {"steps": 0})
        stopped = _stop(connection)
        assert stopped.returncode == 0, stopped.stderr
        with pytest.raises(MCPError, match="main is stopping"):
            blocked.result(30)
        assert text_of(host.call(_tool(mode, "count"), {"steps": 1}, timeout=120)) == "counted to 1"  # main anew


def _hand_over(main: RunningMain, handover: Handover) -> tuple[object, ...]:
    info = json.loads(main.connection.read_text())
    reader_fd, writer_fd = os.pipe()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(10)
        sock.connect(info["hostPipes"])
        send_handover(sock, handover, reader_fd, writer_fd, writer_fd)
        records = RecordReader()
        while True:
            chunk = sock.recv(4096)
            assert chunk, "main closed the socket without an answer"
            got = records.feed(chunk)
            if got:
                return got[0]
    finally:
        sock.close()
        os.close(reader_fd)
        os.close(writer_fd)


def test_main_refuses_a_handover_with_a_wrong_token_or_from_no_host_peer(probe_main: RunningMain) -> None:
    info = json.loads(probe_main.connection.read_text())
    assert os.stat(info["hostPipes"]).st_mode & 0o777 == 0o600
    wrong_token = _hand_over(probe_main, Handover(token="0" * 64, window="w", session="s", server="probe"))
    assert wrong_token == ("refused", "the token does not match this main's connection file")
    nobody = _hand_over(probe_main, Handover(token=info["token"], window="not-a-peer", session="s", server="probe"))
    assert nobody == ("refused", "no host peer of this main has that window; say hello first")
    probe_main.status()  # main goes on


def test_records_come_out_whole_whatever_the_chunks() -> None:
    stream = record("open", 7, "tools/call") + record("done", "seven") + record("back", b"{\"jsonrpc\"")
    for size in (1, 3, len(stream)):
        reader = RecordReader()
        got = [item for start in range(0, len(stream), size) for item in reader.feed(stream[start:start + size])]
        assert got == [("open", 7, "tools/call"), ("done", "seven"), ("back", b"{\"jsonrpc\"")]
    with pytest.raises(ValueError, match="over"):
        RecordReader().feed(b"\xff\xff\xff\xff")

