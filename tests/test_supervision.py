"""Servers are supervised by main: restarted after a crash, marked failed after a crash loop,
stopped/started/restarted on request, and reloaded from the config."""

import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from kit.demo import demo_stdio_entry, start_http_demo
from kit.main import RunningMain
from kit.peer import WirePeer
from kit.procs import descendants


def server_status(peer: WirePeer, name: str, status: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """Wait for a `servers` update in which `name` has `status`."""
    _, body = peer.expect(lambda t, b: t == "servers" and any(
        s["name"] == name and s["status"] == status for s in b["servers"]), timeout_s)
    return next(s for s in body["servers"] if s["name"] == name)


def demo_server_pid(main: RunningMain) -> int:
    pids = [pid for pid, cmd in descendants(main.proc.pid).items() if "demo_server.py" in cmd]
    assert len(pids) == 1, pids
    return pids[0]


def test_a_crashed_server_is_restarted_and_windows_see_the_status(demo_main: RunningMain) -> None:
    window = demo_main.peer()
    call = window.call_tool("demo", "book_table", {})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    old_pid = demo_server_pid(demo_main)
    os.kill(old_pid, signal.SIGKILL)
    # Its open request can never be answered now: dismissed as server-closed everywhere.
    dismiss = window.expect_topic("msgElicitationTransferDismiss")
    assert dismiss == {"responseChannel": invoke["responseChannel"], "reason": "server-closed"}
    assert "error" in window.expect_topic(call)
    restarting = server_status(window, "demo", "restarting")
    assert restarting["error"]
    server_status(window, "demo", "ready")
    assert demo_server_pid(demo_main) != old_pid
    reply = window.expect_topic(window.call_tool("demo", "echo", {"text": "back"}))
    assert reply["result"]["content"][0]["text"] == "back"


def test_a_crash_looping_server_ends_failed_with_its_last_stderr_lines(
    main_factory: Callable[..., RunningMain],
) -> None:
    crasher = {"command": sys.executable,
               "args": ["-c", "import sys; sys.stderr.write('boom: database is gone\\n'); sys.exit(3)"]}
    main = main_factory({"demo": demo_stdio_entry(), "crasher": crasher})
    window = main.peer()
    failed = server_status(window, "crasher", "failed", timeout_s=60)
    assert "boom: database is gone" in failed["error"]
    text = main.cli("status").stdout
    assert "failed" in text and "boom: database is gone" in text
    reply = window.expect_topic(window.call_tool("crasher", "anything", {}))
    assert reply["error"]["code"] == -32000 and "failed" in reply["error"]["message"]
    assert main.proc.poll() is None


def test_stop_start_restart_one_server_from_the_cli(demo_main: RunningMain) -> None:
    window = demo_main.peer()
    stopped = demo_main.cli("server", "stop", "demo")
    assert (stopped.returncode, stopped.stdout.strip()) == (0, "demo: stopped"), stopped.stderr
    server_status(window, "demo", "stopped")
    assert not [cmd for cmd in descendants(demo_main.proc.pid).values() if "demo_server.py" in cmd]
    started = demo_main.cli("server", "start", "demo")
    assert started.returncode == 0, started.stderr
    server_status(window, "demo", "ready")
    pid = demo_server_pid(demo_main)
    assert demo_main.cli("server", "restart", "demo").returncode == 0
    server_status(window, "demo", "ready")
    assert demo_server_pid(demo_main) != pid
    unknown = demo_main.cli("server", "restart", "ghost")
    assert unknown.returncode == 1 and "unknown server 'ghost'" in unknown.stderr


def test_reload_starts_added_stops_removed_and_leaves_unchanged_alone(
    main_factory: Callable[..., RunningMain], tmp_path: Any
) -> None:
    main = main_factory({"demo": demo_stdio_entry(), "old": demo_stdio_entry()})
    window = main.peer()
    server_status(window, "old", "ready", timeout_s=60)
    server_status(window, "demo", "ready", timeout_s=60)
    demo_pid = [pid for pid, cmd in descendants(main.proc.pid).items() if "demo_server.py" in cmd]
    config_path = tmp_path / "mcp-0.json"
    config_path.write_text(json.dumps({"mcpServers": {"demo": demo_stdio_entry(), "new": demo_stdio_entry()}}))
    reloaded = main.cli("reload")
    assert reloaded.returncode == 0, reloaded.stderr
    lines = dict(line.split(None, 1) for line in reloaded.stdout.strip().splitlines())
    assert lines == {"added": "new", "removed": "old", "changed": "-", "unchanged": "demo"}
    window.expect(lambda t, b: t == "servers" and [s["name"] for s in b["servers"]] == ["demo", "new"]
                  and all(s["status"] == "ready" for s in b["servers"]), 60)
    still_running = [pid for pid, cmd in descendants(main.proc.pid).items() if "demo_server.py" in cmd]
    assert len(still_running) == 2 and len(set(demo_pid) & set(still_running)) == 1
    config_path.write_text("{ broken")
    broken = main.cli("reload")
    assert broken.returncode == 2 and "not valid JSON" in broken.stderr  # a config error, as for `main`


def test_a_dropped_http_server_is_reconnected(main_factory: Callable[..., RunningMain]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server, _ = start_http_demo(port)
    try:
        main = main_factory({"remote": {"url": f"http://127.0.0.1:{port}/mcp"}})
        window = main.peer()
        server_status(window, "remote", "ready", timeout_s=60)
        server.kill()
        server.wait(timeout=10)
        assert server_status(window, "remote", "restarting")["error"]
        server, _ = start_http_demo(port)
        server_status(window, "remote", "ready", timeout_s=60)
        reply = window.expect_topic(window.call_tool("remote", "echo", {"text": "reconnected"}))
        assert reply["result"]["content"][0]["text"] == "reconnected"
    finally:
        server.kill()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
