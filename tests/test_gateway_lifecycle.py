"""`elicitron serve` over the lives of hosts and servers: a host killed mid-call, list changes after
a restart and a reload, main started by the gateway, ten hosts at once. Each test has its own main."""

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from gateway_kit import Host, HostLoop, open_beside, probe_entry, serve_params, status_json, text_of
from kit.demo import demo_stdio_entry
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain
from kit.paths import ROOT
from kit.peer import WirePeer
from kit.procs import descendants, end_process
from mcp import Client

pytestmark = pytest.mark.slow  # real mains, gateways and hosts

HOST_SCRIPT = ROOT / "tests" / "gateway_host_script.py"



def _probe_and_demo(main_factory: Callable[..., RunningMain]) -> RunningMain:
    running = main_factory({"demo": demo_stdio_entry(), "probe": probe_entry()})
    running.wait_server_ready("demo")
    running.wait_server_ready("probe")
    return running


@pytest.mark.parametrize("killed", ["host", "gateway"])
def test_killing_a_host_mid_call_cancels_at_the_server_dismisses_its_card_and_leaves_main_usable(
    main_factory: Callable[..., RunningMain], hosts: HostLoop, killed: str
) -> None:
    main = _probe_and_demo(main_factory)
    window = main.peer("wire-window")
    witness = open_beside(Host(hosts, serve_params(main.connection), "witness"), main)
    server_pid = witness.call("probe__pid").structured_content
    before = _server_processes(main)
    calls = [["probe__block", {"tag": killed, "steps": 1}], ["demo__book_table", {"restaurant": "Doomed"}]]
    proc = subprocess.Popen([sys.executable, str(HOST_SCRIPT), str(main.connection), "doomed", json.dumps(calls)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=child_env(), cwd=ROOT)
    try:
        assert proc.stdout is not None
        lines = _lines_of(proc)
        assert _next_line(lines, window) == b"calling"
        assert _next_line(lines, window) == b"progress probe__block"  # the call is at the server
        # The doomed host's own sessions, one server process each (main starts them for that host alone).
        doomed = _server_processes(main) - before
        assert len(doomed) == 2, doomed
        _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke", 20)
        assert invoke["via"] == "doomed"
        if killed == "host":
            proc.kill()  # the gateway's stdin closes
        else:
            gateway = next(pid for pid, cmd in descendants(proc.pid).items() if " serve " in f"{cmd} ")
            subprocess.run(["kill", "-KILL", str(gateway)], check=True)  # main notices its silence
        _, dismiss = window.expect(lambda t, b: t == "msgElicitationTransferDismiss"
                                   and b["responseChannel"] == invoke["responseChannel"], 20)
        assert dismiss["reason"] == "cancelled"
        # its sessions end: main stops its servers, and the calls with them (the window, heartbeating,
        # waits on its socket meanwhile)
        window.keep_alive_until(lambda: not doomed & _server_processes(main), 20)
        assert witness.call("probe__pid").structured_content == server_pid  # the witness's own: never restarted
        assert text_of(witness.call("demo__echo", {"text": "usable"})) == "usable"
        report = status_json(main)
        assert [p["name"] for p in report["peers"] if p["role"] == "host"] == ["witness"]
        assert {s["name"]: s["status"] for s in report["servers"]} == {"demo": "ready", "probe": "ready"}
    finally:
        end_process(proc)
        witness.close()


def _server_processes(main: RunningMain) -> set[int]:
    """The server processes main runs (its own, and every host's relayed sessions)."""
    return {pid for pid, cmd in descendants(main.pid).items()
            if "gateway_probe_server.py" in cmd or "demo_server.py" in cmd}


def _lines_of(proc: "subprocess.Popen[bytes]") -> "queue.Queue[bytes]":
    lines: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.strip())

    threading.Thread(target=read, daemon=True).start()
    return lines


