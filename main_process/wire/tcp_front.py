"""main's tcp listener for remote windows (`--listen tcp://HOST:PORT`), in front of libzmq.

libzmq has no cap on the connections a listener takes, and aborts the process when an accept
gets EMFILE: before any CURVE handshake, ~1,100 idle TCP connections from anyone who can reach the
port took main down. So libzmq never sees the public port. This front accepts there, with a cap
per source address and in total, and only while the process keeps its descriptor reserve
(shared/descriptors.py); each connection it takes is piped, bytes unread, to main's CURVE ROUTER on
a private ipc endpoint (0600, beside main's own), so CURVE stays end to end. A connection whose
handshake is not over within HANDSHAKE_S, or that sends more than HANDSHAKE_BYTES before it is,
is closed (zmtp_handshake.py reads how far it got from main's side). After the handshake, libzmq's
heartbeats close a silent connection, and the front closes the other half.

Refused and dropped connections are counted (`status()`, shown by `elicitron status`) and logged
at most once per interval per reason; none of it is ever fatal.
"""

import asyncio
import errno
import logging
import socket
from collections import Counter
from dataclasses import dataclass
from typing import Final, cast

from main_process.log_limiter import RateLimitedLog
from main_process.wire.zmtp_handshake import ServerHandshake
from shared.descriptors import DescriptorBudget
from shared.errors import ConfigError
from shared.messages import ListenerStatus

logger = logging.getLogger(__name__)

ACCEPT_BATCH: Final = 64  # accepts per loop turn: a flood cannot hold the loop
ACCEPT_PAUSE_S: Final = 1.0  # after an accept failed for want of descriptors
DESCRIPTORS_PER_CONNECTION: Final = 3  # the tcp socket, the pipe to the ROUTER, libzmq's end of it
_OUT_OF_DESCRIPTORS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


@dataclass(frozen=True)
class FrontLimits:
    per_source: int = 16  # connections from one address (a NAT'd office shares one)
    total: int = 128  # remote windows are a person's few other machines
    handshake_s: float = 10.0  # CURVE takes milliseconds; a slow link gets seconds
    handshake_bytes: int = 16 * 1024  # a client's greeting, HELLO and INITIATE are well under 1 KB


def parse_tcp_listen(value: str) -> tuple[str, int]:
    """`tcp://HOST:PORT` (HOST an address or name, `*` for every address, [v6] bracketed) as
    (host, port), or ConfigError saying what is wrong."""
    rest = value.removeprefix("tcp://")
    host, _, port = rest.rpartition(":")
    if not value.startswith("tcp://") or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--listen {value}: expected tcp://HOST:PORT, e.g. tcp://192.168.1.5:7390 "
                          "(ipc is always on)")
    host = host.strip("[]")
    return ("0.0.0.0" if host == "*" else host), int(port)


