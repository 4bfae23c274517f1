"""A peer written only from wire contract v1 (DESIGN.md section 3): raw pyzmq + msgpack dicts.

It deliberately does not use the project's `shared` package, so a test with it shows that a
third-party peer built from the contract alone works.
"""

import time
import uuid
from typing import Any

import msgspec
import zmq

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


class WirePeer:
    def __init__(self, endpoint: str, token: str, *, name: str = "wire-peer", role: str = "renderer",
                 curve: tuple[str, str, str] | None = None) -> None:
        """`curve` = (server key, client public key, client secret key), z85, for tcp endpoints."""
        self.endpoint = endpoint
        self.token = token
        self.name = name
        self.role = role
        self.window = str(uuid.uuid4())
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDTIMEO, 5000)  # a DEALER with no live connection blocks on send
        if curve is not None:
            server_key, public, secret = (k.encode("ascii") for k in curve)
            self.sock.setsockopt(zmq.CURVE_SERVERKEY, server_key)
            self.sock.setsockopt(zmq.CURVE_PUBLICKEY, public)
            self.sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
        self.sock.connect(endpoint)
        self._last_sent = 0.0
        self.received: list[tuple[str, Any]] = []  # everything seen, heartbeats excluded
        self._unclaimed: list[tuple[str, Any]] = []  # seen but not yet returned by expect()

    def send(self, topic: str, body: Any) -> None:
        self.send_raw([topic.encode("ascii"), _encoder.encode(body)])

    def send_raw(self, frames: list[bytes]) -> None:
        self.sock.send_multipart(frames)
        self._last_sent = time.monotonic()

    def hello(self, *, token: str | None = None, protocol: int = 1) -> dict[str, Any]:
        self.send("hello", {"protocol": protocol, "token": token or self.token, "window": self.window,
                            "name": self.name, "role": self.role})
        topic, body = self.expect(lambda t, b: t in ("welcome", "error"))
        return {"topic": topic, **body}

    def expect(self, wanted: Any, timeout_s: float = 15.0) -> tuple[str, Any]:
        """The oldest unclaimed message for which `wanted(topic, body)` holds; heartbeats main while
        waiting. Messages skipped on the way stay available to later calls."""
        for index, (topic, body) in enumerate(self._unclaimed):
            if wanted(topic, body):
                del self._unclaimed[index]
                return topic, body
        deadline = time.monotonic() + timeout_s
        while (now := time.monotonic()) < deadline:
            if now - self._last_sent > 0.8:
                self.send("heartbeat", {})
            if not self.sock.poll(200):
                continue
            frames = self.sock.recv_multipart()
            assert len(frames) == 2, f"main sent {len(frames)} frames; the contract says 2"
            topic, body = frames[0].decode("ascii"), _decoder.decode(frames[1])
            if topic == "heartbeat":
                continue
            self.received.append((topic, body))
            if wanted(topic, body):
                return topic, body
            self._unclaimed.append((topic, body))
        raise AssertionError(f"nothing wanted arrived within {timeout_s} s; got {self.received[-5:]}")

    def expect_topic(self, topic: str, timeout_s: float = 15.0) -> Any:
        return self.expect(lambda t, b: t == topic, timeout_s)[1]

    def expect_error(self, topic: str | None = None, timeout_s: float = 10.0) -> dict[str, Any]:
        return self.expect(lambda t, b: t == "error" and (topic is None or b.get("topic") == topic), timeout_s)[1]

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        channel = f"call-{uuid.uuid4()}"
        self.send("msgMcpCallTool", {"server": server, "tool": tool, "arguments": arguments,
                                     "responseChannel": channel})
        return channel

    def answer(self, invoke: dict[str, Any], action: str, content: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"action": action}
        if content is not None:
            body["content"] = content
        self.send(invoke["responseChannel"], body)

    def close(self) -> None:
        if not self.sock.closed:
            try:
                self.send("bye", {})
            except zmq.Again:
                pass  # never connected (e.g. refused by CURVE): nothing to say bye to
            self.sock.close(linger=100)
