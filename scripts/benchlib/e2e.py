"""End to end: calls/s of a tool whose one elicitation is answered at once.

- via main: a real `python -m cli_process main` with the demo server over stdio; one scripted
  peer (contract-only DEALER, renderer role) sends msgMcpCallTool `book_table`, receives the
  invoke, answers accept, and waits for the CallToolResult on its response channel.
- in-process: the same demo server, spawned the same way, driven by an in-process `mcp.Client`
  configured as main configures its own (mode="auto", cache=None) whose elicitation_callback
  answers the same content.
- floor: `floor_relay.py`, a bare relay across the same boundary (a ROUTER and the same mcp.Client,
  the same five messages per call, on main's event loop) with none of main's own work; driven by
  the same lean caller. It splits main's cost in two: the boundary (floor vs in-process), which no
  broker code removes, and Elicitron's own work (main vs floor).

The target figure is calls/s with CONCURRENCY calls in flight: what main's extra work costs a
busy host. One call at a time is printed too: it is latency-bound, and a window's call crosses
four IPC hops (call, invoke, answer, result), i.e. two raw pyzmq round trips, measured here in
the same run for comparison. All kinds run in alternating blocks, so drift hits each alike.

With `--profile DIR`, py-spy records main during the run (py-spy on PATH or /tmp/tools/bin).
"""

import asyncio
import gc
import os
import select
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

import msgspec
import zmq
from kit.contract import INVOKE
from kit.env import child_env
from kit.paths import DEMO_SERVER, PYTHON
from kit.peer import WirePeer

from benchlib.common import BENCH_CONTENT, Figure, fmt_us, now_ns, running_demo_main, summarize_ns
from benchlib.roundtrip import RawRouter, cpu_ns, spawn_answerer, wait_until

FLOOR_RELAY = Path(__file__).resolve().parent / "floor_relay.py"
TOOL = "book_table"
ARGS = {"restaurant": "Bench"}
CONCURRENCY = 8
INVOKE_TOPIC = INVOKE.encode("ascii")
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()
BLOCKS = 10
TARGET_OVER_FLOOR = 0.97  # issue 34: main's own work per call, against a relay doing none of it