class TcpFront:
    def __init__(self, host: str, port: int, backend_path: str, *, limits: FrontLimits = FrontLimits(),
                 budget: DescriptorBudget | None = None, label: str = "remote windows") -> None:
        self.host, self.port = host, port
        self.address = f"tcp://{host}:{port}"  # the port the system chose, once started
        self.label = label
        self.backend_path = backend_path
        self._limits = limits
        self._budget = budget or DescriptorBudget.for_this_process()
        # Never more connections than the descriptors beyond the reserve can carry.
        self._total = max(1, min(limits.total, self._budget.usable // DESCRIPTORS_PER_CONNECTION))
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: set[_Connection] = set()
        self._per_source: Counter[str] = Counter()
        self._refused: Counter[str] = Counter()
        self._dropped: Counter[str] = Counter()
        self._paused: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._complaints = RateLimitedLog(logger)

    def start(self) -> None:
        """Listen (OSError if the address cannot be bound) and accept from the running loop."""
        self._loop = asyncio.get_running_loop()
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.port = int(sock.getsockname()[1])  # port 0: the one the system chose
        self.address = f"tcp://{self.host if ':' not in self.host else f'[{self.host}]'}:{self.port}"
        self._loop.add_reader(sock.fileno(), self._accept_ready)
        logger.info("remote windows: listening on %s (at most %d connections, %d per address)", self.address,
                    self._total, self._limits.per_source)

    def status(self) -> ListenerStatus:
        return ListenerStatus(name=self.label, address=self.address, open=len(self._connections),
                              refused=sum(self._refused.values()), refused_by=dict(self._refused),
                              dropped=sum(self._dropped.values()), dropped_by=dict(self._dropped))

    async def close(self) -> None:
        if self._paused is not None:
            self._paused.cancel()
        if self._sock is not None and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        for task in list(self._tasks):
            task.cancel()
        for connection in list(self._connections):
            connection.close()

    # ---- accepting -------------------------------------------------------------------------

    def _accept_ready(self) -> None:
        assert self._sock is not None and self._loop is not None
        for _ in range(ACCEPT_BATCH):
            try:
                client, peer_address = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_DESCRIPTORS:
                    self._refuse("out of descriptors", "?")
                    self._pause_accepting()
                    return
                continue  # e.g. ECONNABORTED: that one is gone, the next may be fine
            source = str(peer_address[0])
            why = self._refusal(source)
            if why is not None:
                client.close()
                self._refuse(why, source)
                continue
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as libzmq sets its own
            connection = _Connection(self, source)
            self._connections.add(connection)
            self._per_source[source] += 1
            task = self._loop.create_task(connection.open(client, self.backend_path))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _refusal(self, source: str) -> str | None:
        if self._per_source[source] >= self._limits.per_source:
            return "per-address limit"
        if len(self._connections) >= self._total:
            return "total limit"
        if not self._budget.room(DESCRIPTORS_PER_CONNECTION):
            return "out of descriptors"
        return None

    def _refuse(self, why: str, source: str) -> None:
        self._refused[why] += 1
        self._complaints.warning(("tcp refused", why), "%s: refused a connection from %s (%s; %d refused so far)",
                                 self.address, source, why, sum(self._refused.values()))

    def _pause_accepting(self) -> None:
        assert self._sock is not None and self._loop is not None
        self._loop.remove_reader(self._sock.fileno())
        self._paused = self._loop.call_later(ACCEPT_PAUSE_S, self._resume_accepting)

    def _resume_accepting(self) -> None:
        self._paused = None
        if self._sock is not None and self._loop is not None:
            self._loop.add_reader(self._sock.fileno(), self._accept_ready)

    # ---- what connections report -------------------------------------------------------------

    def dropped(self, connection: "_Connection", why: str) -> None:
        self._dropped[why] += 1
        self._complaints.warning(("tcp dropped", why), "%s: closed a connection from %s (%s; %d closed so far)",
                                 self.address, connection.source, why, sum(self._dropped.values()))

    def forget(self, connection: "_Connection") -> None:
        if connection in self._connections:
            self._connections.discard(connection)
            self._per_source[connection.source] -= 1
            if self._per_source[connection.source] <= 0:
                del self._per_source[connection.source]

    @property
    def limits(self) -> FrontLimits:
        return self._limits


class _Connection:
    """One remote window's connection: its tcp half, the pipe to the ROUTER, and its handshake."""

    def __init__(self, front: TcpFront, source: str) -> None:
        self.front = front
        self.source = source
        self.client = _Half(self)
        self.server = _Half(self)
        self._handshake = ServerHandshake()
        self._client_bytes = 0
        self._deadline: asyncio.TimerHandle | None = None
        self._closed = False

    async def open(self, client: socket.socket, backend_path: str) -> None:
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self.front.limits.handshake_s, self._handshake_timed_out)
        try:
            await loop.create_unix_connection(lambda: self.server, backend_path)
            if self._closed:
                client.close()
                return
            await loop.connect_accepted_socket(lambda: self.client, client)
        except OSError as exc:
            client.close()
            self.front.dropped(self, f"main's CURVE socket refused it: {exc.strerror or exc}")
            self.close()
        except asyncio.CancelledError:  # the front is closing
            client.close()
            self.close()
            raise

    def received(self, half: "_Half", data: bytes) -> None:
        if half is self.client:
            if self._handshake.stage == "handshake":
                self._client_bytes += len(data)
                if self._client_bytes > self.front.limits.handshake_bytes:
                    self.front.dropped(self, "too much before the handshake ended")
                    self.close()
                    return
            self.server.write(data)
            return
        self.client.write(data)
        if self._handshake.stage == "handshake":
            stage = self._handshake.feed(data)
            if stage != "handshake" and self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            if stage == "refused":
                self.close()  # main's ERROR (e.g. a key not paired) reaches the client first

    def _handshake_timed_out(self) -> None:
        self._deadline = None
        self.front.dropped(self, "no handshake in time")
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._deadline is not None:
            self._deadline.cancel()
        self.client.close()
        self.server.close()
        self.front.forget(self)


class _Half(asyncio.Protocol):
    """One side of the pipe; what it receives goes to the other side, with the other's flow control."""

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection
        self.transport: asyncio.Transport | None = None
        self._early: list[bytes] = []  # what the other side sent before this one was connected
        self._closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's do not subclass asyncio's
        transport = self.transport
        if self._closing:
            transport.close()
            return
        for chunk in self._early:
            transport.write(chunk)
        self._early.clear()

    def data_received(self, data: bytes) -> None:
        self._connection.received(self, data)

    def eof_received(self) -> bool:
        self._connection.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._connection.close()

    def pause_writing(self) -> None:
        other = self._other()
        if other.transport is not None:
            other.transport.pause_reading()

    def resume_writing(self) -> None:
        other = self._other()
        if other.transport is not None and not other.transport.is_closing():
            other.transport.resume_reading()

    def write(self, data: bytes) -> None:
        if self.transport is None:
            self._early.append(data)
        elif not self.transport.is_closing():
            self.transport.write(data)

    def close(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.close()  # what was written still goes out

    def _other(self) -> "_Half":
        connection = self._connection
        return connection.server if self is connection.client else connection.client
