"""No server or host takes main down by writing more than the other side reads (issue 33, finding 2),
measured: a legitimate window's round trip (a demo book_table call that elicits, answered at once) and
main's memory while relayed sessions flood both ways: a server writes 400 MiB to a host that reads
nothing (its pipes held by main: `serve --server`), the same through merged `serve`, and a host writes
to a server that reads nothing. Targets: the round trip under 1 s (max), main's peak RSS at most +150 MB.
"""

import json
import os
import select
import shutil
import subprocess
import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT
from kit.procs import end_process

from benchlib.common import Figure, demo_entry, fmt_us, summarize_ns, window_round_trips

FLOOD_MIB = 400
ROUND_TRIP_TARGET_US = 1_000_000
RSS_TARGET_MB = 150.0
_INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "bench-flood-host", "version": "1"}}}


def _memory_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} for pid {pid}")


def _host(main: RunningMain, server: str | None) -> "subprocess.Popen[bytes]":
    """`elicitron serve` with its handshake done (the answer read); from then on the caller decides
    whether anything more is read."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli_process", "serve", "--connection", str(main.connection),
         *(["--server", server] if server else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(_INITIALIZE).encode() + b"\n" +
                     json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n")
    proc.stdin.flush()
    for line in proc.stdout:
        if json.loads(line).get("id") == 0:
            return proc
    raise RuntimeError("serve ended before its handshake")


def _call(proc: "subprocess.Popen[bytes]", request_id: int, tool: str, arguments: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                 "params": {"name": tool, "arguments": arguments}}).encode() + b"\n")
    proc.stdin.flush()


def _write_to_deaf(proc: "subprocess.Popen[bytes]", stop: threading.Event) -> int:
    """What a host writes to a server that reads nothing, until it is held for 2 s, its session
    ends, `stop`, or FLOOD_MIB: the bytes written."""
    assert proc.stdin is not None
    fd = proc.stdin.fileno()
    os.set_blocking(fd, False)
    line = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"pad": "y" * ((1 << 20) - 100)}}).encode() + b"\n"
    view, written = memoryview(line), 0
    while written < FLOOD_MIB << 20 and not stop.is_set():
        try:
            sent = os.write(fd, view)
        except BlockingIOError:
            if not select.select([], [fd], [], 2.0)[1]:
                break
            continue
        except BrokenPipeError:
            break
        written += sent
        view = view[sent:] or memoryview(line)
    return written


def run(quick: bool) -> list[Figure]:
    count = 10 if quick else 50
    home = short_tmp_dir("eli-bench-relay-")
    flood = {"command": sys.executable, "args": [str(ROOT / "tests" / "flood_server.py")]}
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, home, ignore_errors=True)
        main = start_main(write_config(home / "mcp.json", {"demo": demo_entry(), "flood": flood}), home, home=home)
        stack.callback(main.stop)
        main.wait_server_ready("demo")
        main.wait_server_ready("flood")
        window = main.peer(name="legit-window")
        window_round_trips(window, 3, "relay")  # warm up
        quiet = window_round_trips(window, count, "relay")
        rss_before = _memory_mb(main.pid, "VmRSS")

        readers_gone = [_host(main, "flood"), _host(main, None)]  # neither reads another byte
        for proc in readers_gone:
            stack.callback(end_process, proc)
        _call(readers_gone[0], 1, "flood", {"mib": FLOOD_MIB})
        _call(readers_gone[1], 1, "flood__flood", {"mib": FLOOD_MIB})
        deaf_host = _host(main, "flood")
        stack.callback(end_process, deaf_host)
        _call(deaf_host, 1, "deaf", {})
        stop = threading.Event()
        wrote: list[int] = []
        writer = threading.Thread(target=lambda: wrote.append(_write_to_deaf(deaf_host, stop)), daemon=True)
        writer.start()
        try:
            attacked = window_round_trips(window, count, "relay")
        finally:
            stop.set()
            writer.join(30)
        peak = _memory_mb(main.pid, "VmHWM")
        alive = main.proc.poll() is None
        window.close()
    calm, loud = summarize_ns(quiet), summarize_ns(attacked)
    grown = peak - rss_before
    how = (f"a server writes {FLOOD_MIB} MiB to a host that reads nothing (its pipes in main), the same through "
           f"merged serve, and a host writes to a server that reads nothing ({(wrote or [0])[0] >> 20} MiB "
           f"taken before it was held)")
    data: dict[str, Any] = {"quiet": calm, "attacked": loud, "rss_before_mb": rss_before, "peak_mb": peak,
                            "host_to_deaf_server_bytes": (wrote or [0])[0], "main_alive": alive}
    return [
        Figure(name="abuse", title="abuse: round trip, relayed sessions flooding", value=f"max {fmt_us(loud['max_us'])}",
               target="< 1 s", passed=loud["max_us"] < ROUND_TRIP_TARGET_US and alive,
               absolute=f"p50 {fmt_us(loud['p50_us'])} flooded vs {fmt_us(calm['p50_us'])} quiet; n={loud['n']}",
               how=how, data=data),
        Figure(name="abuse", title="abuse: main's memory, relayed sessions flooding",
               value=f"+{grown:.0f} MB", target=f"<= +{RSS_TARGET_MB:.0f} MB", passed=grown <= RSS_TARGET_MB,
               absolute=f"RSS {rss_before:.0f} MB before, peak {peak:.0f} MB (VmHWM)", how=how, data=data),
    ]