def _baseline_client(errlog: TextIO) -> tuple[Any, list[int]]:
    """The in-process reference: an mcp.Client whose callback answers, and its answer count."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp_types import ElicitResult, Implementation

    answered = [0]

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        answered[0] += 1
        return ElicitResult(action="accept", content=dict(BENCH_CONTENT))

    params = StdioServerParameters(command=PYTHON, args=[str(DEMO_SERVER)])
    client = Client(
        stdio_client(params, errlog=errlog),
        elicitation_callback=on_elicit,
        mode="auto",
        client_info=Implementation(name="elicitron-bench", version="0.1.0"),
        cache=None,
    )
    return client, answered


async def _baseline_sequential(client: Any, count: int, out: list[int]) -> None:
    for _ in range(count):
        t0 = now_ns()
        await client.call_tool(TOOL, ARGS)
        out.append(now_ns() - t0)


async def _baseline_concurrent(client: Any, count: int) -> None:
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await client.call_tool(TOOL, ARGS)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


class _LeanCaller:
    """The scripted window of the via-main side, lean so that its own CPU (it shares the two cores
    with main and the server) stays small: one pre-encoded answer, bodies decoded only for the
    topics it acts on, dismisses and broadcasts dropped unread."""

    def __init__(self, sock: zmq.Socket[bytes], peer: WirePeer | None = None,
                 keep_alive: WirePeer | None = None) -> None:
        self.peer = peer  # main's attached peer (heartbeats due); None for the floor relay
        # main's peer while the floor's blocks run: main takes a peer silent for 5 s for gone, and a
        # floor block on a loaded machine can take longer (its next block then got `not-attached`)
        self.keep_alive = keep_alive
        self.sock = sock
        self.call_bodies = [_encoder.encode({"server": "demo", "tool": TOOL, "arguments": ARGS,
                                             "responseChannel": f"call-{i}"}) for i in range(CONCURRENCY)]
        self.answer = _encoder.encode({"action": "accept", "content": BENCH_CONTENT})

    def _call(self, slot: int) -> None:
        self.sock.send_multipart([b"msgMcpCallTool", self.call_bodies[slot]])

    def _next(self) -> tuple[bytes, bytes]:
        """The next invoke (answered here) or call reply (returned)."""
        while True:
            if self.keep_alive is not None:
                self.keep_alive.heartbeat_if_due()
            if not self.sock.poll(15_000):
                raise TimeoutError("main sent nothing within 15 s")
            topic, body = self.sock.recv_multipart()
            if topic == INVOKE_TOPIC:
                channel = _decoder.decode(body)["responseChannel"]
                self.sock.send_multipart([channel.encode("ascii"), self.answer])
            elif topic.startswith(b"call-"):
                return topic, body
            elif topic == b"error":
                raise RuntimeError(f"main refused something: {_decoder.decode(body)}")

    def _finished(self, topic: bytes, body: bytes) -> int:
        reply = _decoder.decode(body)
        if "result" not in reply:
            raise RuntimeError(f"call failed: {reply}")
        return int(topic.removeprefix(b"call-"))

    def verify(self) -> None:
        """One call, and a look at what the server booked: the answer really went through."""
        self._call(0)
        _, body = self._next()
        text = _decoder.decode(body)["result"]["content"][0]["text"]
        assert '"accept"' in text and '"Ada"' in text, text

    def _idle_ends(self) -> None:
        if self.peer is not None:
            self.peer.heartbeat_if_due()

    def _idle_starts(self) -> None:
        if self.peer is not None:
            self.peer.last_sent = time.monotonic()

    def sequential(self, count: int, out: list[int]) -> None:
        self._idle_ends()
        for _ in range(count):
            t0 = now_ns()
            self._call(0)
            self._finished(*self._next())
            out.append(now_ns() - t0)
        self._idle_starts()

    def concurrent(self, count: int) -> None:
        """CONCURRENCY calls kept in flight; each finished slot starts the next call."""
        self._idle_ends()
        in_flight = min(CONCURRENCY, count)
        for slot in range(in_flight):
            self._call(slot)
        issued, done = in_flight, 0
        while done < count:
            slot = self._finished(*self._next())
            done += 1
            if issued < count:
                self._call(slot)
                issued += 1
        self._idle_starts()


class _FloorRelay:
    """floor_relay.py in its own process, and a DEALER of ours connected to it."""

    def __init__(self, runtime: Path, errlog: TextIO) -> None:
        endpoint = f"ipc://{runtime}/floor.sock"
        self.proc = subprocess.Popen([PYTHON, str(FLOOR_RELAY), endpoint], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=errlog, env=child_env(),
                                     cwd=FLOOR_RELAY.parent)
        self.pid = self.proc.pid
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)

    def wait_ready(self, timeout_s: float) -> None:
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if readable else b""
        if line.strip() != b"ready":
            raise RuntimeError(f"the floor relay did not start within {timeout_s} s (exit {self.proc.poll()})")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.sock.send_multipart([b"bench-stop", b""])
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.sock.close()


async def _raw_round_trips(raw: RawRouter, count: int, out: list[int]) -> None:
    for _ in range(count):
        t0 = now_ns()
        await raw.round_trip()
        out.append(now_ns() - t0)


class _Tally:
    """Wall and CPU time per kind, summed over its blocks, and each block's calls/s."""

    def __init__(self) -> None:
        self.wall_ns = 0
        self.cpu_ns = 0
        self.count = 0
        self.block_rates: list[float] = []

    async def timed(self, count: int, work: Callable[[], Awaitable[None] | None], cpu: Callable[[], int]) -> None:
        c0, t0 = cpu(), now_ns()
        pending = work()
        if pending is not None:
            await pending
        wall_ns = now_ns() - t0
        self.wall_ns += wall_ns
        self.cpu_ns += cpu() - c0
        self.count += count
        self.block_rates.append(count / (wall_ns / 1e9))

    @property
    def rate(self) -> float:
        return self.count / (self.wall_ns / 1e9)

    @property
    def cpu_us_per_call(self) -> float:
        return self.cpu_ns / self.count / 1e3


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


async def _keep_alive(peer: WirePeer) -> None:
    """main's peer heartbeats while the loop runs the other kinds' blocks (it is idle there)."""
    while True:
        peer.heartbeat_if_due()
        await asyncio.sleep(1.0)  # a heartbeat's period, not a wait for anything


