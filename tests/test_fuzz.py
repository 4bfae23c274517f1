"""Bad input (issue 5): malformed frames thrown at a real main's ROUTER, and what survives them.

Every frame sent here has an expected answer worked out from wire contract v1 alone (the kit's
`expectation` oracle): which `error` codes the contract allows, whether the error names the
frame's topic, and whether main may stay silent (a valid heartbeat, a throttled bad hello). After
each batch a sentinel frame with a unique unknown topic is sent; main answers frames of one
connection in order, so every reply before the sentinel's `unknown-topic` belongs to the batch and
is matched to its frame in order.

Nothing here imports the project's own packages: the peers are raw pyzmq + msgpack (`WirePeer`), and
the oracle's body shapes are written from the contract's tables (kit/contract.py).

ZeroMQ cannot carry a message of zero frames; a single empty frame is the nearest a DEALER can send,
so "frame counts 0..5" is covered as 1..5 frames with empty frames among them.
"""

import contextlib
import json
import os
import random
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import zmq
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from kit import wire
from kit.contract import BACKGROUND_TOPICS, CONTRACT_CODES, MAX_BODY, PEER_TOPICS, RESULT_PREFIX
from kit.demo import demo_stdio_entry
from kit.env import short_tmp_dir
from kit.frames import FrameGen, deep_body
from kit.main import RunningMain, start_main, write_config
from kit.oracle import Expect, expectation, is_rate_limited
from kit.peer import WirePeer, kept_attached

BOOKING_VALUES = {"name": "Zoë \"after\" the barrage 🍽", "party_size": 12, "outdoor": True, "budget": 0.1,
                  "cuisine": "japanese"}

_encode = wire.encode
_decode = wire.decode


@dataclass
class Shot:
    attached: bool  # sent by the welcomed fuzzing peer (else by the never-welcomed one)
    kind: str
    frames: list[bytes]
    expect: Expect

    def describe(self) -> str:
        shown = [f[:60] + (b"...(%d bytes)" % len(f) if len(f) > 60 else b"") for f in self.frames]
        return f"{self.kind} from {'welcomed' if self.attached else 'unwelcomed'} peer: {shown}"


def match_replies(shots: list[Shot], replies: list[tuple[str, Any]]) -> None:
    """Every reply is an error answering its shot in order; only `silent` shots may go unanswered
    (any shot, once main says it dropped frames of this peer: `rate-limited`)."""
    for topic, body in replies:
        assert topic == "error", f"main answered a bad frame with {topic!r}: {body}"
        assert body.get("code") in CONTRACT_CODES, f"error code outside the contract: {body}"
    bodies = [body for _, body in replies if not is_rate_limited(body)]
    dropped = len(bodies) < len(replies)
    n, m = len(shots), len(bodies)
    # ok[i][j]: shots[i:] can account for bodies[j:] (a subsequence match; silent shots may be skipped)
    ok = [[False] * (m + 1) for _ in range(n + 1)]
    ok[n][m] = True
    for i in range(n - 1, -1, -1):
        for j in range(m, -1, -1):
            answered = j < m and shots[i].expect.accepts(bodies[j]) and ok[i + 1][j + 1]
            ok[i][j] = answered or ((shots[i].expect.silent or dropped) and ok[i + 1][j])
    if ok[0][0]:
        return
    i = j = 0
    while i < n and (j < m and shots[i].expect.accepts(bodies[j]) or shots[i].expect.silent or dropped):
        if j < m and shots[i].expect.accepts(bodies[j]):
            j += 1
        i += 1
    got = bodies[j] if j < m else "no more replies"
    raise AssertionError(f"{len(shots)} frames, {m} replies; frame {i} "
                         f"({shots[i].describe() if i < n else 'none left'}) expected "
                         f"{shots[i].expect if i < n else 'nothing'}, got {got}")


# ---- firing frames and collecting what comes back --------------------------------------------


