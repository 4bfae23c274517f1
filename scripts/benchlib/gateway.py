"""The `elicitron serve` gateway: what a host pays for reaching a server through Elicitron.

- direct: an `mcp.Client` (the host) on the demo server over stdio, as a host config starts it;
- via: the same Client on `python -m cli_process serve --server demo`, the drop-in entry: its own
  session with the demo server (spawned by main the same way), relayed through a real main, which
  holds the host's pipes serve handed it: host -> main -> server, every message passed as it is
  (PROTOCOL.md §14, host pipes);
- all: the same Client on `serve` (every server, `demo__echo`): its own session with every server,
  merged under one name space (the demo server alone here), for comparison;
- floor: the same topology with nothing in it but bytes (benchlib/gateway_floor.py): what one more
  process on the path costs, which no relay code can remove.

The tool is `echo` (no elicitation and no approval), so every side does the same MCP work and the
difference is Elicitron's hops and processes. Sides run in alternating blocks, so drift hits each
alike. Figures: calls/s with CONCURRENCY calls in flight (target >= 0.85x direct), one call at a
time (target <= +0.4 ms p50 over direct), the CPU serve and main spend per call (target <= 0.3 ms
together), and HOSTS hosts x CALLS_PER_HOST interleaved calls through one main, every result checked
against what its own host sent (zero cross-talk is the target).
"""

import asyncio
import os
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kit.env import child_env
from kit.main import running_main
from kit.paths import DEMO_SERVER, PYTHON, ROOT

from benchlib.common import Figure, demo_entry, fmt_us, now_ns, summarize_ns

CONCURRENCY = 8
HOSTS = 10
CALLS_PER_HOST = 100


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> dict[int, str]:
    found: dict[int, str] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            for child in map(int, (task / "children").read_text().split()):
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
    return found


