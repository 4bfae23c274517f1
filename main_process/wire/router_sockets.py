"""The ROUTER sockets main binds, one per listener, read by the asyncio loop on their ZMQ_FD.

Plain (sync) sockets watched by the loop's reader: receives drain in one callback and sends never
block, which keeps a round trip close to raw pyzmq. A routing id here is the socket's index byte +
ZeroMQ's routing id, so ids from different sockets never clash. One drain handles at most
DRAIN_BUDGET messages, then yields to the loop, so a flooding peer cannot hold up heartbeats,
servers or other peers. A send can consume the FD's edge: whoever sends calls `schedule_drain`.
"""

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

import zmq

from main_process.log_limiter import RateLimitedLog, cut
from shared.zmq_calls import EVENTS, NOBLOCK, POLLIN, RCVMORE, SEND_MORE, zget, zrecv, zsend

logger = logging.getLogger(__name__)

ZAP_DOMAIN: Final = b"elicitron"  # tcp listeners authenticate CURVE clients in this ZAP domain
DRAIN_BUDGET: Final = 200  # messages per drain callback before the loop gets a turn

Receive = Callable[[list[bytes]], None]  # one message: [routing id, topic, body, ...]


class FrameSockets(Protocol):
    """What the rest of main's wire needs of its sockets: frames out, every message in (to the
    receiver given at `start`), and the drain a send may need. RouterSockets is main's; a test
    hands the wire a list-backed one (tests/kit/plain_frames.py) and drives the core with plain
    frames and a SettableClock, no socket and no wait."""

    draining: bool  # inside a drain: a send needs no drain of its own

    def bind(self) -> None: ...

    def start(self, receive: Receive) -> None: ...

    def send(self, routing_id: bytes, frames: list[Any]) -> None:
        """One message; raises zmq.ZMQError (EHOSTUNREACH: the peer is gone; EAGAIN: its queue is full)."""

    def drain(self) -> None: ...

    def schedule_drain(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Listener:
    """One endpoint main binds; tcp ones carry main's CURVE keypair (CURVE is mandatory there)."""

    endpoint: str
    curve_keypair: tuple[bytes, bytes] | None = None


class RouterSockets:
    """Frames in and out of main's ROUTER sockets; knows nothing of topics or peers."""

    def __init__(self, listeners: list[Listener], *, max_body_bytes: int, heartbeat_s: float,
                 peer_timeout_s: float) -> None:
        self.listeners = listeners
        self._loop: asyncio.AbstractEventLoop | None = None  # reading starts in start()
        self._receive: Receive = lambda frames: None
        self._complaints = RateLimitedLog(logger)
        self._drain_scheduled = False
        self.draining = False  # inside a drain: it looks at EVENTS again after every message
        self._socks = [_make_socket(listener, max_body_bytes, heartbeat_s, peer_timeout_s) for listener in listeners]

    def bind(self) -> None:
        for listener, sock in zip(self.listeners, self._socks, strict=True):
            sock.bind(listener.endpoint)
            if listener.endpoint.startswith("ipc://"):
                os.chmod(listener.endpoint.removeprefix("ipc://"), 0o600)

    def start(self, receive: Receive) -> None:
        """Read from now on, every message to `receive` (the receiver exists only once everything
        it dispatches to does, so it is given here rather than at construction)."""
        self._loop = asyncio.get_running_loop()
        self._receive = receive
        for sock in self._socks:
            self._loop.add_reader(sock.fileno(), self.drain)
        self.drain()

    def close(self) -> None:
        for sock in self._socks:
            if self._loop is not None:
                self._loop.remove_reader(sock.fileno())
            sock.close(linger=0)
        endpoint = self.listeners[0].endpoint
        if endpoint.startswith("ipc://"):
            try:
                os.unlink(endpoint.removeprefix("ipc://"))
            except FileNotFoundError:
                pass

    def send(self, routing_id: bytes, frames: list[Any]) -> None:
        """One message; raises zmq.ZMQError (EHOSTUNREACH: the peer is gone; EAGAIN: its queue is full)."""
        sock = self._socks[routing_id[0]]
        # Frame by frame with int flags: cheaper than send_multipart; ROUTER sends are atomic.
        zsend(sock, routing_id[1:], SEND_MORE)
        zsend(sock, frames[0], SEND_MORE)
        zsend(sock, frames[1], NOBLOCK)  # a zmq.Frame (broadcasts) is sent without a copy

    def drain(self) -> None:
        self._drain_scheduled = False
        self.draining = True
        try:
            left = self._drain_sockets(DRAIN_BUDGET)
        finally:
            self.draining = False
        if left == 0 and self._loop is not None:
            # Budget spent with messages still waiting: the FD's edge is gone, so come back ourselves.
            self._drain_scheduled = True
            self._loop.call_soon(self.drain)

    def _drain_sockets(self, budget: int) -> int:
        """Handle up to `budget` messages; returns the budget left (0: there may be more)."""
        for index, sock in enumerate(self._socks):
            tag = bytes([index])
            # ZMQ_FD is edge-triggered: read until EVENTS says there is nothing left.
            while not sock.closed and zget(sock, EVENTS) & POLLIN:
                if budget == 0:
                    return 0
                try:
                    # A ROUTER puts the routing id before every message, so a second frame follows.
                    frames = [zrecv(sock, NOBLOCK), zrecv(sock, NOBLOCK)]
                    while zget(sock, RCVMORE):
                        frames.append(zrecv(sock, NOBLOCK))
                except zmq.Again:
                    break
                budget -= 1
                frames[0] = tag + frames[0]
                try:
                    self._receive(frames)
                # top-level handler of one frame: a bug must not stall the drain
                except Exception:  # noqa: BLE001
                    self._complaints.exception(("handler", frames[1][:40].hex()), "failed handling a frame %r from %s",
                                               cut(frames[1]), frames[0].hex())
        return max(budget, 1)

    def schedule_drain(self) -> None:
        # A send can consume the FD's edge; look again once the current callback is done. Inside
        # drain there is no need: it checks EVENTS again after every message it handles.
        if self._drain_scheduled or self.draining or self._loop is None:
            return
        for sock in self._socks:
            if zget(sock, EVENTS) & POLLIN:
                self._drain_scheduled = True
                self._loop.call_soon(self.drain)
                return


def _make_socket(listener: Listener, max_body_bytes: int, heartbeat_s: float, peer_timeout_s: float) -> zmq.Socket[bytes]:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # else sends to a gone peer vanish silently
    sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a reconnecting window keeps its routing id
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.HEARTBEAT_IVL, int(heartbeat_s * 1000))
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, int(peer_timeout_s * 1000))
    # Hard cap far above the contract limit: beyond it zmq drops the connection outright.
    sock.setsockopt(zmq.MAXMSGSIZE, max_body_bytes * 16)
    sock.setsockopt(zmq.SNDHWM, 10_000)
    sock.setsockopt(zmq.RCVHWM, 10_000)
    if listener.curve_keypair is not None:
        public, secret = listener.curve_keypair
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
        sock.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN)  # the ZAP handler checks the allow-list
    return sock