@dataclass
class Barrage:
    """A welcomed and an unwelcomed fuzzing peer, and the peers that must stay alive meanwhile."""

    welcomed: WirePeer
    unwelcomed: WirePeer
    keep_alive: list[WirePeer]
    frames_sent: int = 0
    codes_seen: dict[str, int] = field(default_factory=dict)
    _sockets: threading.Lock = field(default_factory=threading.Lock)

    def attached_between_fires(self) -> contextlib.AbstractContextManager[None]:
        """The welcomed fuzzer and the kept-alive peers heartbeat from a thread while the test makes
        its next batch (hypothesis can take longer than main's 5 s of silence on a loaded machine, and
        main then rightly dropped the fuzzer); `fire` holds the sockets meanwhile."""
        return kept_attached(self.welcomed, *self.keep_alive, sockets=self._sockets)

    def fire(self, shots: list[Shot], timeout_s: float = 15.0) -> None:
        with self._sockets:
            self._fire(shots, timeout_s)

    def _fire(self, shots: list[Shot], timeout_s: float) -> None:
        for peer in self.keep_alive:
            peer.send("heartbeat", {})
        for shot in shots:
            (self.welcomed if shot.attached else self.unwelcomed).send_raw(shot.frames)
        self.frames_sent += len(shots)
        # A heartbeat keeps the welcomed fuzzer attached however long the run (not needed: any frame counts).
        self.welcomed.send("heartbeat", {})
        sentinel = f"zz-sentinel-{uuid.uuid4()}"
        for peer in (self.welcomed, self.unwelcomed):
            peer.send(sentinel, {})
        replies = collect_until(self.welcomed, self.unwelcomed, sentinel, timeout_s)
        welcomed_replies = [r for r in replies[0] if r[0] not in BACKGROUND_TOPICS]
        for topic, body in welcomed_replies + replies[1]:
            if topic == "error":
                self.codes_seen[body.get("code")] = self.codes_seen.get(body.get("code"), 0) + 1
        match_replies([s for s in shots if s.attached], welcomed_replies)
        match_replies([s for s in shots if not s.attached], replies[1])


def collect_until(first: WirePeer, second: WirePeer, sentinel: str,
                  timeout_s: float) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """What each peer received (heartbeats dropped) before main's refusal of its `sentinel` frame."""
    peers = (first, second)
    got: tuple[list[tuple[str, Any]], list[tuple[str, Any]]] = ([], [])
    done = [False, False]
    poller = zmq.Poller()
    for peer in peers:
        poller.register(peer.sock, zmq.POLLIN)
    deadline = time.monotonic() + timeout_s
    while not all(done):
        left = deadline - time.monotonic()
        assert left > 0, f"main did not answer the sentinel within {timeout_s} s; got {got}"
        ready = dict(poller.poll(int(left * 1000) + 1))
        for index, peer in enumerate(peers):
            if peer.sock not in ready:
                continue
            while peer.sock.poll(0):
                frames = peer.sock.recv_multipart()
                assert len(frames) == 2, f"main sent {len(frames)} frames; the contract says 2"
                topic, body = frames[0].decode("ascii"), _decode(frames[1])
                if topic == "heartbeat":
                    continue
                if topic == "error" and body.get("topic") == sentinel:
                    assert body["code"] == "unknown-topic", body
                    done[index] = True
                    continue
                assert not done[index], f"{topic} {body} arrived after the sentinel's answer"
                got[index].append((topic, body))
    return got


def refused_lines(main: RunningMain, since: int = 0) -> int:
    """Lines of main's log after offset `since` that report a refusal. Call it once main answered
    the frames in question: main logs a refusal before it answers, so the lines are in by then."""
    return sum(1 for line in main.stderr.text()[since:].splitlines() if "refused" in line)


def tool_text(reply: dict[str, Any]) -> Any:
    assert "result" in reply, reply
    return json.loads(reply["result"]["content"][0]["text"])


def settled(peer: WirePeer) -> WirePeer:
    """A renderer that just attached gets `peers` right after its welcome (main's coalesced update
    100 ms later skips it: its list is current). Take it, so it cannot land inside a barrage."""
    peer.expect_topic("peers")
    return peer