async def _measure(n_seq: int, n_conc: int, blocks: int, profile_dir: Path | None,
                   errlog: TextIO) -> dict[str, Any]:
    seq: dict[str, list[int]] = {"main": [], "in-process": [], "floor": [], "raw": []}
    conc = {"main": _Tally(), "in-process": _Tally(), "floor": _Tally()}
    loops: dict[str, str] = {}
    with running_demo_main() as main:
        peer = main.peer(name="e2e-answerer", strict=True)
        raw = RawRouter(f"ipc://{main.runtime}/raw.sock")
        raw.start()
        answerer = spawn_answerer(raw.endpoint, "-")
        client, answered = _baseline_client(errlog)
        floor = _FloorRelay(main.runtime, errlog)
        spy = None
        try:
            async with client:
                await client.list_tools()
                await wait_until(lambda: raw.peer is not None, 20, "raw answerer hello")
                # Warm-up, and a check that both sides really book the table.
                first = await client.call_tool(TOOL, ARGS)
                text = first.content[0].text  # type: ignore[union-attr]
                assert '"accept"' in text and '"Ada"' in text, text
                loops["main"] = peer.status().get("eventLoop") or "asyncio"
                caller = _LeanCaller(peer.sock, peer)
                caller.verify()
                floor.wait_ready(30)
                floor_caller = _LeanCaller(floor.sock, keep_alive=peer)
                floor_caller.verify()
                floor_caller.sequential(30, [])
                floor_caller.concurrent(40)
                caller.sequential(30, [])
                await _baseline_sequential(client, 30, [])
                caller.concurrent(40)
                await _baseline_concurrent(client, 40)
                await _raw_round_trips(raw, 200, [])
                if profile_dir is not None:
                    spy = _start_py_spy(main.pid, profile_dir / "e2e-main.collapsed")
                me = os.getpid()
                alive = asyncio.create_task(_keep_alive(peer))  # through the in-process and raw blocks
                for index in range(blocks):
                    caller.sequential(n_seq // blocks, seq["main"])
                    await _baseline_sequential(client, n_seq // blocks, seq["in-process"])
                    floor_caller.sequential(n_seq // blocks, seq["floor"])
                    await _raw_round_trips(raw, n_seq // blocks, seq["raw"])
                    k = n_conc // blocks  # long blocks: filling and draining the 8 slots is noise
                    main_block = conc["main"].timed(k, lambda k=k: caller.concurrent(k), lambda: cpu_ns(main.pid))
                    floor_block = conc["floor"].timed(k, lambda k=k: floor_caller.concurrent(k),
                                                      lambda: cpu_ns(floor.pid))
                    # main and the floor side by side, in turns first (ABBA): each block's pair
                    # saw the same machine, and neither always runs after the other
                    for block in (main_block, floor_block) if index % 2 == 0 else (floor_block, main_block):
                        await block
                    await conc["in-process"].timed(k, lambda k=k: _baseline_concurrent(client, k),
                                                   lambda: cpu_ns(me))
                    gc.collect()  # between blocks, not inside them
                alive.cancel()
            assert answered[0] == 1 + 30 + 40 + n_seq // blocks * blocks + n_conc // blocks * blocks, answered
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
                spy.wait(timeout=60)
                collapsed = profile_dir / "e2e-main.collapsed"  # type: ignore[operator]
                if collapsed.exists():
                    _summarize_collapsed(collapsed, profile_dir / "e2e-main.txt")  # type: ignore[operator]
            peer.close()
            floor.close()
            raw.close()
            answerer.terminate()
            answerer.wait(timeout=5)
    return {"seq": seq, "conc": conc, "loop": loops["main"]}


def run(quick: bool, profile_dir: Path | None = None) -> list[Figure]:
    n_seq, n_conc, blocks = (100, 400, 4) if quick else (1000, 3000, BLOCKS)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:  # the in-process server's stderr
        measured = asyncio.run(_measure(n_seq, n_conc, blocks, profile_dir, errlog))
    conc: dict[str, _Tally] = measured["conc"]
    m_conc, b_conc, f_conc = conc["main"], conc["in-process"], conc["floor"]
    ratio_conc = m_conc.rate / b_conc.rate
    m, b, f, r = (summarize_ns(measured["seq"][kind]) for kind in ("main", "in-process", "floor", "raw"))
    ratio_seq = b["mean_us"] / m["mean_us"]  # calls/s one at a time = 1 / mean latency
    extra_us = m["p50_us"] - b["p50_us"]
    floor_extra_us = f["p50_us"] - b["p50_us"]
    hops_us = 2 * r["p50_us"]
    paired = [main / floor for main, floor in zip(m_conc.block_rates, f_conc.block_rates, strict=True)]
    over_floor = statistics.median(paired)
    return [
        Figure(
            name="e2e",
            title=f"end to end, calls/s, {CONCURRENCY} in flight",
            value=f"{ratio_conc:.2f} x in-process",
            target="ratio >= 0.90",
            passed=ratio_conc >= 0.90,
            absolute=f"via main {m_conc.rate:.0f}/s, in-process {b_conc.rate:.0f}/s, n={m_conc.count} each; "
            f"CPU per call: main {m_conc.cpu_us_per_call:.0f} µs (all threads), "
            f"in-process client {b_conc.cpu_us_per_call:.0f} µs",
            how=f"demo server over stdio, tool {TOOL}; main on {measured['loop']}, the in-process client on "
            f"asyncio; via main: one contract-only peer keeps {CONCURRENCY} "
            "msgMcpCallTool in flight and answers every invoke; in-process: mcp.Client(mode=auto, cache=None), "
            f"{CONCURRENCY} tasks, elicitation_callback answers; {blocks} alternating blocks",
            data={
                "ratio": ratio_conc,
                "via_main_calls_per_s": m_conc.rate,
                "in_process_calls_per_s": b_conc.rate,
                "via_main_cpu_us_per_call": m_conc.cpu_us_per_call,
                "in_process_cpu_us_per_call": b_conc.cpu_us_per_call,
                "concurrency": CONCURRENCY,
                "main_event_loop": measured["loop"],
                "n": m_conc.count,
            },
        ),
        Figure(
            name="e2e",
            title="end to end, one call at a time",
            value=f"{ratio_seq:.2f} x in-process, +{extra_us / hops_us:.1f} x hops",
            target="added <= 2 x hops",
            passed=extra_us <= 2 * hops_us,
            absolute=f"via main p50 {fmt_us(m['p50_us'])} (p99 {fmt_us(m['p99_us'])}), in-process p50 "
            f"{fmt_us(b['p50_us'])} (p99 {fmt_us(b['p99_us'])}): +{fmt_us(extra_us)} per call, of which "
            f"the 4 hops take {fmt_us(hops_us)} at raw pyzmq speed (2 x p50 {fmt_us(r['p50_us'])}); n={m['n']}; "
            f"floor relay p50 {fmt_us(f['p50_us'])}: +{fmt_us(floor_extra_us)}, +{floor_extra_us / hops_us:.1f} x hops",
            how="as above, one call in flight; raw: pyzmq ROUTER<->DEALER round trip with the bench answerer, "
            "same blocks",
            data={
                "ratio": ratio_seq,
                "via_main": m,
                "in_process": b,
                "raw_round_trip": r,
                "extra_us_p50": extra_us,
                "four_hops_at_raw_speed_us": hops_us,
                "floor": f,
                "floor_extra_us_p50": floor_extra_us,
            },
        ),
        Figure(
            name="e2e",
            title="end to end, main vs a bare relay",
            value=f"main {over_floor:.2f} x floor",
            target=f"median >= {TARGET_OVER_FLOOR} x",
            passed=over_floor >= TARGET_OVER_FLOOR,
            absolute=f"median of {len(paired)} side-by-side blocks (each {min(paired):.2f}-{max(paired):.2f}); "
            f"over all blocks {m_conc.rate / f_conc.rate:.2f} x; floor {f_conc.rate:.0f}/s "
            f"({f_conc.rate / b_conc.rate:.2f} x in-process), {CONCURRENCY} in flight; CPU per call: floor "
            f"{f_conc.cpu_us_per_call:.0f} µs ({f_conc.cpu_us_per_call / b_conc.cpu_us_per_call:.2f} x in-process), "
            f"main {m_conc.cpu_us_per_call:.0f} µs ({m_conc.cpu_us_per_call / b_conc.cpu_us_per_call:.2f} x, "
            f"{m_conc.cpu_us_per_call / f_conc.cpu_us_per_call:.2f} x floor)",
            how="floor_relay.py: a ROUTER + the same mcp.Client, the same five messages per call as main "
            "(call, invoke, answer, dismiss, result), none of main's checks, audit or peers; main's and the "
            "floor's blocks of 8 in flight run one after the other, in turns first, and each pair's ratio "
            "of calls/s counts (a block the machine slowed moves the median of the pairs, not the figure)",
            data={
                "floor_calls_per_s": f_conc.rate,
                "floor_ratio": f_conc.rate / b_conc.rate,
                "main_over_floor": over_floor,
                "main_over_floor_blocks": paired,
                "main_over_floor_all_blocks": m_conc.rate / f_conc.rate,
                "floor_cpu_us_per_call": f_conc.cpu_us_per_call,
            },
        ),
    ]
