"""A peer written from wire contract v1 alone: a DEALER, `[topic, msgpack body]` frames, no project code.

Non-blocking: the driver polls every peer's socket in one loop and calls `receive()` when readable.
"""

import time
import uuid
from typing import Any

import msgspec
import zmq

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()

HEARTBEAT_AFTER_S = 0.8  # the contract: a peer silent for 1 s sends heartbeat


class Peer:
    def __init__(self, ctx: zmq.Context[Any], endpoint: str, token: str, *, name: str, role: str) -> None:
        self.name = name
        self.role = role
        self.token = token
        self.window = str(uuid.uuid4())
        self.sock: zmq.Socket[bytes] = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.last_sent = 0.0
        self.welcomed = False
        self.closed = False
        self.welcome: dict[str, Any] | None = None

    def send(self, topic: str, body: Any) -> None:
        self.sock.send_multipart([topic.encode("ascii"), _encoder.encode(body)], zmq.NOBLOCK)
        self.last_sent = time.monotonic()

    def hello(self) -> None:
        self.send("hello", {"protocol": 1, "token": self.token, "window": self.window, "name": self.name,
                            "role": self.role})

    def heartbeat_if_due(self, now: float) -> None:
        if not self.closed and now - self.last_sent > HEARTBEAT_AFTER_S:
            self.send("heartbeat", {})

    def receive(self) -> list[tuple[str, Any]]:
        """Everything waiting on the socket (main's heartbeats included), without blocking."""
        got: list[tuple[str, Any]] = []
        while not self.closed:
            try:
                frames = self.sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if len(frames) != 2:
                got.append(("<bad-frames>", {"count": len(frames)}))
                continue
            got.append((frames[0].decode("ascii", errors="replace"), _decoder.decode(frames[1])))
        return got

    def close(self, *, bye: bool) -> None:
        """Detach cleanly (`bye`) or vanish as a crashed window would."""
        if self.closed:
            return
        if bye:
            self.send("bye", {})
            self.sock.close(linger=200)
        else:
            self.sock.close(linger=0)
        self.closed = True
