"""Fuzz (issue 5): 100,000 malformed frames at a real main's ROUTER; main stays up and keeps serving.

Through a real main with the demo server over stdio. A legitimate renderer attaches first and
answers one `book_table` request (declined), so there is an answered channel to forge results on.
Then several fuzzing connections (two welcomed: a renderer and a controller; two never welcomed;
one never welcomed that reconnects every RECONNECT_EVERY frames, so it has a fresh routing id)
throw malformed frames: garbage bytes, wrong frame counts (1, 3, 4, 5), valid msgpack of the wrong
shape, near-valid bodies, mutated valid bodies, unknown topics, forged results on random
`msgElicitationTransferResult-<uuid>` channels and on the answered one, deep nesting, a few stale
hellos, and a few bodies just over the 1 MiB limit.

Every frame has an expected answer worked out from wire contract v1 alone (the kit's `expectation`
oracle, the one tests/test_fuzz.py uses, written from DESIGN.md section 3 without importing the project):
the codes allowed, the topic the error must name, whether main may stay silent. Frames whose body
would be valid for an acting topic (bye, msgShutdown, msgMcpCallTool...) are never sent. Each
connection keeps at most WINDOW answers outstanding, read as they come (main's per-peer SNDHWM is
10,000 and its sends are NOBLOCK: a reader that falls behind loses answers, which would be ours,
not main's, fault). Main answers one connection's frames in order, so each reply is matched to its
frame in order; a sentinel frame with a unique unknown topic ends each connection's run. A frame
main may leave unanswered (a stale hello: main throttles them; a deep heartbeat: valid or too deep)
is followed by a marker frame with a unique unknown topic, so the next reply is unambiguously its
answer or the marker's.

After the barrage: main is alive; the legitimate renderer calls `book_table` (msgMcpCallTool),
gets the invoke, answers accept with content exercising every field type, and the tool result
must echo exactly that content; the welcomed fuzzing renderer, kept open, must get that request's
invoke too (bad frames never detach a welcomed peer). Lines of main's stderr containing "refused"
are counted over main's whole life (main logs to stderr here, at info level).
"""

import json
import os
import random
import time
import uuid
from collections import Counter, deque
from typing import Any

import msgspec
import zmq
from kit import contract, wire
from kit.contract import BACKGROUND_TOPICS, CONTRACT_CODES, INVOKE
from kit.frames import FrameGen
from kit.main import RunningMain, running_main
from kit.oracle import ANY_TOPIC, Expect, expectation, is_rate_limited
from kit.peer import WirePeer

from benchlib.common import Figure, demo_entry, rss_mb

FRAMES_FULL = 100_000
FRAMES_QUICK = 10_000
OVERSIZED_FULL = 10  # bodies just over 1 MiB: slow to build and ship, so only a few
OVERSIZED_QUICK = 3
WINDOW = 1_000  # answers outstanding per connection before we wait for main
RECONNECT_EVERY = 500  # frames on the reconnecting never-welcomed connection before a fresh one
BARRAGE_LIMIT_S = 240.0  # give up sending after this long (the row then says so)
STALL_S = 20.0  # no answer from main for this long while we wait on it: main stopped serving
# The legitimate answer after the barrage: every field type of book_table's schema, non-ASCII too.
LEGIT_CONTENT: dict[str, Any] = {
    "name": 'Zoë "after" the fuzz 🍽',
    "party_size": 12,
    "outdoor": True,
    "budget": 0.1,
    "cuisine": "japanese",
}

_decode = wire.decode


# ---- connections -------------------------------------------------------------------------------


class Stats:
    def __init__(self) -> None:
        self.codes: Counter[str] = Counter()
        self.kinds_sent: Counter[str] = Counter()
        self.replies = 0
        self.non_error: list[str] = []  # replies that were not `error` (samples)
        self.non_error_count = 0
        self.off_contract = 0  # error codes outside the contract
        self.off_oracle = 0  # a contract code, but not one the oracle allows for that frame
        self.unanswered = 0  # frames that needed an answer and got none before the sentinel's
        self.silent = 0  # frames main was allowed to leave unanswered and did
        self.extra = 0  # replies with no frame left to answer
        self.samples: list[str] = []  # a few off-oracle / unanswered examples, for the report
        self.background = 0
        self.sent = 0
        self.reconnects = 0
        self.outstanding = 0  # frames never accounted for: their connection's sentinel got no answer
        self.rate_limited = 0  # `rate-limited` errors: main dropped frames of ours for our rate
        self.dropped = 0  # frames left unanswered after such an error (not counted as unanswered)

    def sample(self, text: str) -> None:
        if len(self.samples) < 12:
            self.samples.append(text)


