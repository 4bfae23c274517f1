"""The `elicitron serve` gateway (issue 10): what a host pays for reaching a server through Elicitron.

- direct: an `mcp.Client` (the host) on the demo server over stdio, as a host config starts it;
- via the gateway: the same Client on `python -m main_process serve`, which reaches the same demo
  server (spawned the same way) through a real main: host -> serve -> main -> server.

The tool is `echo` (no elicitation), so both sides do the same MCP work and the difference is the
gateway's two extra hops and its processes. Both run in alternating blocks, so drift hits each alike.
Figures: calls/s with CONCURRENCY calls in flight (target >= 0.80x direct), one call at a time (the
added p50 latency, printed), and HOSTS hosts x CALLS_PER_HOST interleaved calls through one main,
every result checked against what its own host sent (zero cross-talk is the target).
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchlib.common import (
    DEMO_SERVER,
    PYTHON,
    ROOT,
    Figure,
    child_env,
    demo_entry,
    fmt_us,
    now_ns,
    running_main,
    summarize_ns,
)

CONCURRENCY = 8
HOSTS = 10
CALLS_PER_HOST = 100


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


async def _alternate(blocks: int, run: Callable[[str], Awaitable[None]]) -> None:
    for block in range(blocks):
        for side in (("direct", "via") if block % 2 == 0 else ("via", "direct")):
            await run(side)


async def _measure(connection: str, env: dict[str, str], quick: bool) -> dict[str, Any]:
    blocks = 4 if quick else 10
    per_block = 100 if quick else 400
    sequential = 50 if quick else 200
    direct = _client([str(DEMO_SERVER)], env, "bench-direct")
    via = _client(["-m", "main_process", "serve", "--connection", connection], env, "bench-host")
    tools = {"direct": "echo", "via": "demo__echo"}
    seconds = {"direct": 0.0, "via": 0.0}
    latencies: dict[str, list[int]] = {"direct": [], "via": []}
    async with direct, via:
        clients = {"direct": direct, "via": via}
        for side in clients:  # warm up: first calls pay imports and caches
            await _concurrent(clients[side], tools[side], 50)

        async def throughput(side: str) -> None:
            seconds[side] += await _concurrent(clients[side], tools[side], per_block)

        async def latency(side: str) -> None:
            await _sequential(clients[side], tools[side], sequential // blocks, latencies[side])

        await _alternate(blocks, throughput)
        await _alternate(blocks, latency)
    calls = blocks * per_block
    return {"calls_per_s": {side: calls / seconds[side] for side in seconds},
            "latency": {side: summarize_ns(latencies[side]) for side in latencies}}


async def _crowd(connection: str, env: dict[str, str], quick: bool) -> dict[str, Any]:
    """HOSTS hosts, each CALLS_PER_HOST calls in flight together; every answer must be its own."""
    per_host = 20 if quick else CALLS_PER_HOST
    hosts = [_client(["-m", "main_process", "serve", "--connection", connection], env, f"crowd-{i}")
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
    with running_main({"demo": demo_entry()}, wait_for=("server demo ready",)) as main:
        env = child_env(main.runtime)
        connection = str(main.connection)
        measured = asyncio.run(_measure(connection, env, quick))
        crowd = asyncio.run(_crowd(connection, env, quick))
    rate, lat = measured["calls_per_s"], measured["latency"]
    ratio = rate["via"] / rate["direct"]
    added = lat["via"]["p50_us"] - lat["direct"]["p50_us"]
    crowd_rate = crowd["calls"] / crowd["seconds"]
    return [
        Figure(
            name="gateway", title="gateway, calls/s", value=f"{ratio:.2f}x direct", target=">= 0.80x",
            passed=ratio >= 0.80,
            absolute=f"{rate['via']:.0f} vs {rate['direct']:.0f} calls/s",
            how=f"echo, {CONCURRENCY} in flight: host mcp.Client -> elicitron serve -> main -> demo server, "
                "against the same Client on the same server directly (stdio), alternating blocks",
            data=measured,
        ),
        Figure(
            name="gateway", title="gateway, one call at a time", value=f"+{fmt_us(added)} p50", target="",
            passed=None,
            absolute=f"p50 {fmt_us(lat['via']['p50_us'])} vs {fmt_us(lat['direct']['p50_us'])} direct; "
                     f"p99 {fmt_us(lat['via']['p99_us'])} vs {fmt_us(lat['direct']['p99_us'])}",
            how="one echo call at a time, same pairs; the gateway adds two stdio/ZeroMQ hops each way",
            data=lat,
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
