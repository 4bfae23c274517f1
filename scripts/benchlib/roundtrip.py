"""Raw pyzmq floor and in-process broker round trip, measured side by side.

Both run in one asyncio loop in this process, each behind its own ipc ROUTER, each answered by
its own `answerer.py` process (the same script). Blocks alternate raw / broker so drift (CPU
frequency, another process waking up) hits both alike.

- raw floor: a bare ROUTER driven exactly the way main drives its own (loop.add_reader on
  ZMQ_FD, drain while EVENTS & POLLIN, NOBLOCK sends, one extra drain scheduled after a send),
  sending the bytes of a real encoded invoke and resolving a future on the real encoded result.
- broker: `main_process.wire.broker.Broker` with stub ports; one sample is `await broker.server_ports.elicit(...)`,
  i.e. make channel + pending, encode and send the invoke, receive and decode the result,
  validate content, resolve, send the dismiss, return.
"""

import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import zmq
from kit.env import child_env, short_tmp_dir
from kit.paths import PYTHON

from benchlib.common import BENCH_CONTENT, BENCH_SCHEMA, Figure, fmt_us, now_ns, summarize_ns
from main_process.consent.pending import Elicitation, RequestOptions
from main_process.wire.broker import Broker, Receivers
from main_process.wire.wire import Wire
from shared import channels
from shared.codec import encode
from shared.messages import ElicitationInvoke, ElicitationRequest, ElicitationResult, ServerInfo

ANSWERER = Path(__file__).with_name("answerer.py")
PARAMS: dict[str, Any] = {
    "mode": "form",
    "message": "Book a table at Chez MCP?",
    "requestedSchema": BENCH_SCHEMA,
}
TIMEOUT_S = 30.0
ELICITATION = Elicitation.read("bench", PARAMS)  # read once, as main reads a server's request
OPTIONS = RequestOptions(timeout_s=TIMEOUT_S)


