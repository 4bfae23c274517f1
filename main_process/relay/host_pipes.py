"""Host pipes (PROTOCOL.md §14, host pipes, shared/host_pipes.py): a local `serve` (one server, or every
server merged: server EVERY_SERVER) hands main the host's stdin and stdout, so the host's messages
reach main with no process in between.

`HostPipes` listens on a Unix socket beside main's (0600, in the private runtime directory) and
takes a serve's `Handover` once it checks the token, that the window is one of its host peers and
that the caller is this user. Each handed-over host is a `PipedHost`: its lines go to `Relay` as
a peer's `msgMcpRelay` would, the server's come back to its stdout, and a `RelayPump` does here
what serve's would (errors for open requests when the server's process ends, the handshake
replayed on the next message). The pump's watcher keeps serve told, so serve can take over
whenever main goes away:

    handed over ──host closed its stdin, or stopped reading its stdout──► over (serve exits)
        │  └──serve went away──────────► closed
        └──main stops──► back (serve relays on its own, replaying the handshake)

A host flooding its pipe is paused, never dropped: the broker's rate limiter, keyed per host.

The three descriptors serve sent are the `PipedHost`'s, closed once when it finishes; every
transport on one of them has a copy of its own, which it closes (shared/lines.py).
"""

import asyncio
import logging
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from main_process.relay.relay import MAX_SESSIONS, MAX_SESSIONS_PER_PEER, Relay
from main_process.wire.peers import Peer, RateLimiter
from shared import jsonrpc
from shared.descriptors import DescriptorBudget
from shared.host_pipes import Handover, decode_handover, receive_handover, record
from shared.lines import (
    LineSplitter,
    LineWriter,
    as_line,
    descriptor_copy,
    each_line,
    is_pipe_or_socket,
    transport_file,
)
from shared.relay_pump import RelayPump

logger = logging.getLogger(__name__)

HANDOVER_TIMEOUT_S: Final = 5.0
END_FLUSH_S: Final = 5.0  # at the end, what the host and serve are still owed may take this long to leave
MAX_WAITING_HANDOVERS: Final = 16  # connections that have not sent their handover yet
PAUSE_S: Final = 0.05  # a host over its rate reads nothing for this long


