"""Backpressure on relayed bytes (issue 33, finding 2): a server that writes more than its host
reads, or a host that writes more than its server reads, waits; main's memory stays flat and
nothing is lost. Real main, real `elicitron serve`, a real server (tests/flood_server.py)."""

import json
import os
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.output import follow, wait_line
from kit.paths import ROOT
from kit.procs import end_process

pytestmark = pytest.mark.slow  # real main, serve, servers

FLOOD_MIB = 400
GROWTH_LIMIT_MIB = 50
TIMEOUT_S = 90.0
INITIALIZE: dict[str, object] = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "backpressure-host", "version": "1"}}}
INITIALIZED: dict[str, object] = {"jsonrpc": "2.0", "method": "notifications/initialized"}
ROWS = ("server", "merged")
# What the host writes to a server that reads nothing: with its pipes in main, until main holds it;
# merged, serve reads on and main ends the server's session past its limit (16 MiB), so 64 MiB show it.
WRITE_MIB = {"server": FLOOD_MIB, "merged": 64}
HELD_S = 2.0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.fixture(scope="module")
def flood_main() -> Iterator[tuple[RunningMain, Path]]:
    home = short_tmp_dir("eli-flood-")
    servers = {f"flood-{row}": {"command": sys.executable, "args": [str(ROOT / "tests" / "flood_server.py")],
                                "env": {"ELICITRON_FLOOD_STATUS": str(home / f"{row}.status")}}
               for row in ROWS}
    running = start_main(write_config(home / "mcp.json", servers), home, home=home)
    try:
        for row in ROWS:
            running.wait_server_ready(f"flood-{row}")
        yield running, home
    finally:
        running.stop()
        shutil.rmtree(home, ignore_errors=True)


def serve(main: RunningMain, server: str | None) -> "subprocess.Popen[bytes]":
    return subprocess.Popen(
        [sys.executable, "-m", "cli_process", "serve", "--connection", str(main.connection),
         *(["--server", server] if server else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)


def send(proc: "subprocess.Popen[bytes]", message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def response(proc: "subprocess.Popen[bytes]", request_id: int) -> tuple[dict[str, object], int]:
    """The response to `request_id`, and how many log notifications came before it."""
    assert proc.stdout is not None
    notes = 0
    for line in proc.stdout:
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            return message, notes
        notes += message.get("method") == "notifications/message"
    raise AssertionError("serve ended before the response")


def open_session(main: RunningMain, row: str) -> tuple["subprocess.Popen[bytes]", str]:
    server = f"flood-{row}"
    proc = serve(main, server if row == "server" else None)
    send(proc, INITIALIZE)
    assert "result" in response(proc, 0)[0]
    send(proc, INITIALIZED)
    return proc, server if row == "server" else f"{server}__"


def wait_for_status(path: Path, *words: str) -> str:
    """The server's own report of what it did (a line of its status file starting with one of
    `words`), once it writes one."""
    tail, output = follow(path)
    try:
        return wait_line(output, lambda line: (line.split() or [""])[0] in words,
                         f"the server saying {words}", TIMEOUT_S)
    finally:
        end_process(tail)
        output.close()


@pytest.mark.parametrize("row", ROWS)
def test_a_server_writing_to_a_host_that_reads_nothing_waits_and_main_stays_flat(
        flood_main: tuple[RunningMain, Path], row: str) -> None:
    main, home = flood_main
    proc, prefix = open_session(main, row)
    try:
        before = rss_mib(main.pid)
        tool = "flood" if row == "server" else f"{prefix}flood"
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {"mib": FLOOD_MIB}}})
        status = wait_for_status(home / f"{row}.status", "blocked", "done")
        grown = rss_mib(main.pid) - before
        print(f"{row}: main +{grown:.1f} MiB, server: {status}")
        assert grown < GROWTH_LIMIT_MIB, f"main grew {grown:.0f} MiB while the host read nothing ({status})"
        if row == "server":  # main holds the host's pipes: the server itself waits for the host
            assert status.startswith("blocked")
        answer, notes = response(proc, 1)  # now the host reads: everything comes, in order, then the result
        assert answer["result"] == {"content": [{"type": "text", "text": "flooded"}]}
        assert notes == FLOOD_MIB * (1 << 20) // (64 << 10)
    finally:
        end_process(proc)


@pytest.mark.parametrize("row", ROWS)
def test_a_host_writing_to_a_server_that_reads_nothing_is_held_and_main_stays_flat(
        flood_main: tuple[RunningMain, Path], row: str) -> None:
    main, _home = flood_main
    proc, prefix = open_session(main, row)
    try:
        tool = "deaf" if row == "server" else f"{prefix}deaf"
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
        assert response(proc, 1)[0]["result"] == {"content": [{"type": "text", "text": "deaf"}]}
        before = rss_mib(main.pid)
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        os.set_blocking(fd, False)
        line = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"pad": "y" * ((1 << 20) - 100)}}).encode() + b"\n"
        written, held = 0, False
        view = memoryview(line)
        while written < WRITE_MIB[row] << 20:
            try:
                sent = os.write(fd, view)
            except BlockingIOError:
                _, writable, _ = select.select([], [fd], [], HELD_S)
                if not writable:
                    held = True  # no room for HELD_S: main reads no more of this host
                    break
                continue
            except BrokenPipeError:
                break  # serve went away: the session ended
            written += sent
            view = view[sent:] or memoryview(line)
        grown = rss_mib(main.pid) - before
        print(f"{row}: main +{grown:.1f} MiB, the host wrote {written >> 20} MiB")
        assert grown < GROWTH_LIMIT_MIB, f"main grew {grown:.0f} MiB while the server read nothing"
        if row == "server":  # main holds the host's pipes: it stops reading them
            assert held and written < 64 << 20, f"the host wrote {written >> 20} MiB and was not held"
    finally:
        end_process(proc)