class FuzzConn:
    """One DEALER throwing frames; its expected answers in order; replies matched as they come."""

    def __init__(
        self, ctx: zmq.Context[Any], endpoint: str, name: str, welcomed: bool, reconnect: bool = False
    ):
        self.ctx = ctx
        self.endpoint = endpoint
        self.name = name
        self.welcomed = welcomed
        self.reconnect = reconnect
        self.pending: deque[Expect] = deque()
        self.sent_here = 0  # frames on the current socket
        self.closing: str | None = None  # sentinel topic once sent
        self.finished = False
        self.finished_requested = False  # the run is over: no fresh socket after the sentinel
        self.sockets_opened = 0
        self.dropping = False  # main said rate-limited since the last sentinel: frames may go unanswered
        self.sock = self._open()

    def _open(self) -> zmq.Socket[bytes]:
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 0)  # the WINDOW bounds what is queued; never block a send
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.connect(self.endpoint)
        self.sockets_opened += 1
        return sock

    def hello(self, token: str, role: str, timeout_s: float = 15.0) -> None:
        self.sock.send_multipart(wire.hello_frames(token, str(uuid.uuid4()), self.name, role))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.sock.poll(200):
                frames = self.sock.recv_multipart()
                if frames[0] == b"welcome":
                    return
        raise TimeoutError(f"{self.name}: no welcome")

    def can_send(self) -> bool:
        return self.closing is None and not self.finished and len(self.pending) < WINDOW

    def send(self, frames: list[bytes], expect: Expect) -> None:
        self.sock.send_multipart(frames, copy=len(frames[-1]) < 65536)
        self.sent_here += 1
        if expect.codes:
            self.pending.append(expect)

    def close_after(self) -> None:
        """Send the sentinel: once its unknown-topic error is back, every answer before it is in."""
        self.closing = f"zz-sentinel-{uuid.uuid4()}"
        self.sock.send_multipart([self.closing.encode(), b"\x80"])

    def on_reply(self, frames: list[bytes], stats: Stats) -> None:
        if len(frames) != 2:
            stats.non_error_count += 1
            stats.sample(f"{self.name}: reply of {len(frames)} frames")
            return
        topic = frames[0].decode("ascii", "replace")
        try:
            body = _decode(frames[1])
        except msgspec.DecodeError:
            body = None
        if topic != contract.ERROR:
            if self.welcomed and topic in BACKGROUND_TOPICS:
                stats.background += 1
                return
            stats.non_error_count += 1
            if len(stats.non_error) < 5:
                stats.non_error.append(f"{self.name}: {topic} {str(body)[:200]}")
            return
        if isinstance(body, dict) and self.closing is not None and body.get("topic") == self.closing:
            if body.get("code") != "unknown-topic":
                stats.off_oracle += 1
                stats.sample(f"{self.name}: sentinel answered with {body}")
            while self.pending:
                self._unanswered(self.pending.popleft(), stats)
            self._closed()
            return
        stats.replies += 1
        code = body.get("code") if isinstance(body, dict) else None
        stats.codes[str(code)] += 1
        if code not in CONTRACT_CODES:
            stats.off_contract += 1
            stats.sample(f"{self.name}: error code outside the contract: {body}")
        if is_rate_limited(body):  # answers no frame of ours; some of ours will get none
            stats.rate_limited += 1
            self.dropping = True
            return
        # Match in order: silent frames may be skipped; skipping a frame that needed an answer means
        # main left it unanswered (only if the reply fits a later frame within a short lookahead,
        # or any later frame once main said it drops frames).
        for j, exp in enumerate(self.pending):
            if j >= 16 and not self.dropping:
                break
            if exp.accepts(body):
                for _ in range(j):
                    self._unanswered(self.pending.popleft(), stats)
                self.pending.popleft()
                return
        if not self.pending:
            stats.extra += 1
            stats.sample(f"{self.name}: reply with no frame left to answer: {body}")
            return
        exp = self.pending.popleft()
        stats.off_oracle += 1
        stats.sample(
            f"{self.name}: a {exp.kind} frame expected {sorted(exp.codes)} topic "
            f"{'any' if exp.topic is ANY_TOPIC else repr(exp.topic)[:80]}, got {str(body)[:300]}"
        )

    def _unanswered(self, expect: Expect, stats: Stats) -> None:
        if expect.silent:
            stats.silent += 1
        elif self.dropping:
            stats.dropped += 1
        else:
            stats.unanswered += 1
            stats.sample(f"{self.name}: no answer to a {expect.kind} frame (expected {sorted(expect.codes)})")

    def _closed(self) -> None:
        self.closing = None
        self.dropping = False
        if self.reconnect and not self.finished_requested:
            self.sock.close(linger=0)
            self.sock = self._open()
            self.sent_here = 0
        else:
            self.finished = True


