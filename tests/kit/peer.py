"""WirePeer: one DEALER speaking wire contract v1 with plain dicts, written from DESIGN.md alone.

It deliberately uses raw pyzmq + msgpack and none of the project's packages, so a test with it
shows that a third-party peer built from the contract works. Two ways to read:

- blocking: `expect(wanted)` returns the oldest unclaimed message `wanted(topic, body)` accepts,
  heartbeating main while it waits; what it skips stays available to later calls;
- non-blocking: `receive()` returns everything waiting now, for a caller that polls many peers
  in one loop (and then calls `heartbeat_if_due()` itself).
"""

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import zmq
import zmq.utils.monitor

from kit import contract, wire

HEARTBEAT_AFTER_S = 0.8  # the contract: a peer silent for 1 s sends heartbeat
Wanted = Callable[[str, Any], bool]


class WirePeer:
    def __init__(self, endpoint: str, token: str, *, name: str = "wire-peer", role: str = "renderer",
                 curve: tuple[str, str, str] | None = None, context: zmq.Context[Any] | None = None,
                 strict: bool = False, companions: "list[WirePeer] | None" = None) -> None:
        """`curve` = (server key, client public key, client secret key), z85, for tcp endpoints.
        `strict`: an `error` from main while expect() waits raises at once (for scripts that
        expect none) instead of waiting among the unclaimed messages.
        `companions`: the other peers a test holds on the same main; they heartbeat while this one
        waits, so a host whose call is queued is not let go while the test reads the window."""
        self.endpoint = endpoint
        self.token = token
        self.name = name
        self.role = role
        self.strict = strict
        self.window = str(uuid.uuid4())
        self.sock: zmq.Socket[bytes] = (context or zmq.Context.instance()).socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDTIMEO, 5000)  # a DEALER with no live connection blocks on send
        self.sock.setsockopt(zmq.RCVHWM, 0)  # never drop what main sends while we are busy
        if curve is not None:
            server_key, public, secret = (key.encode("ascii") for key in curve)
            self.sock.setsockopt(zmq.CURVE_SERVERKEY, server_key)
            self.sock.setsockopt(zmq.CURVE_PUBLICKEY, public)
            self.sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
        self._monitor: zmq.Socket[bytes] | None = None
        if curve is not None:  # before connect, so no handshake event is missed
            self._monitor = self.sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH
                                                         | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        self.sock.connect(endpoint)
        self.last_sent = 0.0
        self.welcomed = False
        self.received: list[tuple[str, Any]] = []  # everything read, heartbeats excluded
        self._unclaimed: list[tuple[str, Any]] = []  # read but not yet returned by expect()
        self.companions: list[WirePeer] = companions if companions is not None else []

    # ---- sending -------------------------------------------------------------------------

    def send(self, topic: str, body: Any) -> None:
        self.send_raw(wire.frames(topic, body))

    def send_raw(self, frames: list[bytes]) -> None:
        self.sock.send_multipart(frames)
        self.last_sent = time.monotonic()

    def send_hello(self, *, token: str | None = None, protocol: int = wire.PROTOCOL) -> None:
        self.send_raw(wire.hello_frames(token or self.token, self.window, self.name, self.role, protocol))

    def hello(self, *, token: str | None = None, protocol: int = wire.PROTOCOL,
              timeout_s: float = 15.0) -> dict[str, Any]:
        """Say hello and wait for main's answer: `{"topic": "welcome" | "error", **body}`."""
        self.send_hello(token=token, protocol=protocol)
        topic, body = self._expect(lambda t, b: t in (contract.WELCOME, contract.ERROR), timeout_s, strict=False)
        return {"topic": topic, **body}

    def heartbeat_if_due(self, now: float | None = None) -> None:
        if self.sock.closed:
            return
        if (now if now is not None else time.monotonic()) - self.last_sent > HEARTBEAT_AFTER_S:
            self.send(contract.HEARTBEAT, {})

    def _heartbeat_all(self, now: float) -> None:
        self.heartbeat_if_due(now)
        for peer in self.companions:
            if peer is not self and peer.welcomed:
                peer.heartbeat_if_due(now)

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any], channel: str | None = None) -> str:
        """Send msgMcpCallTool; its reply comes on the returned channel."""
        channel = channel or f"call-{uuid.uuid4()}"
        self.send(contract.CALL_TOOL, {"server": server, "tool": tool, "arguments": arguments,
                                       "responseChannel": channel})
        return channel

    def answer(self, invoke: dict[str, Any], action: str, content: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"action": action}
        if content is not None:
            body["content"] = content
        self.send(invoke["responseChannel"], body)

    def status(self, timeout_s: float = 15.0) -> dict[str, Any]:
        """Extension msgStatus (what `elicitron status` shows): servers, peers, pending."""
        channel = f"status-{uuid.uuid4()}"
        self.send(contract.STATUS, {"responseChannel": channel})
        return self.expect_topic(channel, timeout_s)["status"]

    # ---- receiving -----------------------------------------------------------------------

    def _read(self, flags: int = 0) -> tuple[str, Any]:
        topic, body = wire.decode_frames(self.sock.recv_multipart(flags))
        if topic == contract.WELCOME:
            self.welcomed = True
        if topic != contract.HEARTBEAT:
            self.received.append((topic, body))
        return topic, body

    def receive(self) -> list[tuple[str, Any]]:
        """Everything waiting on the socket now (main's heartbeats included), without blocking;
        a message that is not two frames comes as ("<bad-frames>", {"count": n})."""
        got: list[tuple[str, Any]] = []
        while not self.sock.closed:
            try:
                got.append(self._read(zmq.NOBLOCK))
            except zmq.Again:
                break
        return got

    def expect(self, wanted: Wanted, timeout_s: float = 15.0) -> tuple[str, Any]:
        """The oldest unclaimed message for which `wanted(topic, body)` holds; heartbeats main while
        waiting. Messages skipped on the way stay available to later calls."""
        return self._expect(wanted, timeout_s, strict=self.strict)

    def _expect(self, wanted: Wanted, timeout_s: float, *, strict: bool) -> tuple[str, Any]:
        for index, (topic, body) in enumerate(self._unclaimed):
            if wanted(topic, body):
                del self._unclaimed[index]
                return topic, body
        deadline = time.monotonic() + timeout_s
        while (now := time.monotonic()) < deadline:
            self._heartbeat_all(now)
            if not self.sock.poll(200):
                continue
            topic, body = self._read()
            assert topic != "<bad-frames>", f"main sent {body['count']} frames; the contract says 2"
            if topic == contract.HEARTBEAT:
                continue
            if wanted(topic, body):
                return topic, body
            if strict and topic == contract.ERROR:
                raise RuntimeError(f"{self.name}: main refused something: {body}")
            self._unclaimed.append((topic, body))
        raise AssertionError(f"{self.name}: nothing wanted arrived within {timeout_s} s; got {self.received[-5:]}")

    def pump(self) -> None:
        """Heartbeat main if due and keep what has arrived for later expect() calls, without waiting:
        for a test that waits in another loop (Qt's), so main does not take this peer for gone."""
        self._heartbeat_all(time.monotonic())
        while not self.sock.closed and self.sock.poll(0):
            topic, body = self._read()
            if topic != contract.HEARTBEAT:
                self._unclaimed.append((topic, body))

    def keep_alive_until(self, done: Callable[[], bool], timeout_s: float = 30.0) -> None:
        """Heartbeat main (and keep what arrives for later expect() calls) until `done()` holds:
        for a test waiting on something else, e.g. a CLI process, while this peer stays attached."""
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"{self.name}: what was waited for did not happen in {timeout_s} s"
            self._heartbeat_all(time.monotonic())
            if self.sock.poll(100):
                topic, body = self._read()
                if topic != contract.HEARTBEAT:
                    self._unclaimed.append((topic, body))

    def expect_topic(self, topic: str, timeout_s: float = 15.0) -> Any:
        return self.expect(lambda t, b: t == topic, timeout_s)[1]

    def expect_error(self, topic: str | None = None, timeout_s: float = 10.0) -> dict[str, Any]:
        return self.expect(lambda t, b: t == contract.ERROR and (topic is None or b.get("topic") == topic),
                           timeout_s)[1]

    def handshake_refused(self, timeout_s: float = 10.0) -> bool:
        """For a CURVE peer: True once main refused its key in the handshake, False if the
        handshake succeeded or nothing happened within `timeout_s`."""
        assert self._monitor is not None, "only a CURVE peer has a handshake to watch"
        if not self._monitor.poll(int(timeout_s * 1000)):
            return False
        event = zmq.utils.monitor.recv_monitor_message(self._monitor)
        return event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH

    # ---- leaving -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.sock.closed

    def close(self, *, bye: bool = True) -> None:
        """Detach cleanly (`bye`) or vanish as a crashed window would."""
        if self.sock.closed:
            return
        if self._monitor is not None:
            self.sock.disable_monitor()
            self._monitor.close(linger=0)
        if bye:
            try:
                self.send(contract.BYE, {})
            except zmq.ZMQError:
                pass  # never connected (e.g. refused by CURVE): nothing to say bye to
        self.sock.close(linger=100 if bye else 0)


@contextlib.contextmanager
def kept_attached(*peers: "WirePeer", sockets: "threading.Lock | None" = None) -> Iterator[None]:
    """The peers heartbeat from a thread while the test does something long that reads none of
    them (a browser's steps, hypothesis making its next batch): main lets a peer silent for 5 s go.
    The test leaves them alone until the block ends, or holds `sockets` while it uses them (a ZeroMQ
    socket is one thread's at a time)."""
    done = threading.Event()
    lock = sockets or threading.Lock()

    def beat() -> None:
        while not done.wait(HEARTBEAT_AFTER_S / 2):
            with lock:
                for peer in peers:
                    peer.heartbeat_if_due()

    thread = threading.Thread(target=beat, name=f"heartbeat {', '.join(peer.name for peer in peers)}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