def _next_line(lines: "queue.Queue[bytes]", window: WirePeer, timeout: float = 60) -> bytes:
    """The host script's next line, the window heartbeating meanwhile (the host's servers start)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return lines.get(timeout=0.2)
        except queue.Empty:
            assert time.monotonic() < deadline, "the host script said nothing"
            window.heartbeat_if_due()


class ListChanges:
    """Collects the tools/list_changed a host hears, in either era."""

    def __init__(self) -> None:
        self.seen: queue.Queue[str] = queue.Queue()
        self.listening = threading.Event()

    async def on_message(self, message: Any) -> None:  # handshake era: notifications
        if isinstance(message, types.ToolListChangedNotification):
            self.seen.put("tools")

    async def listen(self, client: Client) -> None:  # 2026-07-28: a subscriptions/listen stream
        async with client.listen(tools_list_changed=True) as subscription:
            self.listening.set()
            async for _event in subscription:
                self.seen.put("tools")

    def wait(self, timeout: float = 30) -> str:
        return self.seen.get(timeout=timeout)

    def drain(self) -> None:
        while not self.seen.empty():
            self.seen.get_nowait()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_tools_list_changed_reaches_the_host_after_a_restart_and_a_reload(
    main_factory: Callable[..., RunningMain], hosts: HostLoop, tmp_path: Path, mode: str
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": demo_stdio_entry()}}))
    main = main_factory.with_config(config)  # type: ignore[attr-defined]
    main.wait_server_ready("demo")
    changes = ListChanges()
    host = Host(hosts, serve_params(main.connection), f"watcher-{mode}", mode=mode,
                message_handler=changes.on_message).open()
    try:
        assert "demo__echo" in host.tool_names()
        if mode == "auto":
            host.start(changes.listen)
            assert changes.listening.wait(20)
        done = main.cli("server", "restart", "demo")
        assert done.returncode == 0, done.stderr
        assert changes.wait() == "tools"
        assert text_of(host.call("demo__echo", {"text": "after restart"})) == "after restart"

        changes.drain()
        config.write_text(json.dumps({"mcpServers": {"demo": demo_stdio_entry(), "probe": probe_entry()}}))
        done = main.cli("reload")
        assert done.returncode == 0, done.stderr
        assert changes.wait() == "tools"
        names = host.tool_names()
        while "probe__pid" not in names:  # the notice came when the new server was ready; relist as a host does
            changes.wait()
            names = host.tool_names()
        assert {"demo__echo", "probe__pid"} <= set(names)
    finally:
        host.close()


def test_a_server_that_changes_its_tools_is_relayed_to_the_host(
    main_factory: Callable[..., RunningMain], hosts: HostLoop
) -> None:
    main = main_factory({"probe": probe_entry()})
    main.wait_server_ready("probe")
    changes = ListChanges()
    host = Host(hosts, serve_params(main.connection), "grower", mode="legacy", message_handler=changes.on_message).open()
    try:
        assert "probe__sprout" not in host.tool_names()
        assert text_of(host.call("probe__grow", {"name": "sprout"})) == "added sprout"
        assert changes.wait() == "tools"  # the server's own announcement, relayed through main
        assert "probe__sprout" in host.tool_names()
        assert text_of(host.call("probe__sprout")) == "sprout answers"
    finally:
        host.close()


def test_serve_starts_main_when_none_runs_and_two_gateways_share_it(hosts: HostLoop, tmp_path: Path) -> None:
    runtime = short_tmp_dir()
    connection = runtime / "connection.json"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": demo_stdio_entry()},
                                  "elicitron": {"autoOpenWindow": False}}))
    first = Host(hosts, serve_params(connection, "--config", str(config)), "first")
    second = Host(hosts, serve_params(connection, "--config", str(config)), "second")
    try:
        for opening in [first.opening(), second.opening()]:  # at the same moment: one main wins
            opening.result(120)
        assert text_of(first.call("demo__echo", {"text": "one"})) == "one"
        assert text_of(second.call("demo__echo", {"text": "two"})) == "two"
        assert {p.get("name") for p in _status(connection)["peers"]} >= {"first", "second"}
        stopped = subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                                 check=False, capture_output=True, timeout=60, env=child_env(), cwd=ROOT)
        assert stopped.returncode == 0, stopped.stderr
        assert text_of(first.call("demo__echo", {"text": "again"}, timeout=120)) == "again"  # main started anew
        assert {p.get("name") for p in _status(connection)["peers"]} >= {"first"}
    finally:
        first.close()
        second.close()
        subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                       check=False, capture_output=True, timeout=60, env=child_env(), cwd=ROOT)
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


def _status(connection: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "cli_process", "status", "--json", "--connection", str(connection)],
                          check=False, capture_output=True, text=True, timeout=60, env=child_env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def echo(text: str) -> Callable[[Client], Coroutine[Any, Any, types.CallToolResult]]:
    return lambda client: client.call_tool("demo__echo", {"text": text})


def test_ten_hosts_share_the_servers_without_cross_talk(main_factory: Callable[..., RunningMain],
                                                       hosts: HostLoop) -> None:
    main = _probe_and_demo(main_factory)
    crowd = [Host(hosts, serve_params(main.connection), f"host-{i}") for i in range(10)]
    try:
        for opening in [host.opening() for host in crowd]:
            opening.result(120)
        pending = [(i, n, host.start(echo(f"{i}:{n}")))
                   for n in range(5) for i, host in enumerate(crowd)]
        assert [text_of(future.result(60)) for _, _, future in pending] == [f"{i}:{n}" for i, n, _ in pending]
        report = status_json(main)
        assert sorted(p["name"] for p in report["peers"] if p["role"] == "host") == sorted(f"host-{i}" for i in range(10))
    finally:
        for host in crowd:
            host.close()


