"""main's wire with no socket under it: the FrameSockets a test hands `Wire(sockets=...)`, so main's
core (attachments, the greeter, every topic's handler, the pending requests, liveness on a
SettableClock) is driven with plain frames and read back as plain values, as PeerCore is on the
peer side. Nothing here waits: a frame delivered is handled before `deliver` returns."""

import errno
from collections.abc import Callable
from typing import Any

import msgspec
import zmq

Receive = Callable[[list[bytes]], None]
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode


class PlainFrames:
    """Frames main sends, kept in order as (routing id, topic, body); frames a test delivers, handed
    to main's receiver at once. A routing id in `gone` is a peer ZeroMQ can no longer reach."""

    def __init__(self) -> None:
        self.draining = False
        self.sent: list[tuple[bytes, str, Any]] = []
        self.gone: set[bytes] = set()
        self._receive: Receive | None = None

    def bind(self) -> None:
        pass

    def start(self, receive: Receive) -> None:
        self._receive = receive

    def send(self, routing_id: bytes, frames: list[Any]) -> None:
        if routing_id in self.gone:
            raise zmq.ZMQError(errno.EHOSTUNREACH)
        topic, body = (frame.bytes if isinstance(frame, zmq.Frame) else bytes(frame) for frame in frames)
        self.sent.append((routing_id, topic.decode("ascii"), _decode(body)))

    def drain(self) -> None:
        pass

    def schedule_drain(self) -> None:
        pass

    def close(self) -> None:
        pass

    def deliver(self, routing_id: bytes, topic: str, body: Any) -> None:
        """A peer's message, as main's ROUTER reads it: [routing id, topic, msgpack body]."""
        self.deliver_raw([routing_id, topic.encode("ascii"), _encode(body)])

    def deliver_raw(self, frames: list[bytes]) -> None:
        assert self._receive is not None, "the broker has not started reading"
        self._receive(frames)

    def take(self, routing_id: bytes) -> list[tuple[str, Any]]:
        """What main sent that peer since the last take, in order (and forgets it)."""
        taken = [(topic, body) for to, topic, body in self.sent if to == routing_id]
        self.sent = [sent for sent in self.sent if sent[0] != routing_id]
        return taken
