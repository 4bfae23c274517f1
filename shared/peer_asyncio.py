"""AsyncPeer: PeerCore (shared/peer.py) on the running asyncio loop; the gateways' MainLink and the
asker's client are both this adapter plus what their role does with main's words.

A plain sync DEALER watched by the loop's reader on `zmq.FD`: receives drain in one callback,
sends never block. That descriptor is edge-triggered, so the adapter drains after every burst of
sends and on every tick as well (a missed edge costs one tick, never a hang). It owns the socket,
the connection file and the pid check; the core decides everything else.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import zmq

from shared.codec import encode
from shared.connection_file import ConnectionInfo, main_is_gone, read_connection_file
from shared.errors import ConnectionFileError, MainUnreachableError
from shared.messages import Body, Welcome
from shared.peer import AttachFailed, Effect, GaveUp, PeerCore, SocketWork, Welcomed, curve_options

logger = logging.getLogger(__name__)

_NOBLOCK = int(zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)


class AsyncPeer:
    """`on_effect` gets every effect that is not socket work (Welcomed, Lost, Pushed, Refused, ...).
    `attach()` raises `unreachable`; with `fail_on_retry` a failed retry fails it too (a gateway
    starts main then), else it waits until the core attaches or gives up."""

    def __init__(self, connection_path: Path, core: PeerCore, on_effect: Callable[[Effect], None], *,
                 unreachable: type[MainUnreachableError] = MainUnreachableError,
                 fail_on_retry: bool = True, close_linger_ms: int = 200, hwm: int = 10_000) -> None:
        self.connection_path = connection_path
        self.core = core
        self._on_effect = on_effect
        self._unreachable = unreachable
        self._fail_on_retry = fail_on_retry
        self._close_linger_ms = close_linger_ms
        self._hwm = hwm
        self._sock: zmq.Socket[bytes] | None = None
        self._reaches: tuple[str, object] | None = None  # endpoint and CURVE options of the socket
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._waiting: list[asyncio.Future[Welcome]] = []
        self._drain_soon = False
        self._work = SocketWork(self.send, self._connect, self._close_socket)

    @property
    def attached(self) -> bool:
        return self.core.attached

    async def attach(self) -> Welcome:
        """Attached to main (at once if it is); raises `unreachable` saying why not."""
        if self.core.attached and self.core.welcome is not None:
            return self.core.welcome
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a callback may outlive one `asyncio.run`
            self._close_socket(0)
            self._loop, self._ticker = loop, None
        future: asyncio.Future[Welcome] = loop.create_future()
        self._waiting.append(future)
        self._apply(self.core.attach(time.monotonic()))
        if self._ticker is None or self._ticker.done():
            self._ticker = loop.create_task(self._tick())
        try:
            return await future
        finally:
            if future in self._waiting:
                self._waiting.remove(future)

    def send(self, topic: str, body: Body) -> bool:
        return self.send_frames(encode(topic, body))

    def send_frames(self, frames: list[bytes]) -> bool:
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.send_multipart(frames, _NOBLOCK)
        except zmq.Again:
            logger.warning("dropped a %r to main: its queue is full", frames[0][:40])
            return False
        self.core.sent(time.monotonic())
        if self._loop is not None and not self._drain_soon:
            self._drain_soon = True  # one look after a burst of sends, not one per send
            self._loop.call_soon(self._drain)  # a send can consume the FD's edge
        return True

    def check_main(self) -> None:
        """A local main whose process is gone says no bye: lost now, not after its silence."""
        info = self.core.info
        if info is not None and self._sock is not None and main_is_gone(info):
            self._apply(self.core.lose(f"main (pid {info.pid}) has exited", time.monotonic()))

    def detach(self) -> None:
        """Bye (what is queued still leaves, within the linger), then idle until `attach`."""
        self._apply(self.core.detach(), self._close_linger_ms)

    def close(self) -> None:
        self._apply(self.core.close(), self._close_linger_ms)
        if self._ticker is not None and self._ticker is not asyncio.current_task():
            self._ticker.cancel()

    # ---- effects ---------------------------------------------------------------------------------

    def _apply(self, effects: list[Effect], linger_ms: int = 0) -> None:
        for effect in effects:
            if self._work.do(effect, linger_ms):
                continue
            match effect:
                case Welcomed(welcome):
                    self._settle(welcome)
                    self._on_effect(effect)
                case AttachFailed(retrying=True) if not self._fail_on_retry:
                    self._on_effect(effect)  # the next try may find main
                case AttachFailed(why) | GaveUp(why):
                    self._settle(self._unreachable(f"{why} ({self.connection_path})"))
                    self._on_effect(effect)
                case _:
                    self._on_effect(effect)

    def _settle(self, outcome: Welcome | MainUnreachableError) -> None:
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if future.done():
                continue
            if isinstance(outcome, Welcome):
                future.set_result(outcome)
            else:
                future.set_exception(outcome)

    def _connect(self) -> None:
        now = time.monotonic()
        try:
            info = read_connection_file(self.connection_path)
            if main_is_gone(info):
                raise ConnectionFileError(f"no main is running (stale connection file {self.connection_path}: "
                                          f"pid {info.pid} is gone)")
            options = curve_options(info, self.connection_path)
        except ConnectionFileError as exc:
            self._apply(self.core.connect_failed(str(exc), now))
            return
        if self._sock is None or self._reaches != (info.endpoint, options):
            self._open_socket(info, options)
        self._apply(self.core.connected(info, now))

    def _open_socket(self, info: ConnectionInfo, options: list[tuple[int, bytes]]) -> None:
        self._close_socket(0)
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        for option, number in ((zmq.LINGER, 0), (zmq.SNDHWM, self._hwm), (zmq.RCVHWM, self._hwm)):
            sock.setsockopt(option, number)
        for curve_option, key in options:
            sock.setsockopt(curve_option, key)
        sock.connect(info.endpoint)
        self._sock, self._reaches = sock, (info.endpoint, options)
        assert self._loop is not None
        self._loop.add_reader(_fd(sock), self._drain)

    def _close_socket(self, linger_ms: int) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(_fd(sock))
        sock.close(linger=linger_ms)

    def _drain(self) -> None:
        self._drain_soon = False
        while (sock := self._sock) is not None and cast(int, sock.getsockopt(_EVENTS)) & _POLLIN:
            try:
                frames = sock.recv_multipart(_NOBLOCK)
            except zmq.Again:
                break
            self._apply(self.core.feed(frames, time.monotonic()))

    async def _tick(self) -> None:
        while self.core.state not in ("idle", "closed"):
            await asyncio.sleep(self.core.timing.tick)
            self.check_main()
            self._apply(self.core.tick(time.monotonic()))
            self._drain()


def _fd(sock: zmq.Socket[bytes]) -> int:
    return cast(int, sock.getsockopt(zmq.FD))
