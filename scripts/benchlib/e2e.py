"""End to end: calls/s of a tool whose one elicitation is answered at once.

- via main: a real `python -m main_process main` with the demo server over stdio; one scripted
  peer (contract-only DEALER, renderer role) sends msgMcpCallTool `book_table`, receives the
  invoke, answers accept, and waits for the CallToolResult on its response channel. Calls are
  sequential (one in flight), so calls/s = 1 / latency.
- baseline: the same demo server, spawned the same way, driven by an in-process `mcp.Client`
  configured as main configures its own (mode="auto", cache=None) whose elicitation_callback
  answers the same content.

Both are measured twice: sequential (one call in flight: calls/s = 1 / latency, where every
extra hop shows) and with CONCURRENCY calls in flight (throughput, where main's CPU per call
shows).

With `--profile DIR`, py-spy records main during the measured calls (py-spy from /tmp/tools).
"""

import asyncio
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, TextIO

from benchlib.common import (
    BENCH_CONTENT,
    DEMO_SERVER,
    INVOKE,
    PYTHON,
    Figure,
    WirePeer,
    fmt_us,
    now_ns,
    running_demo_main,
    summarize_ns,
)

TOOL = "book_table"
ARGS = {"restaurant": "Bench"}
CONCURRENCY = 8


async def _baseline(n: int, warm: int, errlog: TextIO, n_concurrent: int) -> tuple[list[int], float]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp_types import ElicitResult, Implementation

    answered = 0

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        nonlocal answered
        answered += 1
        return ElicitResult(action="accept", content=dict(BENCH_CONTENT))

    samples: list[int] = []
    params = StdioServerParameters(command=PYTHON, args=[str(DEMO_SERVER)])
    client = Client(
        stdio_client(params, errlog=errlog),
        elicitation_callback=on_elicit,
        mode="auto",
        client_info=Implementation(name="elicitron-bench", version="0.1.0"),
        cache=None,
    )
    async with client:
        await client.list_tools()
        for i in range(warm + n):
            t0 = now_ns()
            result = await client.call_tool(TOOL, ARGS)
            t1 = now_ns()
            if i == 0:
                text = result.content[0].text  # type: ignore[union-attr]
                assert '"accept"' in text and '"Ada"' in text, text
            if i >= warm:
                samples.append(t1 - t0)
        left = n_concurrent

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await client.call_tool(TOOL, ARGS)

        t0 = now_ns()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        concurrent_s = (now_ns() - t0) / 1e9
    assert answered == warm + n + n_concurrent, answered
    return samples, n_concurrent / concurrent_s


def _via_main(peer: WirePeer, n: int, warm: int) -> list[int]:
    samples: list[int] = []
    for i in range(warm + n):
        t0 = now_ns()
        channel = peer.call_tool("demo", TOOL, ARGS)
        _, invoke = peer.expect(lambda t, b: t == INVOKE)
        peer.answer(invoke)
        _, reply = peer.expect(lambda t, b, channel=channel: t == channel)
        t1 = now_ns()
        if i == 0:
            text = reply["result"]["content"][0]["text"]
            assert '"accept"' in text and '"Ada"' in text, reply
        if i >= warm:
            samples.append(t1 - t0)
    return samples


def _via_main_concurrent(peer: WirePeer, n: int) -> float:
    """calls/s with CONCURRENCY calls kept in flight by one peer that also answers every invoke."""
    outstanding: set[str] = set()
    issued = done = 0
    t0 = now_ns()
    while done < n:
        while issued < n and len(outstanding) < CONCURRENCY:
            outstanding.add(peer.call_tool("demo", TOOL, ARGS))
            issued += 1
        topic, body = peer.expect(lambda t, b: t == INVOKE or t in outstanding)
        if topic == INVOKE:
            peer.answer(body)
        else:
            if "result" not in body:
                raise RuntimeError(f"call failed: {body}")
            outstanding.discard(topic)
            done += 1
    return n / ((now_ns() - t0) / 1e9)


