"""Descriptors and peer slots (issue 24): nobody outside can take main down by opening connections,
and hosts or askers filling their slots never lock out the windows, `status` or `stop`.

main runs as a desktop session starts it, under `ulimit -n 1024` (soft and hard)."""

import json
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from kit.demo import demo_stdio_entry
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT
from kit.peer import WirePeer
from kit.window import start_window

pytestmark = pytest.mark.slow

OPEN_FILES = 1024  # the usual desktop default, soft and hard
FLOOD = 1_200  # idle TCP connections: beyond what main could hold under OPEN_FILES
HOST_CROWD, ASKER_CROWD = 1_000, 600  # together past main's 1,000 peers before roles had slots
GUESSED_KEYS = 40
LOG_GROWTH_LIMIT = 4096  # bytes main's log may grow by while it is flooded
BENCHLIB = Path(__file__).resolve().parents[1] / "scripts" / "benchlib"
CROWD, TCP_FLOOD = BENCHLIB / "abuse_peers.py", BENCHLIB / "abuse_tcp.py"


def free_tcp_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def limited_main() -> Iterator[RunningMain]:
    """main with the demo server and a tcp+CURVE listener, under ulimit -n OPEN_FILES."""
    home = short_tmp_dir("eli-fd-")
    port = free_tcp_port()
    main = start_main(write_config(home / "mcp.json", {"demo": demo_stdio_entry()}), home,
                      "--listen", f"tcp://127.0.0.1:{port}", home=home, open_files=(OPEN_FILES, OPEN_FILES))
    try:
        main.wait_server_ready("demo")
        yield main
    finally:
        main.stop()
        shutil.rmtree(home, ignore_errors=True)


def flood(host: str, port: int, count: int, sources: int = 1) -> "subprocess.Popen[bytes]":
    """`count` idle TCP connections to HOST:PORT from `sources` loopback addresses
    (scripts/benchlib/abuse_tcp.py, a process of its own); returns once main has answered, closed
    or left waiting each one. They stay open until the process's stdin closes."""
    proc = subprocess.Popen([sys.executable, str(TCP_FLOOD), host, str(port), str(count), "30", str(sources)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("ready"), f"the flood did not start: {line!r}"
    return proc


def end(proc: "subprocess.Popen[bytes]") -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(30)


def listener_status(main: RunningMain) -> dict[str, Any]:
    listeners = main.status(60).get("listeners", [])
    assert listeners, "status names no listener"
    return next(item for item in listeners if item["address"] == main.info["remoteEndpoint"])


def test_a_flood_of_idle_tcp_connections_leaves_main_up_and_every_window_attaching(
        limited_main: RunningMain, tmp_path: Path) -> None:
    main = limited_main
    paired = main.cli("pair", "--name", "laptop")
    assert paired.returncode == 0, paired.stderr
    remote = json.loads(paired.stdout)
    host, port = remote["endpoint"].removeprefix("tcp://").rsplit(":", 1)
    log_before = main.stderr.size

    # Keys nobody paired, tried one after another: each refused in the handshake, logged once.
    for _ in range(GUESSED_KEYS):
        public, secret = (key.decode() for key in zmq.curve_keypair())
        guess = WirePeer(remote["endpoint"], remote["token"], name="guess", curve=(remote["serverKey"], public, secret))
        try:
            assert guess.handshake_refused(timeout_s=30)
        finally:
            guess.close(bye=False)

    # From one address, then from a hundred (as from many machines): caps per address and in total.
    crowd = [flood(host, int(port), FLOOD), flood(host, int(port), FLOOD, sources=100)]
    try:
        # A local window (the real renderer) attaches while the flood still sits there.
        window = start_window(main.connection, "local-window")
        try:
            main.wait_peer("local-window", role="renderer", timeout_s=60)
            window.wait_state("connected", timeout_s=60)
        finally:
            window.end()
        status = main.cli("status", timeout=60)
        assert status.returncode == 0, status.stderr
        listener = listener_status(main)
        assert listener["refusedBy"].get("per-address limit", 0) > 0, listener
        assert listener["refusedBy"].get("total limit", 0) > 0, listener
        shown = re.search(rf"remote windows on {re.escape(remote['endpoint'])}: [\d,]+ open, ([\d,]+) refused",
                          status.stdout)
        assert shown and int(shown[1].replace(",", "")) > 0, status.stdout  # the flood goes on: counts grow
    finally:
        for proc in crowd:
            end(proc)

    # The flood ended: a paired remote window gets in over tcp+CURVE.
    far = WirePeer(remote["endpoint"], remote["token"], name="far-window",
                   curve=(remote["serverKey"], remote["clientPublicKey"], remote["clientSecretKey"]))
    main.peers.append(far)
    deadline = time.monotonic() + 60
    while True:  # connections the front still holds from the flood time out; then the window gets in
        welcome = far.hello(timeout_s=5) if not far.welcomed else {"topic": "welcome"}
        if welcome["topic"] == "welcome" or time.monotonic() > deadline:
            break
    assert welcome["topic"] == "welcome", welcome
    assert main.proc.poll() is None, f"main exited with {main.proc.returncode}:\n{main.stderr.tail()}"
    grown = main.stderr.size - log_before
    assert grown <= LOG_GROWTH_LIMIT, f"main's log grew {grown:,} bytes:\n{main.stderr.tail()}"


def crowd_of(main: RunningMain, role: str, count: int) -> tuple["subprocess.Popen[bytes]", int, int]:
    """`count` real peers of `role` (scripts/benchlib/abuse_peers.py, a process of their own) that
    say hello and stay; returns once each has had main's answer: (process, welcomed, refused)."""
    info = main.info
    proc = subprocess.Popen([sys.executable, str(CROWD), "crowd", info["endpoint"], info["token"], str(count),
                             role], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(main.home), cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().split()
    assert line and line[0] == "ready", f"the {role} crowd did not start: {line}"
    return proc, int(line[1]), int(line[2])


def test_hosts_and_askers_filling_their_slots_leave_room_for_windows_status_and_stop(
        main_factory: Any) -> None:
    main = main_factory({"demo": demo_stdio_entry()})
    hosts, hosts_in, _ = crowd_of(main, "host", HOST_CROWD)
    askers, askers_in, askers_refused = crowd_of(main, "asker", ASKER_CROWD)
    crowds = [hosts, askers]
    try:
        assert askers_refused > 0, "the askers' slots never filled"
        assert hosts_in + askers_in == len(main.status(60)["peers"]) - 1  # and the status's own controller
        window = start_window(main.connection, "late-window")
        try:
            main.wait_peer("late-window", role="renderer", timeout_s=60)
            window.wait_state("connected", timeout_s=60)
        finally:
            window.end()
        status = main.cli("status", timeout=60)
        assert status.returncode == 0, status.stderr
        assert "hosts (" in status.stdout
        rules = main.cli("rules", "list", timeout=60)
        assert rules.returncode == 0, rules.stderr
        stop = main.cli("stop", "--timeout", "60", timeout=90)  # 1,500 peers told bye on a loaded machine
        assert stop.returncode == 0, stop.stderr
        assert main.proc.wait(60) == 0
    finally:
        for proc in crowds:
            end(proc)
