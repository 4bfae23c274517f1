"""MainSocket: the one DEALER to main under a PeerCore (shared/peer.py), the same for every adapter.

It carries out the core's socket effects: `connect` re-reads the connection file (main may have
restarted with a new token), keeps a socket that still reaches the same main or opens one with the
file's CURVE options, and tells the core; `send` never blocks; `drain` feeds the core what came in.
What differs stays with the adapter: how the descriptor is watched (`watch(fd)` after a socket
opens, `unwatch(fd)` before it closes: a QSocketNotifier, the asyncio reader, a poll loop), what
follows a send (`after_send`: `zmq.FD` is edge-triggered, a send can consume its edge) and what it
does with the core's answers (`handle`).
"""

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import zmq

from shared.codec import encode
from shared.connection_file import ConnectionInfo, main_is_gone, read_connection_file
from shared.errors import ConnectionFileError
from shared.messages import Body
from shared.peer import Effect, PeerCore, curve_options
from shared.zmq_calls import EVENTS, POLLIN, recv_frames, send_frames, zget

logger = logging.getLogger(__name__)

BYE_LINGER_MS = 500  # a bye (or a withdraw) queued as a peer closes still leaves within this


def unreachable_text(why: str, path: Path) -> str:
    """`why` no main was reached, naming the connection file (once)."""
    return why if str(path) in why else f"{why} ({path})"


class MainSocket:
    def __init__(self, path: Path, core: PeerCore, handle: Callable[[list[Effect]], None], *,
                 options: Sequence[tuple[int, int]] = ((zmq.LINGER, 0),), check_pid: bool = True,
                 watch: Callable[[int], None] | None = None, unwatch: Callable[[int], None] | None = None,
                 after_send: Callable[[], None] | None = None, alternates: Sequence[Path] = ()) -> None:
        self.path = path
        self.alternates = tuple(alternates)  # other mains' files, tried in turn when this one's main is gone
        self.core = core
        self.sock: zmq.Socket[bytes] | None = None
        self.problem: ConnectionFileError | None = None  # why the last connect found no file to use
        self._handle = handle
        self._options = options
        self._check_pid = check_pid  # a window does not: a local pid check says nothing of a stopped main
        self._watch, self._unwatch, self._after_send = watch, unwatch, after_send
        self._reaches: tuple[str, object] | None = None  # endpoint and CURVE options of the socket
        self._draining = False
        # With IMMEDIATE a send fails until the connection is up: that is expected, not news.
        self._again_level = logging.DEBUG if any(o == zmq.IMMEDIATE for o, _ in options) else logging.WARNING

    def connect(self) -> None:
        now = time.monotonic()
        try:
            info = self._read_live()
            options = curve_options(info, self.path)
            self.problem = None
        except ConnectionFileError as exc:
            self.problem = exc
            self._handle(self.core.connect_failed(str(exc), now))
            return
        if self.sock is None or self._reaches != (info.endpoint, options):
            try:
                self._open(info, options)
            except zmq.ZMQError as exc:
                logger.warning("cannot connect to %s: %s", info.endpoint, exc)
                self._handle(self.core.connect_failed(str(exc), now))
                return
        self._handle(self.core.connected(info, now))

    def _read_live(self) -> ConnectionInfo:
        """The connection file of a main that runs: this one's, else the first alternate's that
        is (which is then the one to use). Raises this file's ConnectionFileError when none is."""
        first: ConnectionFileError | None = None
        for path in (self.path, *[p for p in self.alternates if p != self.path]):
            try:
                info = read_connection_file(path)
                if self._check_pid and main_is_gone(info):
                    raise ConnectionFileError(f"no main is running (stale connection file {path}: "
                                              f"pid {info.pid} is gone)")
            except ConnectionFileError as exc:
                first = first or exc
                continue
            if path != self.path:
                logger.info("main of %s is gone; trying %s", self.path, path)
                self.path = path
            return info
        assert first is not None
        raise first

    def send(self, topic: str, body: Body) -> bool:
        return self.send_frames(encode(topic, body))

    def send_frames(self, frames: list[bytes]) -> bool:
        sock = self.sock
        if sock is None:
            return False
        try:
            send_frames(sock, frames)  # (pyzmq's send_multipart costs twice as much per message)
        except zmq.Again:
            logger.log(self._again_level, "%r not sent: no connection to main, or its queue is full",
                       frames[0][:40])
            return False
        except zmq.ZMQError as exc:
            logger.warning("%r not sent: %s", frames[0][:40], exc)
            return False
        self.core.sent(time.monotonic())
        if self._after_send is not None:
            self._after_send()
        return True

    def drain(self) -> None:
        if self._draining:  # something sent mid-drain; the outer loop keeps reading
            return
        self._draining = True
        try:
            while (sock := self.sock) is not None and zget(sock, EVENTS) & POLLIN:  # (edge-triggered FD)
                try:
                    frames = recv_frames(sock)
                except zmq.Again:
                    break
                self._handle(self.core.feed(frames, time.monotonic()))
        finally:
            self._draining = False

    def close(self, linger_ms: int = 0) -> None:
        sock, self.sock = self.sock, None
        if sock is None:
            return
        if self._unwatch is not None:
            self._unwatch(_fd(sock))
        sock.close(linger=linger_ms)

    def _open(self, info: ConnectionInfo, options: list[tuple[int, bytes]]) -> None:
        self.close()
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock, self._reaches = sock, (info.endpoint, options)
        settings: list[tuple[int, int | bytes]] = [*self._options, *options]  # CURVE: main allows paired keys
        for option, value in settings:
            sock.setsockopt(option, value)
        sock.connect(info.endpoint)
        if self._watch is not None:
            self._watch(_fd(sock))
        logger.debug("connecting to main at %s", info.endpoint)  # every retry: keep INFO quiet


def _fd(sock: zmq.Socket[bytes]) -> int:
    return cast(int, sock.getsockopt(zmq.FD))