def answered_channel(window: WirePeer, *others: WirePeer) -> str:
    """A request answered once: later results on its channel are `already-answered`."""
    call = window.call_tool("demo", "book_table", {"restaurant": "before the barrage"})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    window.answer(invoke, "decline")
    assert tool_text(window.expect_topic(call)) == {"action": "decline", "content": None}
    for other in (window, *others):  # claim every renderer's invoke and dismiss of it
        if other is not window:
            assert other.expect_topic("msgElicitationTransferInvoke") == invoke
        dismiss = other.expect_topic("msgElicitationTransferDismiss")
        assert dismiss["responseChannel"] == invoke["responseChannel"]
    return invoke["responseChannel"]


def assert_round_trip_after_barrage(main: RunningMain, legit: WirePeer, fuzzer: WirePeer) -> WirePeer:
    """The window attached before the barrage gets the next request and its answer reaches the
    server exactly; the welcomed fuzzer is still attached (it gets the invoke too, and its
    heartbeat is not refused); a new window attaches and finds the request in its welcome."""
    sentinel = f"zz-after-{uuid.uuid4()}"
    fuzzer.send("heartbeat", {})
    fuzzer.send(sentinel, {})
    before = fuzzer.expect(lambda t, b: t == "error", timeout_s=10)[1]
    assert before["topic"] == sentinel, f"the fuzzing peer's heartbeat was refused: {before}"

    call = legit.call_tool("demo", "book_table", {"restaurant": "after the barrage"})
    invoke = legit.expect_topic("msgElicitationTransferInvoke")
    assert invoke["request"]["params"]["message"] == "Book a table at after the barrage?"
    assert fuzzer.expect_topic("msgElicitationTransferInvoke") == invoke
    late = main.peer(name="late-window", hello=False)
    welcome = late.hello()
    assert welcome["topic"] == "welcome"
    assert [p["responseChannel"] for p in welcome["pending"]] == [invoke["responseChannel"]]

    legit.answer(invoke, "accept", BOOKING_VALUES)
    dismiss = {"responseChannel": invoke["responseChannel"], "reason": "answered", "by": legit.window}
    for peer in (legit, fuzzer, late):
        got = peer.expect_topic("msgElicitationTransferDismiss")
        assert got == dismiss, f"{peer.name} got {got}, expected {dismiss}"
    assert tool_text(legit.expect_topic(call)) == {"action": "accept", "content": BOOKING_VALUES}
    assert main.proc.poll() is None
    return late


# ---- (a) hypothesis ---------------------------------------------------------------------------

_ascii = st.characters(codec="ascii")
_scalars = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
            | st.text(max_size=12) | st.binary(max_size=12))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=8) | st.integers(-3, 3), inner, max_size=4),
                       max_leaves=10)
_unknown_topics = st.text(_ascii, max_size=250).filter(lambda t: t not in PEER_TOPICS
                                                        and not t.startswith(RESULT_PREFIX))
_FIELDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "hello": {"protocol": st.sampled_from([1, 0, 2, -1, 2**64 - 1]) | _values,
              "token": st.text("0123456789abcdef", max_size=64) | _values,
              "window": st.uuids().map(str) | _values, "name": st.text(max_size=10) | _values,
              "role": st.sampled_from(["renderer", "controller", "x"])},
    "msgMcpCallTool": {"server": st.sampled_from(["demo", "nope"]) | _values,
                       "tool": st.sampled_from(["book_table", "echo"]) | _values,
                       "responseChannel": st.sampled_from(["reply", "error", "heartbeat"]) | _values,
                       "arguments": st.dictionaries(st.text(max_size=5), _values, max_size=2) | _values},
    "msgMcpRequest": {"server": st.sampled_from(["demo", "nope"]) | _values,
                      "method": st.sampled_from(["tools/list", "prompts/get", "tools/call"]) | _values,
                      "responseChannel": st.just("reply") | _values,
                      "params": st.dictionaries(st.text(max_size=5), _values, max_size=2) | _values},
    "msgServerControl": {"server": st.just("demo") | _values,
                         "action": st.sampled_from(["stop", "restart", "x"]),
                         "responseChannel": st.just("reply") | _values},
    "msgServerPolicy": {"server": st.just("demo") | _values, "declineAll": st.booleans() | _values},
    "msgStatus": {"responseChannel": st.just("reply") | _values},
    "msgReload": {"responseChannel": st.just("reply") | _values},
    "result": {"action": st.sampled_from(["accept", "decline", "cancel", "maybe", ""]) | _values,
               "content": st.dictionaries(st.text(max_size=10), _values, max_size=3) | _values},
}


