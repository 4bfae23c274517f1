"""AsyncPeer: PeerCore (shared/peer.py) on the running asyncio loop; the gateways' MainLink and the
asker's client are both this adapter plus what their role does with main's words.

A plain sync DEALER watched by the loop's reader on `zmq.FD`: receives drain in one callback,
sends never block. That descriptor is edge-triggered, so the adapter drains after every burst of
sends and on every tick as well (a missed edge costs one tick, never a hang). It owns the loop's
reader, the pid check and the ticks; shared/peer_socket.py runs the socket, the core decides the rest.
"""

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import zmq

from shared.connection_file import main_is_gone
from shared.errors import MainUnreachableError
from shared.messages import Body, ChannelReply, Welcome
from shared.peer import AttachFailed, Effect, GaveUp, PeerCore, Pushed, SocketWork, Welcomed
from shared.peer_requests import Answer
from shared.peer_socket import BYE_LINGER_MS, MainSocket, unreachable_text


class AsyncPeer:
    """`on_effect` gets every effect that is not socket work (Welcomed, Lost, Pushed, Refused, ...).
    `attach()` raises `unreachable`; with `fail_on_retry` a failed retry fails it too (a gateway
    starts main then), else it waits until the core attaches or gives up."""

    def __init__(self, connection_path: Path, core: PeerCore, on_effect: Callable[[Effect], None], *,
                 unreachable: type[MainUnreachableError] = MainUnreachableError,
                 fail_on_retry: bool = True, close_linger_ms: int = BYE_LINGER_MS, hwm: int = 10_000,
                 alternates: Sequence[Path] = ()) -> None:
        self.connection_path = connection_path
        self.core = core
        self._on_effect = on_effect
        self._unreachable = unreachable
        self._fail_on_retry = fail_on_retry
        self._close_linger_ms = close_linger_ms
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._waiting: list[asyncio.Future[Welcome]] = []
        self._drain_soon = False
        self._pid_checked = 0.0  # monotonic time of the last look at main's pid from the ticker
        self._socket = MainSocket(connection_path, core, self._apply,
                                  options=((zmq.LINGER, 0), (zmq.SNDHWM, hwm), (zmq.RCVHWM, hwm)),
                                  watch=self._watch, unwatch=self._unwatch, after_send=self._drain_later,
                                  alternates=alternates)
        self._work = SocketWork(self.send, self._socket.connect, self._socket.close)

    @property
    def attached(self) -> bool:
        return self.core.attached

    async def attach(self) -> Welcome:
        """Attached to main (at once if it is); raises `unreachable` saying why not."""
        if self.core.attached and self.core.welcome is not None:
            return self.core.welcome
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a callback may outlive one `asyncio.run`
            self._socket.close()
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
        return self._socket.send(topic, body)

    def send_frames(self, frames: list[bytes]) -> bool:
        return self._socket.send_frames(frames)

    async def request(self, frames: list[bytes], channel: str, timeout_s: float) -> ChannelReply:
        """Send `frames`, a request answered on `channel`; raises `unreachable` (main gone, or
        silent for `timeout_s`)."""
        future: asyncio.Future[ChannelReply] = asyncio.get_running_loop().create_future()
        self.core.expect(channel, Answer(lambda answer: _settle(future, answer),
                                         lambda why: _settle(future, self._unreachable(why))))
        try:
            self.send_frames(frames)
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise self._unreachable(f"main gave no answer within {timeout_s:.0f} s") from None
        finally:
            self.core.forget(channel)

    def check_main(self) -> None:
        """A local main whose process is gone says no bye: lost now, not after its silence."""
        info = self.core.info
        if info is not None and self._socket.sock is not None and main_is_gone(info):
            self._apply(self.core.lose(f"main (pid {info.pid}) has exited", time.monotonic()))

    async def main_ended(self, within_s: float) -> None:
        """Wait (at most `within_s`) until a local main's process has ended, then `check_main`: a
        killed process closes its sockets before its pid is gone, and a link checked in between
        would go on sending into the void (and fail the next request as lost)."""
        info = self.core.info
        pidfd_open = getattr(os, "pidfd_open", None)  # (Linux; elsewhere the ticks notice)
        if info is not None and pidfd_open is not None and info.endpoint.startswith("ipc://"):
            try:
                pidfd = pidfd_open(info.pid)
            except OSError:  # gone already (ProcessLookupError), or not ours to watch
                pidfd = None
            if pidfd is not None:
                try:
                    await _readable(pidfd, within_s)
                finally:
                    os.close(pidfd)
        self.check_main()

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
            if type(effect) is Pushed:  # most of the traffic (every relayed message): no socket work
                self._on_effect(effect)
                continue
            if self._work.do(effect, linger_ms):
                continue
            match effect:
                case Welcomed(welcome):
                    self._settle_attaching(welcome)
                    self._on_effect(effect)
                case AttachFailed(retrying=True) if not self._fail_on_retry:
                    self._on_effect(effect)  # the next try may find main
                case AttachFailed(why) | GaveUp(why):
                    self._settle_attaching(self._unreachable(unreachable_text(why, self.connection_path)))
                    self._on_effect(effect)
                case _:
                    self._on_effect(effect)

    def _settle_attaching(self, outcome: Welcome | MainUnreachableError) -> None:
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            _settle(future, outcome)

    def _watch(self, fd: int) -> None:
        assert self._loop is not None
        self._loop.add_reader(fd, self._drain)

    def _unwatch(self, fd: int) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(fd)

    def _drain_later(self) -> None:
        if self._loop is not None and not self._drain_soon:
            self._drain_soon = True  # one look after a burst of sends, not one per send
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_soon = False
        self._socket.drain()

    async def _tick(self) -> None:
        while self.core.state not in ("idle", "closed"):
            await asyncio.sleep(self.core.timing.tick)
            now = time.monotonic()
            if now - self._pid_checked >= self.core.timing.main_pid_check:  # a file read: not every tick
                self._pid_checked = now
                self.check_main()
            # What main sent while this loop was busy (a slow import, a starved CPU) is read before
            # its silence is judged: main's heartbeats may be waiting in our own socket.
            self._drain()
            self._apply(self.core.tick(now))


def _settle[T](future: asyncio.Future[T], outcome: T | MainUnreachableError) -> None:
    if future.done():
        return
    if isinstance(outcome, MainUnreachableError):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


async def _readable(fd: int, within_s: float) -> None:
    """Until `fd` is readable (a pidfd: its process ended), at most `within_s`."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not ready.done():
            ready.set_result(None)
    loop.add_reader(fd, settle)
    try:
        await asyncio.wait_for(ready, within_s)
    except TimeoutError:
        pass
    finally:
        loop.remove_reader(fd)