class StubPorts:
    """What the round trip gives the broker: no servers, no calls, no rules, no shutdown."""

    def server_infos(self) -> list[ServerInfo]:
        return []

    def unused(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not used by the benchmark")

    def peer_gone(self, routing_id: bytes) -> None:
        pass

    def receivers(self) -> Receivers:
        """Every topic but the answers themselves fails loudly: the benchmark sends none."""
        unused = self.unused
        return Receivers(calls=self, servers=self, server_policy=unused, reload=unused,  # type: ignore[arg-type]
                         shutdown=unused, rules=self, questions=self, relay=self)  # type: ignore[arg-type]


def sample_invoke_frames() -> tuple[list[bytes], bytes]:
    """A real invoke as the broker encodes it, and the result body the answerer sends."""
    now = time.time()
    invoke = ElicitationInvoke(
        request=ElicitationRequest(server="bench", params=PARAMS),
        response_channel=channels.new_result_channel(),
        created_at=int(now * 1000),
        expires_at=int((now + TIMEOUT_S) * 1000),
        origin=None,
    )
    frames = encode(channels.INVOKE, invoke)
    result = encode(invoke.response_channel, ElicitationResult(action="accept", content=BENCH_CONTENT))
    return frames, result[1]


class RawRouter:
    """The floor: a bare ROUTER in main's event-loop style, one request in flight."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.sock = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.sock.bind(endpoint)
        self.invoke, self.result = sample_invoke_frames()
        self.channel = self.invoke_channel()
        self.peer: bytes | None = None
        self.waiter: asyncio.Future[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False

    def invoke_channel(self) -> bytes:
        import msgspec

        return msgspec.msgpack.decode(self.invoke[1])["responseChannel"].encode("ascii")

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.sock.getsockopt(zmq.FD), self._drain)
        self._drain()

    def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.sock.getsockopt(zmq.FD))
        self.sock.close(linger=0)

    def _drain(self) -> None:
        self._scheduled = False
        sock = self.sock
        while sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            topic = frames[1]
            if topic == self.channel:
                waiter = self.waiter
                if waiter is not None and not waiter.done():
                    waiter.set_result(frames[2])
            elif topic == b"hello":
                self.peer = frames[0]
                sock.send_multipart([frames[0], b"welcome", b"\x80"], zmq.NOBLOCK)

    def _schedule_drain(self) -> None:
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._drain)

    async def round_trip(self) -> bytes:
        assert self._loop is not None and self.peer is not None
        self.waiter = waiter = self._loop.create_future()
        self.sock.send_multipart([self.peer, *self.invoke], zmq.NOBLOCK)
        self._schedule_drain()
        return await waiter


def spawn_answerer(endpoint: str, token: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PYTHON, str(ANSWERER), endpoint, token],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        env=child_env(),
        cwd=ANSWERER.parent,
    )


async def wait_until(check: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout_s} s")
        await asyncio.sleep(0.01)


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of a process (zmq's I/O thread included), from schedstat."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


async def _measure(n: int, blocks: int, only_raw: bool, profiler: Any, n_audited: int) -> dict[str, Any]:
    """Samples of each kind: "raw", "broker" and (n_audited > 0) "audited" = broker + the SQLite store's audit."""
    tmp = short_tmp_dir()
    raw = RawRouter(f"ipc://{tmp}/raw.sock")
    raw.start()
    brokers: dict[str, Broker] = {}
    kinds = ["raw"] if only_raw else ["raw", "broker"] + (["audited"] if n_audited else [])
    store = None
    for kind in kinds[1:]:
        if kind == "audited":
            from main_process.store.factory import open_store

            store = open_store(None, audit_path=tmp / "audit.sqlite3")  # on /, like the user's data dir
        stub = StubPorts()
        wire = Wire(endpoint=f"ipc://{tmp}/{kind}.sock", server_infos=stub.server_infos)
        wire.bind()
        brokers[kind] = Broker(
            wire,
            token="bench-token",
            session=channels.new_uuid7(),
            **({"audit": store.audit} if kind == "audited" and store is not None else {}),
        )
        brokers[kind].start(stub.receivers())
    peers = {"raw": spawn_answerer(raw.endpoint, "-")}
    for kind, broker in brokers.items():
        peers[kind] = spawn_answerer(broker.endpoint, "bench-token")
    samples: dict[str, list[int]] = {kind: [] for kind in kinds}
    # CPU spent per kind: this process (loop thread + zmq I/O thread), and the answerer process.
    cpu = {kind: {"main_ns": 0, "loop_ns": 0, "peer_ns": 0, "wall_ns": 0, "count": 0} for kind in samples}
    me = os.getpid()

    def block_of(kind: str) -> Any:
        out = samples[kind]
        if kind == "raw":

            async def raw_block(count: int, keep: bool) -> None:
                round_trip = raw.round_trip
                for _ in range(count):
                    t0 = now_ns()
                    await round_trip()
                    t1 = now_ns()
                    if keep:
                        out.append(t1 - t0)

            return raw_block
        elicit = brokers[kind].server_ports.elicit

        async def broker_block(count: int, keep: bool) -> None:
            for _ in range(count):
                t0 = now_ns()
                await elicit(ELICITATION, OPTIONS)
                t1 = now_ns()
                if keep:
                    out.append(t1 - t0)

        return broker_block

    async def timed(kind: str, count: int) -> None:
        c0, p0, w0, l0 = cpu_ns(me), cpu_ns(peers[kind].pid), now_ns(), time.thread_time_ns()
        await block_of(kind)(count, True)
        acc = cpu[kind]
        acc["loop_ns"] += time.thread_time_ns() - l0
        acc["main_ns"] += cpu_ns(me) - c0
        acc["peer_ns"] += cpu_ns(peers[kind].pid) - p0
        acc["wall_ns"] += now_ns() - w0
        acc["count"] += count

    try:
        await wait_until(lambda: raw.peer is not None, 20, "raw answerer hello")
        for kind, broker in brokers.items():
            await wait_until(lambda: bool(broker.wire.peers()), 20, f"{kind} answerer attach")  # noqa: B023
            first = await broker.server_ports.elicit(ELICITATION, OPTIONS)
            assert first.action == "accept" and first.content == BENCH_CONTENT, first
        counts = {"raw": n, "broker": n, "audited": n_audited}
        for kind in kinds:
            await block_of(kind)(max(50, counts[kind] // 20), False)  # warm-up
        for _ in range(blocks):
            for kind in kinds:
                if profiler is not None and kind == "broker":
                    profiler.start()
                await timed(kind, max(1, counts[kind] // blocks))
                if profiler is not None and kind == "broker":
                    profiler.stop()
            gc.collect()  # between blocks, not inside them: every kind pays the same
    finally:
        raw.close()
        for broker in brokers.values():
            await broker.close()
            broker.wire.close()
        if store is not None:
            await store.close()
        for proc in peers.values():
            proc.terminate()
        for proc in peers.values():
            proc.wait(timeout=5)
        shutil.rmtree(tmp, ignore_errors=True)
    result: dict[str, Any] = {}
    for kind, values in samples.items():
        acc = cpu[kind]
        result[kind] = {
            **summarize_ns(values),
            "cpu_main_us": acc["main_ns"] / acc["count"] / 1e3,  # per round trip, all threads
            "cpu_loop_us": acc["loop_ns"] / acc["count"] / 1e3,  # the asyncio thread alone
            "cpu_peer_us": acc["peer_ns"] / acc["count"] / 1e3,
            "wall_us": acc["wall_ns"] / acc["count"] / 1e3,
        }
    return result


def child_main(argv: list[str]) -> int:
    """`python -m benchlib.roundtrip N N_AUDITED ONLY_RAW PIN_CPU PROFILE_PATH`: measure, print JSON."""
    n, n_audited, only_raw, pin, profile_path = int(argv[0]), int(argv[1]), argv[2] == "1", argv[3], argv[4]
    if pin != "-":
        # Before zmq's I/O thread exists, so it and the answerer processes inherit the CPU.
        os.sched_setaffinity(0, {int(pin)})
    profiler = None
    if profile_path != "-":
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0001, async_mode="disabled")
    result = asyncio.run(_measure(n, 20, only_raw, profiler, n_audited))
    if profiler is not None:
        Path(profile_path + ".txt").write_text(profiler.output_text(unicode=True, show_all=False))
        Path(profile_path + ".html").write_text(profiler.output_html())
    print(json.dumps(result))
    return 0


def _in_child(
    n: int, n_audited: int, only_raw: bool, pin: int | None, profile_path: Path | None
) -> dict[str, Any]:
    env = child_env()
    if profile_path is not None:
        env["PYTHONPATH"] += os.pathsep + os.environ.get(
            "BENCH_TOOLS", "/tmp/tools/lib/python3.12/site-packages"
        )
    argv = [
        PYTHON,
        "-m",
        "benchlib.roundtrip",
        str(n),
        str(n_audited),
        "1" if only_raw else "0",
        "-" if pin is None else str(pin),
        "-" if profile_path is None else str(profile_path),
    ]
    out = subprocess.run(
        argv,
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=ANSWERER.parent.parent,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"round-trip child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cpu_text(d: dict[str, Any]) -> str:
    return (
        f"CPU/rt: loop thread {d['cpu_loop_us']:.0f} µs, zmq I/O thread {d['cpu_main_us'] - d['cpu_loop_us']:.0f} µs, "
        f"peer {d['cpu_peer_us']:.0f} µs"
    )


def run(quick: bool, only_raw: bool = False, profile_dir: Path | None = None) -> list[Figure]:
    n = 2_000 if quick else 20_000
    invoke_bytes = len(sample_invoke_frames()[0][1])
    figures: list[Figure] = []
    # Free placement is how main really runs, and the figure. One core is printed beside
    # it: the CPU cost without cross-core wake-ups (on a small VM those dominate the floor and
    # swing it by 2x between runs), where every extra instruction of the broker shows in full.
    modes: list[tuple[str, int | None]] = [("", None), (" (1 core)", 0)]
    for label, pin in modes:
        profile = (
            profile_dir / f"broker-roundtrip{'-1core' if pin is not None else ''}" if profile_dir else None
        )
        # The audit log's variant once, with free placement: what issue 5's commit-before-answer adds.
        n_audited = 0 if (only_raw or pin is not None) else n // 10
        result = _in_child(n, n_audited, only_raw, pin, None if only_raw else profile)
        raw = result["raw"]
        where = "all processes on CPU 0" if pin is not None else "scheduler places processes freely"
        figures.append(
            Figure(
                name="raw",
                title=f"raw floor{label}",
                value=f"p50 {fmt_us(raw['p50_us'])}",
                target="",
                passed=None,
                absolute=f"p99 {fmt_us(raw['p99_us'])}, n={raw['n']}, {_cpu_text(raw)}",
                how=f"pyzmq ROUTER<->DEALER over ipc, invoke {invoke_bytes} B + result, main's add_reader drain "
                f"style, answerer process; {where}",
                data={**raw, "pinned_cpu": pin},
            )
        )
        if only_raw:
            continue
        brk = result["broker"]
        ratio = brk["p50_us"] / raw["p50_us"]
        figures.append(
            Figure(
                name="broker",
                title=f"broker round trip{label}",
                value=f"{ratio:.2f} x raw (p50)",
                target="p50 <= 1.5 x raw" if pin is None else "",
                passed=ratio <= 1.5 if pin is None else None,
                absolute=f"p50 {fmt_us(brk['p50_us'])}, p99 {fmt_us(brk['p99_us'])} (raw p99 {fmt_us(raw['p99_us'])}), "
                f"n={brk['n']}, {_cpu_text(brk)}",
                how=f"in-process Broker + stub ports, same answerer script, await broker.server_ports.elicit(); "
                f"blocks alternate with the floor; {where}",
                data={
                    **brk,
                    "ratio_p50": ratio,
                    "ratio_p99": brk["p99_us"] / raw["p99_us"],
                    "pinned_cpu": pin,
                },
            )
        )
        if n_audited:
            aud = result["audited"]
            ratio = aud["p50_us"] / raw["p50_us"]
            added = aud["p50_us"] - brk["p50_us"]
            figures.append(
                Figure(
                    name="broker",
                    title="broker round trip + audit log",
                    value=f"{ratio:.2f} x raw (p50)",
                    target="",
                    passed=None,
                    absolute=f"p50 {fmt_us(aud['p50_us'])} (+{fmt_us(added)} for the commit before the answer), "
                    f"p99 {fmt_us(aud['p99_us'])}, n={aud['n']}, {_cpu_text(aud)}",
                    how="as the broker round trip, with main's store (SQLite WAL, synchronous=NORMAL) and "
                    "AuditWriter in a temp dir on the same ext4 as the user's data dir, as main runs it",
                    data={**aud, "ratio_p50": ratio, "added_us_p50": added, "pinned_cpu": pin},
                )
            )
    return figures


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