def _near_valid(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Maps with the contract's keys (each maybe present) holding right or wrong values."""
    return st.fixed_dictionaries({}, optional={**fields, "extra": _values})


def _result_topics(answered: Sequence[str]) -> st.SearchStrategy[str]:
    return (st.uuids().map(lambda u: RESULT_PREFIX + str(u)) | st.sampled_from(list(answered))
            | st.text(_ascii, max_size=40).map(RESULT_PREFIX.__add__))


@st.composite
def shots(draw: st.DrawFn, answered: Sequence[str]) -> Shot:
    attached = draw(st.booleans())
    kind = draw(st.sampled_from(["count", "garbage", "shape", "near", "forged", "unknown", "oversized",
                                 "deep", "bad-topic"]))
    known = st.sampled_from(PEER_TOPICS) | _result_topics(answered)
    if kind == "count":
        frames = draw(st.lists(st.binary(max_size=40), min_size=1, max_size=5).filter(lambda f: len(f) != 2))
    elif kind == "garbage":
        frames = [draw(known).encode(), draw(st.binary(max_size=200))]
    elif kind == "shape":
        frames = [draw(known).encode(), _encode(draw(_values))]
    elif kind == "near":
        topic = draw(st.sampled_from([*_FIELDS]))
        body = draw(_near_valid(_FIELDS[topic]))
        if topic == "result":
            topic = draw(_result_topics(answered))
        frames = [topic.encode(), _encode(body)]
    elif kind == "forged":
        body = {"action": draw(st.sampled_from(["accept", "decline", "cancel"]))}
        if draw(st.booleans()):
            body["content"] = draw(st.dictionaries(st.text(max_size=10), _values, max_size=3))
        frames = [draw(_result_topics(answered)).encode(), _encode(body)]
    elif kind == "unknown":
        frames = [draw(_unknown_topics).encode(), _encode(draw(_values))]
    elif kind == "oversized":
        size = draw(st.integers(MAX_BODY - 2, MAX_BODY + 4096))
        topic = draw(known | _unknown_topics.filter(bool).map(lambda t: t[:200]))
        frames = [topic.encode(), b"\x80" + b"\xc0" * (size - 1)]
    elif kind == "deep":
        depth = draw(st.integers(1, 10) | st.integers(10, 200_000))
        form = draw(st.sampled_from(["arrays", "maps", "content"]))
        topic = draw(st.sampled_from(["heartbeat", "hello", "msgMcpCallTool"]) | _result_topics(answered))
        frames = [topic.encode(), deep_body(depth, form)]
    else:  # bad-topic: not ASCII, or nothing that could be one
        frames = [draw(st.binary(min_size=1, max_size=30).filter(lambda b: not b.isascii())), b"\x80"]
    expect = expectation(frames, attached=attached, answered=frozenset(answered))
    if expect is None:
        reject()  # the contract asks nothing of this frame
    return Shot(attached, kind, frames, expect)


def test_hypothesis_barrage_leaves_main_serving(demo_main: RunningMain) -> None:
    """Malformed frames from a welcomed and an unwelcomed peer get the contract's errors, and
    afterwards the window attached before the barrage still works end to end."""
    legit = demo_main.peer(name="legit-window")
    welcomed = settled(demo_main.peer(name="fuzz-welcomed"))
    unwelcomed = demo_main.peer(name="fuzz-unwelcomed", hello=False)
    old = [answered_channel(legit, welcomed)]
    barrage = Barrage(welcomed, unwelcomed, keep_alive=[legit])

    examples = int(os.environ.get("ELICITRON_FUZZ_EXAMPLES", "300"))

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(st.lists(shots(old), min_size=1, max_size=12))
    def barrage_holds(batch: list[Shot]) -> None:
        barrage.fire(batch)

    with barrage.attached_between_fires():
        barrage_holds()
    print(f"hypothesis barrage: {barrage.frames_sent} frames, errors by code {barrage.codes_seen}")
    assert barrage.codes_seen.keys() <= CONTRACT_CODES
    assert {"bad-body", "unknown-topic", "not-attached"} <= barrage.codes_seen.keys(), barrage.codes_seen
    assert_round_trip_after_barrage(demo_main, legit, welcomed)
    lines = refused_lines(demo_main)
    assert lines * 5 < barrage.frames_sent, f"{lines} refusals logged for {barrage.frames_sent} frames"


# ---- (b) a raw-frame fuzzer ---------------------------------------------------------------------

def fire_raw(barrage: Barrage, frames_of: FrameGen, rng: random.Random, count: int, old: list[str],
             seed: int) -> None:
    """`count` raw frames in batches of 250, each with its expected answer."""
    batch: list[Shot] = []
    made = 0
    while made < count:
        attached = rng.random() < 0.6
        kind, frames = frames_of.oversized() if made % 500 == 250 else frames_of.frames()
        expect = expectation(frames, attached=attached, answered=frozenset(old))
        if expect is None:
            continue
        batch.append(Shot(attached, kind, frames, expect))
        made += 1
        if len(batch) == 250 or made == count:
            try:
                barrage.fire(batch)
            except AssertionError as exc:
                raise AssertionError(f"seed {seed} (ELICITRON_FUZZ_SEED): {exc}") from None
            batch = []


def test_raw_frame_fuzzer_5000_frames_and_log_rate_limit(demo_main: RunningMain) -> None:
    seed = int(os.environ.get("ELICITRON_FUZZ_SEED", "20250105"))
    count = int(os.environ.get("ELICITRON_FUZZ_FRAMES", "5000"))
    rng = random.Random(seed)
    legit = demo_main.peer(name="legit-window")
    welcomed = settled(demo_main.peer(name="raw-welcomed"))
    unwelcomed = demo_main.peer(name="raw-unwelcomed", hello=False)
    old = [answered_channel(legit, welcomed)]
    frames_of = FrameGen(rng, old)
    barrage = Barrage(welcomed, unwelcomed, keep_alive=[legit])
    with barrage.attached_between_fires():
        fire_raw(barrage, frames_of, rng, count, old, seed)
    assert barrage.frames_sent == count
    assert {"bad-body", "unknown-topic", "not-attached", "unknown-channel", "already-answered",
            "too-large"} <= barrage.codes_seen.keys(), barrage.codes_seen
    assert_round_trip_after_barrage(demo_main, legit, welcomed)
    lines = refused_lines(demo_main)
    refusals = sum(barrage.codes_seen.values())
    print(f"raw fuzzer (seed {seed}): {count} frames, {refusals} refusals {barrage.codes_seen}, "
          f"{lines} refusal lines in main's log")
    assert refusals > 3000
    # One line per kind of complaint per peer per 10 s, not one per frame.
    assert lines <= 60 and lines * 50 < refusals, f"{lines} refusal lines logged for {refusals} refusals"


# ---- (c) forged results --------------------------------------------------------------------------


def test_forged_results_from_a_peer_never_sent_the_request_never_reach_the_server(
        demo_main: RunningMain) -> None:
    window = demo_main.peer(name="the-window")
    controller = demo_main.peer(name="forger", role="controller")  # attached, but never sent invokes
    stranger = demo_main.peer(name="stranger", hello=False)  # never welcomed
    call = controller.call_tool("demo", "book_table", {"restaurant": "forgery"})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    channel = invoke["responseChannel"]
    valid = {"name": "Mallory", "party_size": 1}
    rng = random.Random(7)

    forgeries = [("accept", valid), ("decline", None), ("cancel", None),
                 ("accept", {"name": "", "party_size": 99})]
    forgeries += [(rng.choice(["accept", "decline", "cancel"]),
                   {"name": f"forged-{i}", "party_size": 1 + i % 12}) for i in range(200)]
    for action, content in forgeries:
        controller.answer(invoke, action, content)
        stranger.answer(invoke, action, content)
    controller.send(channel, {"action": "accept", "content": 5})  # malformed: refused before it is read
    controller.send("zz-end", {})
    stranger.send("zz-end", {})
    got = collect_until(controller, stranger, "zz-end", 15)
    controller_errors = [b for t, b in got[0] if t == "error"]
    assert [e["code"] for e in controller_errors] == ["not-recipient"] * (len(forgeries) + 1)
    assert all(e["topic"] == channel for e in controller_errors)
    assert [b["code"] for t, b in got[1]] == ["not-attached"] * len(forgeries)
    assert all(t != "msgElicitationTransferDismiss" for t, _ in got[0])
    window.send(channel, {"action": "accept", "content": 5})  # malformed, from the recipient
    assert window.expect_error(channel)["code"] == "bad-body"

    # Still pending: the one window it was sent to answers, and only that reaches the server.
    real = {"name": "Ada", "party_size": 3, "cuisine": "mexican"}
    window.answer(invoke, "accept", real)
    dismiss = window.expect_topic("msgElicitationTransferDismiss")
    assert dismiss == {"responseChannel": channel, "reason": "answered", "by": window.window}
    assert tool_text(controller.expect_topic(call)) == {"action": "accept", "content": real}
    controller.answer(invoke, "accept", valid)
    assert controller.expect_error(channel)["code"] == "already-answered"


# ---- what the contract promises and main does not do (yet) ----------------------------------------
# These share one main (each uses its own peers): it saves a few seconds of start-up per test.


@pytest.fixture(scope="module")
def shared_main(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMain]:
    runtime = short_tmp_dir()
    config = write_config(tmp_path_factory.mktemp("fuzz") / "mcp.json", {"demo": demo_stdio_entry()})
    running = start_main(config, runtime)
    try:
        running.wait_server_ready("demo")
        yield running
    finally:
        running.stop()
        shutil.rmtree(runtime, ignore_errors=True)


def _still_attached(peer: WirePeer) -> bool:
    sentinel = f"zz-alive-{uuid.uuid4()}"
    peer.send("heartbeat", {})
    peer.send(sentinel, {})
    error = peer.expect(lambda t, b: t == "error" and b.get("topic") in ("heartbeat", sentinel), 10)[1]
    return error["topic"] == sentinel


def test_a_refused_hello_does_not_detach_a_welcomed_peer(shared_main: RunningMain) -> None:
    peer = shared_main.peer(name="re-hello")
    peer.send_hello(token="00" * 32)
    assert peer.expect_error("hello")["code"] == "bad-token"
    assert _still_attached(peer)


def test_a_frame_over_the_hard_cap_drops_only_that_connection(shared_main: RunningMain) -> None:
    """Documented exception (README): bodies over 16 x the limit never reach main's memory; zmq
    drops that connection. main stays up, and the peer can attach again."""
    peer = shared_main.peer(name="huge")
    peer.send_raw([b"heartbeat", b"\x80" + b"\x00" * (17 << 20)])
    shared_main.wait_peer("huge", attached=False, timeout_s=15)
    assert shared_main.proc.poll() is None
    assert peer.hello()["topic"] == "welcome"


def test_a_topic_cannot_forge_lines_in_mains_log(shared_main: RunningMain) -> None:
    peer = shared_main.peer(name="injector")
    peer.send_raw([b"x\n2099-01-01 00:00:00,000 INFO main_process.wire.broker: FORGED attached renderer", b"\x80"])
    assert peer.expect_error()["code"] == "unknown-topic"
    text = shared_main.stderr.text()  # main logged the refusal before it answered
    assert not [line for line in text.splitlines() if line.startswith("2099-")]


def test_log_rate_limit_holds_for_a_peer_that_reconnects_per_frame(shared_main: RunningMain) -> None:
    info = shared_main.info
    since = len(shared_main.stderr.text())
    frames = 300
    for i in range(frames):
        sock = WirePeer(info["endpoint"], "00" * 32, name=f"flood-{i}")
        sock.send_hello()  # its token is "00" * 32
        assert sock.expect_error("hello")["code"] == "bad-token"
        sock.sock.close(linger=0)
    lines = refused_lines(shared_main, since)
    assert lines * 10 < frames, f"{lines} refusal lines logged for {frames} stale hellos"