class _Cpu:
    """CPU per call of every process on one side: what each hop costs."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.seconds = dict.fromkeys(pids, 0.0)
        self._start: dict[str, float] = {}

    def begin(self) -> None:
        self._start = {name: self._now(name, pid) for name, pid in self.pids.items()}

    def end(self) -> None:
        for name, pid in self.pids.items():
            self.seconds[name] += self._now(name, pid) - self._start[name]

    @staticmethod
    def _now(name: str, pid: int) -> float:
        return time.process_time() if name == "host" else _cpu_s(pid)

    def per_call_ms(self, calls: int) -> dict[str, float]:
        return {name: round(1e3 * spent / calls, 3) for name, spent in self.seconds.items()}


def _client(command_args: list[str], env: dict[str, str], name: str) -> Any:
    from mcp import Client, StdioServerParameters
    from mcp_types import Implementation

    params = StdioServerParameters(command=PYTHON, args=command_args, env=env, cwd=str(ROOT))
    return Client(params, client_info=Implementation(name=name, version="1"), cache=None)


def _text(result: Any) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


async def _concurrent(client: Any, tool: str, count: int) -> float:
    """Seconds for `count` echo calls with CONCURRENCY in flight."""
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await client.call_tool(tool, {"text": "bench"})

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - started


async def _sequential(client: Any, tool: str, count: int, out: list[int]) -> None:
    for _ in range(count):
        t0 = now_ns()
        await client.call_tool(tool, {"text": "bench"})
        out.append(now_ns() - t0)


SIDES = ("direct", "via", "all", "floor")
FLOOR = Path(__file__).with_name("gateway_floor.py")


async def _alternate(blocks: int, run: Callable[[str], Awaitable[None]], sides: tuple[str, ...] = SIDES) -> None:
    for block in range(blocks):
        for side in (sides if block % 2 == 0 else tuple(reversed(sides))):
            await run(side)


async def _measure(connection: str, main_pid: int, env: dict[str, str], quick: bool,
                   floor_endpoint: str, floor_pid: int) -> dict[str, Any]:
    blocks = 4 if quick else 10
    per_block = 100 if quick else 400
    sequential = 50 if quick else 1000  # p50s of a few hundred calls swung by +-0.3 ms on a busy VM
    main_own = {pid for pid, cmd in _children(main_pid).items() if str(DEMO_SERVER) in cmd}
    direct = _client([str(DEMO_SERVER)], env, "bench-direct")
    via = _client(["-m", "cli_process", "serve", "--connection", connection, "--server", "demo"], env, "bench-host")
    every = _client(["-m", "cli_process", "serve", "--connection", connection], env, "bench-all")
    floor = _client([str(FLOOR), "serve", floor_endpoint], env, "bench-floor")
    tools = {"direct": "echo", "via": "echo", "all": "demo__echo", "floor": "echo"}
    seconds = dict.fromkeys(SIDES, 0.0)
    latencies: dict[str, list[int]] = {side: [] for side in SIDES}
    async with direct, via, every, floor:
        clients = {"direct": direct, "via": via, "all": every, "floor": floor}
        for side, client in clients.items():  # warm up: first calls pay imports and caches
            await _concurrent(client, tools[side], 50)
        mine = _children(os.getpid())
        gateway = next(pid for pid, cmd in mine.items() if " serve " in cmd and "--server" in cmd)
        gateway_all = next(pid for pid, cmd in mine.items() if " serve " in cmd and "--server" not in cmd)
        floor_serve = next(pid for pid, cmd in mine.items() if str(FLOOR) in cmd)
        floor_server = next(pid for pid, cmd in _children(floor_pid).items() if str(DEMO_SERVER) in cmd)
        server = next(pid for pid, cmd in mine.items() if str(DEMO_SERVER) in cmd)
        relayed = next(pid for pid, cmd in _children(main_pid).items() if str(DEMO_SERVER) in cmd
                       and pid not in main_own)
        cpu = {"direct": _Cpu({"host": 0, "server": server}),
               "via": _Cpu({"host": 0, "gateway": gateway, "main": main_pid, "server": relayed}),
               "all": _Cpu({"host": 0, "gateway": gateway_all, "main": main_pid, "server": next(iter(main_own))}),
               "floor": _Cpu({"host": 0, "gateway": floor_serve, "main": floor_pid, "server": floor_server})}

        async def throughput(side: str) -> None:
            cpu[side].begin()
            seconds[side] += await _concurrent(clients[side], tools[side], per_block)
            cpu[side].end()

        async def latency(side: str) -> None:
            await _sequential(clients[side], tools[side], sequential // blocks, latencies[side])

        await _alternate(blocks, throughput)
        await _alternate(blocks, latency)
    calls = blocks * per_block
    return {"calls_per_s": {side: calls / seconds[side] for side in seconds},
            "latency": {side: summarize_ns(latencies[side]) for side in latencies},
            "cpu_ms_per_call": {side: cpu[side].per_call_ms(calls) for side in cpu}}


async def _crowd(connection: str, env: dict[str, str], quick: bool) -> dict[str, Any]:
    """HOSTS hosts, each CALLS_PER_HOST calls in flight together; every answer must be its own."""
    per_host = 20 if quick else CALLS_PER_HOST
    hosts = [_client(["-m", "cli_process", "serve", "--connection", connection], env, f"crowd-{i}")
             for i in range(HOSTS)]
    wrong: list[tuple[str, str]] = []
    for host in hosts:
        await host.__aenter__()
    try:
        async def one(index: int, call: int) -> None:
            sent = f"host {index} call {call}"
            got = _text(await hosts[index].call_tool("demo__echo", {"text": sent}))
            if got != sent:
                wrong.append((sent, got))

        started = time.perf_counter()
        # Interleaved: host 0 call 0, host 1 call 0, ... all in flight at once.
        await asyncio.gather(*(one(index, call) for call in range(per_host) for index in range(HOSTS)))
        seconds = time.perf_counter() - started
    finally:
        for host in reversed(hosts):
            await host.__aexit__(None, None, None)
    return {"hosts": HOSTS, "calls": HOSTS * per_host, "seconds": seconds, "wrong": wrong[:5],
            "wrong_count": len(wrong)}


def run(quick: bool) -> list[Figure]:
    with running_main({"demo": demo_entry()}) as main:
        main.wait_server_ready("demo")
        env = child_env(main.runtime)
        connection = str(main.connection)
        endpoint = f"{main.runtime}/floor.sock"
        floor = subprocess.Popen([PYTHON, str(FLOOR), "main", endpoint], stdout=subprocess.PIPE, env=env, cwd=ROOT)
        try:
            assert floor.stdout is not None and floor.stdout.readline().strip() == b"ready"
            measured = asyncio.run(_measure(connection, main.pid, env, quick, endpoint, floor.pid))
        finally:
            floor.terminate()
            floor.wait(timeout=10)
        crowd = asyncio.run(_crowd(connection, env, quick))
    rate, lat, cpu = measured["calls_per_s"], measured["latency"], measured["cpu_ms_per_call"]
    cpu_text = ", ".join(f"{name} {ms:.2f}" for name, ms in cpu["via"].items())
    ratio = rate["via"] / rate["direct"]
    ratio_all = rate["all"] / rate["direct"]
    added = lat["via"]["p50_us"] - lat["direct"]["p50_us"]
    added_all = lat["all"]["p50_us"] - lat["direct"]["p50_us"]
    ours = cpu["via"]["gateway"] + cpu["via"]["main"]
    floor_cpu = cpu["floor"]["gateway"] + cpu["floor"]["main"]
    ratio_floor = rate["floor"] / rate["direct"]
    added_floor = lat["floor"]["p50_us"] - lat["direct"]["p50_us"]
    ours_all = cpu["all"]["gateway"] + cpu["all"]["main"]
    crowd_rate = crowd["calls"] / crowd["seconds"]
    return [
        Figure(
            name="gateway", title="gateway, calls/s", value=f"{ratio:.2f}x direct", target=">= 0.85x",
            passed=ratio >= 0.85,
            absolute=f"{rate['via']:.0f} vs {rate['direct']:.0f} calls/s; CPU ms/call via: {cpu_text} "
                     f"(direct: host {cpu['direct']['host']:.2f}, server {cpu['direct']['server']:.2f}); "
                     f"every server at once (serve): {ratio_all:.2f}x; floor: {ratio_floor:.2f}x",
            how=f"echo, {CONCURRENCY} in flight: host mcp.Client -> elicitron serve --server demo -> main -> "
                "demo server, against the same Client on the same server directly (stdio), alternating blocks",
            data=measured,
        ),
        Figure(
            name="gateway", title="gateway, one call at a time", value=f"+{fmt_us(added)} p50", target="<= +0.4 ms",
            passed=added <= 400,
            absolute=f"p50 {fmt_us(lat['via']['p50_us'])} vs {fmt_us(lat['direct']['p50_us'])} direct; "
                     f"p99 {fmt_us(lat['via']['p99_us'])} vs {fmt_us(lat['direct']['p99_us'])}; "
                     f"every server at once: +{fmt_us(added_all)}; floor: +{fmt_us(added_floor)}",
            how="one echo call at a time, same pairs; the relay adds one process (main, holding the pipes serve handed it) each way",
            data=lat,
        ),
        Figure(
            name="gateway", title="gateway, serve + main CPU per call", value=f"{ours:.2f} ms", target="<= 0.3 ms",
            passed=ours <= 0.3,
            absolute=f"serve {cpu['via']['gateway']:.2f} + main {cpu['via']['main']:.2f} ms; every server at "
                     f"once: {ours_all:.2f} ms (serve {cpu['all']['gateway']:.2f} + main {cpu['all']['main']:.2f}); "
                     f"floor: {floor_cpu:.2f} ms",
            how="CPU time of the serve and main processes (/proc) over the calls/s blocks, per call",
            data=cpu,
        ),
        Figure(
            name="gateway", title=f"gateway, {HOSTS} hosts interleaved", value=f"{crowd['wrong_count']} crossed",
            target="0 crossed", passed=crowd["wrong_count"] == 0,
            absolute=f"{crowd['calls']} calls in {crowd['seconds']:.2f} s ({crowd_rate:.0f} calls/s)",
            how=f"{HOSTS} elicitron serve processes on one main, every call in flight at once, each answer "
                "checked against what its own host sent",
            data=crowd,
        ),
    ]