# ---- the figure ----------------------------------------------------------------------------------


def _answered_channel(legit: WirePeer) -> str:
    """One request declined before the barrage: later results on its channel are already-answered."""
    call = legit.call_tool("demo", "book_table", {"restaurant": "before the fuzz"})
    invoke = legit.expect(lambda t, b: t == INVOKE)[1]
    legit.send(invoke["responseChannel"], {"action": "decline"})
    legit.expect(lambda t, b: t == call)
    return invoke["responseChannel"]


def _legit_round_trip(legit: WirePeer) -> tuple[bool, str, str]:
    """(exact?, what happened, the request's response channel)"""
    call = legit.call_tool("demo", "book_table", {"restaurant": "after the fuzz"})
    invoke = legit.expect(lambda t, b: t == INVOKE, timeout_s=20)[1]
    channel = invoke["responseChannel"]
    message = invoke["request"]["params"].get("message")
    if message != "Book a table at after the fuzz?":
        return False, f"invoke for another request: {message!r}", channel
    legit.send(invoke["responseChannel"], {"action": "accept", "content": LEGIT_CONTENT})
    reply = legit.expect(lambda t, b: t == call, timeout_s=20)[1]
    try:
        got = json.loads(reply["result"]["content"][0]["text"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return False, f"tool reply not a result ({exc}): {str(reply)[:300]}", channel
    want = {"action": "accept", "content": LEGIT_CONTENT}
    return got == want, ("exact" if got == want else f"echo differs: {got}"), channel


def _still_attached(sock: zmq.Socket[bytes], channel: str, timeout_s: float = 5.0) -> bool:
    """The welcomed fuzzing renderer got the invoke of the request made after the barrage: main did
    not detach it for its bad frames (the contract: bad frames never detach a welcomed peer)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not sock.poll(100):
            continue
        frames = sock.recv_multipart()
        if frames[0] == INVOKE.encode("ascii") and _decode(frames[1]).get("responseChannel") == channel:
            return True
    return False


class _Legit:
    """Keeps the legitimate renderer alive and read while the barrage runs."""

    def __init__(self, peer: WirePeer) -> None:
        self.peer = peer
        self.errors: list[Any] = []
        self.other: Counter[str] = Counter()
        self.last = 0.0

    def tend(self) -> None:
        now = time.monotonic()
        if now - self.last > 0.5:
            self.peer.send(contract.HEARTBEAT, {})
            self.last = now
        for topic, body in self.peer.receive():
            if topic == contract.ERROR:
                self.errors.append(body)
            self.other[topic] += 1


def _barrage(
    main: RunningMain, legit: _Legit, answered: str, total: int, oversized: int, seed: int
) -> tuple[Stats, float, str, zmq.Socket[bytes]]:
    """Returns the stats, the seconds from the first frame to the last answer, why it stopped early
    (or ""), and the welcomed fuzzing renderer's socket, left open."""
    info = main.info
    ctx: zmq.Context[Any] = zmq.Context.instance()
    endpoint, token = info["endpoint"], info["token"]
    conns = [
        FuzzConn(ctx, endpoint, "fuzz-renderer", welcomed=True),
        FuzzConn(ctx, endpoint, "fuzz-controller", welcomed=True),
        FuzzConn(ctx, endpoint, "stranger-1", welcomed=False),
        FuzzConn(ctx, endpoint, "stranger-2", welcomed=False),
        FuzzConn(ctx, endpoint, "stranger-reconnecting", welcomed=False, reconnect=True),
    ]
    conns[0].hello(token, "renderer")
    conns[1].hello(token, "controller")
    for conn in conns[:2]:  # the `peers` broadcasts of their attaching
        while conn.sock.poll(100):
            conn.sock.recv_multipart()
    legit.tend()

    rng = random.Random(seed)
    gen = FrameGen(rng, [answered])
    answered_set = frozenset({answered})
    stats = Stats()
    poller = zmq.Poller()
    by_sock: dict[Any, FuzzConn] = {}

    def register(conn: FuzzConn) -> None:
        poller.register(conn.sock, zmq.POLLIN)
        by_sock[conn.sock] = conn

    for conn in conns:
        register(conn)

    def drain(timeout_ms: int) -> bool:
        got_any = False
        for sock, _ in poller.poll(timeout_ms):
            conn = by_sock.get(sock)
            if conn is None:
                continue
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                got_any = True
                was = conn.sock
                conn.on_reply(frames, stats)
                if conn.sock is not was:  # reconnected: the old socket is closed
                    poller.unregister(was)
                    by_sock.pop(was, None)
                    register(conn)
                    break
        return got_any

    oversized_at = {int((i + 0.5) * total / oversized) for i in range(oversized)} if oversized else set()
    sent = 0
    t0 = time.monotonic()
    last_progress = t0
    stopped = ""
    turn = 0
    while sent < total:
        now = time.monotonic()
        if now - t0 > BARRAGE_LIMIT_S:
            stopped = f"stopped after {BARRAGE_LIMIT_S:.0f} s"
            break
        if sent % 256 == 0:
            legit.tend()
            if main.proc.poll() is not None:
                stopped = f"main exited with {main.proc.returncode}"
                break
        ready = [c for c in conns if c.can_send()]
        if not ready:
            if drain(50):
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > STALL_S:
                stopped = f"main answered nothing for {STALL_S:.0f} s"
                break
            continue
        # welcomed connections get ~60% of the frames
        turn += 1
        pick = [c for c in ready if c.welcomed] if (turn % 5) < 3 else [c for c in ready if not c.welcomed]
        conn = rng.choice(pick or ready)
        if sent in oversized_at:
            kind, frames = gen.oversized()
        else:
            kind, frames = gen.frames()
        expect = expectation(frames, attached=conn.welcomed, answered=answered_set, kind=kind)
        if expect is None:
            continue  # valid for an acting topic: never sent
        conn.send(frames, expect)
        stats.kinds_sent[kind] += 1
        sent += 1
        if expect.silent and expect.codes and sent < total:
            # main may or may not answer this one: a frame with a unique unknown topic right after it
            # tells, in order, whether the next reply is its answer or the marker's
            marker = f"zz-marker-{sent}-{rng.getrandbits(32):08x}"
            frames = [marker.encode(), b"\x80"]
            marker_expect = expectation(frames, attached=conn.welcomed, answered=answered_set, kind="marker")
            assert marker_expect is not None  # an unknown topic: always refused
            conn.send(frames, marker_expect)
            stats.kinds_sent["marker"] += 1
            sent += 1
        if conn.reconnect and conn.sent_here >= RECONNECT_EVERY:
            conn.close_after()
        if sent % 64 == 0 and drain(0):
            last_progress = time.monotonic()

    for conn in conns:
        conn.finished_requested = True
        if main.proc.poll() is None and not conn.finished and conn.closing is None:
            conn.close_after()
    deadline = time.monotonic() + (5 if stopped else 60)  # stopped early: main is gone or stuck
    while main.proc.poll() is None and not all(c.finished for c in conns) and time.monotonic() < deadline:
        drain(100)
        legit.tend()
    seconds = time.monotonic() - t0
    unfinished = [c.name for c in conns if not c.finished]
    if unfinished and not stopped:
        stopped = f"no answer to the sentinel of {unfinished}"
    stats.reconnects = conns[4].sockets_opened - 1
    stats.outstanding = sum(len(c.pending) for c in conns if not c.finished)
    stats.sent = sent
    for conn in conns[1:]:
        conn.sock.close(linger=0)
    return stats, seconds, stopped, conns[0].sock


def run(quick: bool) -> list[Figure]:
    total = FRAMES_QUICK if quick else FRAMES_FULL
    oversized = OVERSIZED_QUICK if quick else OVERSIZED_FULL
    seed = int(os.environ.get("ELICITRON_FUZZ_SEED", "20250105"))
    with running_main({"demo": demo_entry()}) as main:
        main.wait_server_ready("demo")
        legit_peer = main.peer(name="legit-window", role="renderer", strict=True)
        try:
            answered = _answered_channel(legit_peer)
            legit = _Legit(legit_peer)
            rss_before = rss_mb(main.pid)
            stats, seconds, stopped, fuzzer = _barrage(main, legit, answered, total, oversized, seed)
            alive = main.proc.poll() is None
            legit.tend()
            fuzzer_attached = False
            if alive:
                rss_after = rss_mb(main.pid)
                try:
                    round_trip_ok, round_trip, channel = _legit_round_trip(legit_peer)
                    fuzzer_attached = _still_attached(fuzzer, channel)
                except Exception as exc:  # noqa: BLE001 (reported in the row)
                    round_trip_ok, round_trip = False, f"{type(exc).__name__}: {exc}"[:300]
            else:
                rss_after = float("nan")
                round_trip_ok, round_trip = False, "main is gone"
            fuzzer.close(linger=0)
            alive = alive and main.proc.poll() is None
            lines = main.stderr.lines()  # main logs a refusal before it answers: every one is in
        finally:
            legit_peer.close()
    sent = stats.sent
    refused = [line for line in lines if "refused" in line]
    dropped = [line for line in lines if "dropped a message" in line]
    tracebacks = [line for line in lines if "Traceback" in line or "failed handling" in line]
    ratio = len(refused) / sent if sent else float("nan")
    contract_only = stats.non_error_count == 0 and stats.off_contract == 0 and not legit.errors
    passed = alive and round_trip_ok and contract_only and ratio < 0.01 and sent == total and not stopped
    codes = ", ".join(f"{code} {n}" for code, n in stats.codes.most_common())
    fps = sent / seconds if seconds else float("nan")
    absolute = (
        f"{fps:,.0f} frames/s ({seconds:.1f} s); {stats.replies:,} errors: {codes}; "
        f"{len(refused)} 'refused' log lines ({100 * ratio:.3f}% of frames); legit round trip {round_trip}; "
        f"welcomed fuzzer still attached: {'yes' if fuzzer_attached else 'NO'}; "
        f"main RSS {rss_before:.0f} -> {rss_after:.0f} MB; "
        f"unanswered {stats.unanswered}, off-oracle {stats.off_oracle}, silent {stats.silent}, "
        f"non-error replies {stats.non_error_count}"
        + (f", {stats.outstanding} still awaiting an answer" if stats.outstanding else "")
        + (f", {stats.dropped} dropped after {stats.rate_limited} rate-limited" if stats.rate_limited else "")
        + (f"; {stopped}" if stopped else "")
    )
    return [
        Figure(
            name="fuzz",
            title=f"fuzz {total:,} malformed frames",
            value=("" if sent == total else f"only {sent:,} sent, ")
            + f"{'alive' if alive else 'DEAD'}, round trip {'exact' if round_trip_ok else 'WRONG'}, "
            f"{len(refused)} log lines",
            target="alive, exact, only contract errors, log < 1%",
            passed=passed,
            absolute=absolute,
            how="real main + demo server (stdio); a legit renderer attached first; 2 welcomed + 3 "
            f"never-welcomed DEALERs (one reconnecting every {RECONNECT_EVERY:,} frames) send garbage, wrong "
            "frame counts, wrong shapes, unknown topics, forged results, deep nesting, >1 MiB bodies; every "
            "reply matched in order to a contract oracle; then the legit window books a table (the welcomed "
            "fuzzing renderer must get that invoke too); 'refused' lines counted in main's stderr",
            data={
                "frames": sent,
                "seconds": seconds,
                "frames_per_s": fps,
                "errors_by_code": dict(stats.codes),
                "kinds_sent": dict(stats.kinds_sent),
                "replies": stats.replies,
                "unanswered": stats.unanswered,
                "rate_limited": stats.rate_limited,
                "dropped": stats.dropped,
                "outstanding": stats.outstanding,
                "off_oracle": stats.off_oracle,
                "off_contract": stats.off_contract,
                "silent": stats.silent,
                "extra": stats.extra,
                "non_error_replies": stats.non_error_count,
                "non_error_samples": stats.non_error,
                "samples": stats.samples,
                "background_messages": stats.background,
                "legit_errors": legit.errors[:5],
                "legit_messages": dict(legit.other),
                "round_trip_ok": round_trip_ok,
                "round_trip": round_trip,
                "welcomed_fuzzer_still_attached": fuzzer_attached,
                "refused_lines": len(refused),
                "refused_ratio": ratio,
                "refused_samples": refused[:10],
                "dropped_lines": len(dropped),
                "traceback_lines": len(tracebacks),
                "traceback_samples": tracebacks[:5],
                "log_lines_total": len(lines),
                "rss_before_mb": rss_before,
                "rss_after_mb": rss_after,
                "alive": alive,
                "reconnects": stats.reconnects,
                "seed": seed,
                "stopped": stopped,
            },
        )
    ]