def _start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    py_spy = shutil.which("py-spy") or "/tmp/tools/bin/py-spy"
    if not os.path.exists(py_spy):
        return None
    return subprocess.Popen(
        [
            py_spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "2000",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _summarize_collapsed(raw: Path, out: Path, top: int = 40) -> None:
    """Self and inclusive sample counts per function from py-spy's collapsed stacks."""
    self_counts: dict[str, int] = {}
    incl_counts: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        self_counts[frames[-1]] = self_counts.get(frames[-1], 0) + count
        for frame in set(frames):
            incl_counts[frame] = incl_counts.get(frame, 0) + count
    lines = [f"total samples: {total}", "", "inclusive:"]
    for frame, count in sorted(incl_counts.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {100 * count / total:5.1f}%  {frame}")
    lines += ["", "self:"]
    for frame, count in sorted(self_counts.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {100 * count / total:5.1f}%  {frame}")
    out.write_text("\n".join(lines) + "\n")


def run(quick: bool, profile_dir: Path | None = None) -> list[Figure]:
    n, warm = (60, 10) if quick else (1000, 30)
    n_conc = 80 if quick else 2000
    with running_demo_main() as main:
        peer = main.peer(name="e2e-answerer")
        try:
            spy = None
            if profile_dir is not None:
                _via_main(peer, warm, 0)
                spy = _start_py_spy(main.pid, profile_dir / "e2e-main.collapsed")
                time.sleep(0.5)  # let py-spy attach before the measured calls
            t0 = time.monotonic()
            via_main = _via_main(peer, n, 0 if spy else warm)
            main_wall = time.monotonic() - t0
            main_conc = _via_main_concurrent(peer, n_conc)
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
                spy.wait(timeout=60)
                collapsed = profile_dir / "e2e-main.collapsed"  # type: ignore[operator]
                if collapsed.exists():
                    _summarize_collapsed(collapsed, profile_dir / "e2e-main.txt")  # type: ignore[operator]
        finally:
            peer.close()
        t0 = time.monotonic()
        with open(main.runtime / "baseline-demo.stderr.log", "w", encoding="utf-8") as errlog:
            base, base_conc = asyncio.run(_baseline(n, warm, errlog, n_conc))
        base_wall = time.monotonic() - t0
    m, b = summarize_ns(via_main), summarize_ns(base)
    main_rate = 1e6 / m["mean_us"]
    base_rate = 1e6 / b["mean_us"]
    ratio = main_rate / base_rate
    ratio_conc = main_conc / base_conc
    return [
        Figure(
            name="e2e",
            title="end to end, sequential",
            value=f"{ratio:.2f} x in-process",
            target="ratio >= 0.90",
            passed=ratio >= 0.90,
            absolute=f"via main {main_rate:.0f}/s (p50 {fmt_us(m['p50_us'])}, p99 {fmt_us(m['p99_us'])}); "
            f"in-process {base_rate:.0f}/s (p50 {fmt_us(b['p50_us'])}, p99 {fmt_us(b['p99_us'])}); n={n}",
            how=f"demo server over stdio, tool {TOOL}, sequential calls; via main: contract-only peer calls "
            "msgMcpCallTool and answers the invoke; in-process: mcp.Client(mode=auto, cache=None) "
            "elicitation_callback",
            data={
                "ratio": ratio,
                "via_main_calls_per_s": main_rate,
                "in_process_calls_per_s": base_rate,
                "via_main": m,
                "in_process": b,
                "via_main_wall_s": main_wall,
                "in_process_wall_s": base_wall,
            },
        ),
        Figure(
            name="e2e",
            title=f"end to end, {CONCURRENCY} in flight",
            value=f"{ratio_conc:.2f} x in-process",
            target="ratio >= 0.90",
            passed=ratio_conc >= 0.90,
            absolute=f"via main {main_conc:.0f}/s; in-process {base_conc:.0f}/s; n={n_conc}",
            how=f"as above with {CONCURRENCY} calls kept in flight (one peer issues and answers; "
            f"{CONCURRENCY} client tasks in-process)",
            data={
                "ratio": ratio_conc,
                "via_main_calls_per_s": main_conc,
                "in_process_calls_per_s": base_conc,
                "concurrency": CONCURRENCY,
            },
        ),
    ]