class HostPipes:
    def __init__(self, path: Path, token: str, host_peer: Callable[[str], Peer | None], relay: Relay) -> None:
        self.path = path
        self._token = token
        self._host_peer = host_peer
        self._relay = relay
        self._budget = DescriptorBudget.for_this_process()
        self._limiter = RateLimiter()
        self._listener: socket.socket | None = None
        self._waiting: dict[socket.socket, asyncio.TimerHandle] = {}
        self.hosts: set[PipedHost] = set()

    def start(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # 0600 from the first moment
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old_umask)
        listener.listen(16)
        listener.setblocking(False)
        self._listener = listener
        asyncio.get_running_loop().add_reader(listener.fileno(), self._accept)

    def _accept(self) -> None:
        assert self._listener is not None
        loop = asyncio.get_running_loop()
        while len(self._waiting) < MAX_WAITING_HANDOVERS and self._budget.room(8):
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                logger.warning("host pipes: could not accept a connection: %s", exc)
                return
            conn.setblocking(False)
            if _peer_uid(conn) != os.getuid():
                conn.close()
                continue
            self._waiting[conn] = loop.call_later(HANDOVER_TIMEOUT_S, self._give_up, conn)
            loop.add_reader(conn.fileno(), self._receive, conn)

    def _give_up(self, conn: socket.socket) -> None:
        self._drop_waiting(conn)
        conn.close()

    def _drop_waiting(self, conn: socket.socket) -> None:
        timer = self._waiting.pop(conn, None)
        if timer is not None:
            timer.cancel()
        asyncio.get_running_loop().remove_reader(conn.fileno())

    def _receive(self, conn: socket.socket) -> None:
        try:
            data, fds = receive_handover(conn)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            logger.info("host pipes: a handover failed: %s", exc)
            self._give_up(conn)
            return
        self._drop_waiting(conn)
        refusal = self._refusal(data, fds)
        if isinstance(refusal, str):
            for fd in fds:
                os.close(fd)
            logger.info("host pipes: refused a handover: %s", refusal)
            try:
                conn.send(record("refused", refusal))
            except OSError:
                pass
            conn.close()
            return
        handover, peer = refusal
        host = PipedHost(self, peer, handover, fds, conn)
        self.hosts.add(host)
        asyncio.ensure_future(host.start())

    def _refusal(self, data: bytes, fds: list[int]) -> str | tuple[Handover, Peer]:
        try:
            handover = decode_handover(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return f"not a handover: {exc}"
        if handover.token != self._token:
            return "the token does not match this main's connection file"
        peer = self._host_peer(handover.window)
        if peer is None or peer.role != "host":
            return "no host peer of this main has that window; say hello first"
        if len(fds) != 3 or not all(is_pipe_or_socket(fd) for fd in fds[:2]) or not _is_fifo(fds[2]):
            return "a handover carries the host's stdin and stdout (pipes or sockets) and a pipe for records"
        if len(self.hosts) >= MAX_SESSIONS:
            return f"main already holds {MAX_SESSIONS} hosts' pipes"
        if sum(1 for host in self.hosts if host.peer is peer) >= MAX_SESSIONS_PER_PEER:
            return f"this host peer already handed main {MAX_SESSIONS_PER_PEER} sessions' pipes"
        return handover, peer

    def pause(self, host: "PipedHost", body_bytes: int) -> bool:
        """True when `host` is over its rate: it reads nothing for PAUSE_S."""
        return not self._limiter.allow(id(host).to_bytes(8, "little"), body_bytes)

    def forget(self, host: "PipedHost") -> None:
        self.hosts.discard(host)
        self._limiter.forget(id(host).to_bytes(8, "little"))

    async def close(self) -> None:
        """main stops: every host's pipes go back to its serve."""
        if self._listener is not None:
            asyncio.get_running_loop().remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
        for conn in list(self._waiting):
            self._give_up(conn)
        for host in list(self.hosts):
            host.stop_reading()
        await asyncio.gather(*(host.hand_back("Elicitron's main is stopping") for host in list(self.hosts)))

    @property
    def relay(self) -> Relay:
        return self._relay


class _Control(asyncio.Protocol):
    """The socket to serve: `accepted`, `over`, `back`; its closing means serve went away."""

    def __init__(self, host: "PipedHost") -> None:
        self._host = host

    def data_received(self, data: bytes) -> None:
        pass  # serve says nothing after its handover

    def connection_lost(self, exc: Exception | None) -> None:
        self._host.serve_gone()


class _HostStdin(asyncio.Protocol):
    def __init__(self, host: "PipedHost") -> None:
        self._host = host

    def data_received(self, data: bytes) -> None:
        self._host.from_host(data)

    def eof_received(self) -> bool:
        self._host.host_closed()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._host.host_closed()


class PipedHost:
    """One host whose pipes main holds; also its pump's watcher and the relay's HostSide."""

    ends_with_peer = False

    def __init__(self, pipes: HostPipes, peer: Peer, handover: Handover, fds: list[int],
                 conn: socket.socket) -> None:
        self._pipes = pipes
        self.peer = peer
        self.handover = handover
        self._fds = fds
        self._stdin_fd, self._stdout_fd, self._records_fd = fds
        self._conn = conn
        self._control: asyncio.Transport | None = None
        self._records: asyncio.WriteTransport | None = None
        self._stdin: asyncio.ReadTransport | None = None
        self._out: LineWriter | None = None
        self._splitter = LineSplitter()
        self.pump = RelayPump(server=handover.server, session=handover.session, to_main=self._to_main,
                              to_host=self._to_host, online=True, watcher=self)
        self._relay = pipes.relay
        self._ended = False  # no more of the host's messages are taken
        self._finished = False  # every descriptor closed
        self._ending: asyncio.Task[None] | None = None  # (held: the loop keeps only weak references to tasks)
        self._held = False  # the server reads nothing for now: neither do we of the host

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            # Each transport gets a descriptor of its own and closes it (uvloop closes what it was
            # given whatever closefd says); the ones serve sent are closed by _finish alone.
            # A host that reads slower than its server writes: the server's output waits (backpressure).
            self._out = await LineWriter.open(
                self._stdout_fd, full=lambda full: self._relay.host_full(self.peer, self.handover.session, full))
            self._records, _ = await loop.connect_write_pipe(
                asyncio.Protocol, transport_file(descriptor_copy(self._records_fd), "wb"))
            self._control, _ = await loop.create_unix_connection(lambda: _Control(self), sock=self._conn)
            self._control.write(record("accepted"))
            self._stdin, _ = await loop.connect_read_pipe(
                lambda: _HostStdin(self), transport_file(descriptor_copy(self._stdin_fd), "rb"))
        except OSError as exc:
            logger.warning("host pipes: could not take %r's pipes: %s", self.peer.name, exc)
            self._finish()
            return
        if self._finished:  # serve went away while its stdin's transport was being made
            self._stdin.close()
            return
        self._out.gone.add_done_callback(lambda _: self.host_stopped_reading())  # (once everything is there to end)
        logger.info("holding the pipes of %r's session %s with %s", self.peer.name, self.handover.session,
                    self.handover.server)

    # ---- the host's stdin ---------------------------------------------------------------

    def from_host(self, chunk: bytes) -> None:
        if self._ended:
            return  # (the host stopped reading: what it still writes opens nothing)
        each_line(self._splitter, chunk, self.pump.from_host, self._to_host)
        if self._pipes.pause(self, len(chunk)) and self._stdin is not None:
            self._stdin.pause_reading()
            asyncio.get_running_loop().call_later(PAUSE_S, self._resume)

    def _resume(self) -> None:
        if self._stdin is not None and not self._ended and not self._held:
            self._stdin.resume_reading()

    def _to_main(self, raw: bytes, headers: dict[str, str] | None) -> str | None:
        self._relay.from_pipes(self.peer, self.handover.session, self.handover.server, raw, self)
        return None

    def _to_host(self, raw: bytes) -> None:
        if self._out is not None:
            self._out.write(as_line(raw))

    def host_closed(self) -> None:
        """EOF on the host's stdin: the session is over, as when it closes serve's."""
        self._over("the host closed it")

    def host_stopped_reading(self) -> None:
        """The host closed its end of its stdout: as over as EOF on its stdin (a host shutting
        down often closes that end first); what the session had in flight is cancelled with it."""
        self._over("the host stopped reading")

    def _over(self, why: str) -> None:
        if self._ended:
            return
        self._ended = True
        self.stop_reading()
        self._relay.end_pipes(self.peer, self.handover.session, why)
        self._ending = asyncio.ensure_future(self._end_with("over", why))

    def serve_gone(self) -> None:
        """Also while an end waits on a host that reads nothing: serve's going ends that wait."""
        if not self._finished:
            self._relay.end_pipes(self.peer, self.handover.session, "the host went away")
            self._finish()

    def stop_reading(self) -> None:
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.pause_reading()

    async def hand_back(self, why: str) -> None:
        if self._ended:
            return
        self._relay.end_pipes(self.peer, self.handover.session, why)
        self.pump.lost(why)  # what the host waits on gets its error now, as serve's pump would give it
        await self._end_with("back", self._splitter.leftover())

    async def _end_with(self, kind: str, value: str | bytes) -> None:
        self._ended = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + END_FLUSH_S
        if self._out is not None:
            try:  # a host that reads nothing more must not hold main's stop or the session's end
                await asyncio.wait_for(self._out.flush(), END_FLUSH_S)
            except TimeoutError:
                logger.info("host pipes: %r read nothing for %.0f s; ending its session", self.peer.name, END_FLUSH_S)
        records = self._records
        while records is not None and records.get_write_buffer_size() and not records.is_closing() \
                and loop.time() < deadline and not self._finished:
            await asyncio.sleep(0.01)  # (rare: the pipe was full) serve drains it every second; `back` comes after
        if self._finished:
            return
        if self._control is not None and not self._control.is_closing():
            self._control.write(record("over" if kind == "over" else "back", value))
        self._finish()

    def _finish(self) -> None:
        if self._finished:
            return
        self._ended = True
        self._finished = True
        self._pipes.forget(self)
        if self._stdin is not None:
            self._stdin.close()
        if self._records is not None:  # (what serve was owed no longer matters)
            self._records.abort()
        if self._out is not None:
            self._out.abort()
        if self._control is not None:
            self._control.close()
        else:
            self._conn.close()
        for fd in self._fds:
            os.close(fd)  # once, here alone: a second close could take another host's pipe (no EBADF is quiet)

    # ---- HostSide: what the relay has for the host ----------------------------------------

    def message(self, raw: bytes) -> None:
        self.pump.from_main(raw)

    def closed(self, why: str) -> None:
        """main ended the server's session (its process ended, or the session was refused)."""
        self.pump.lost(why)

    def hold_input(self, held: bool) -> None:
        self._held = held
        if held:
            self.stop_reading()
        else:
            self._resume()

    # ---- PumpWatcher: what serve would need to take over ------------------------------------

    def opened(self, request_id: jsonrpc.Id, method: str) -> None:
        if self._records is not None:
            self._records.write(record("open", request_id, method))

    def done(self, request_id: jsonrpc.Id) -> None:
        if self._records is not None:
            self._records.write(record("done", request_id))

    def handshake(self, raw: bytes) -> None:
        if self._records is not None:
            self._records.write(record("handshake", raw))


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[4:8], "little")


def _is_fifo(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False

