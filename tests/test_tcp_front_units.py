"""The tcp front's parts in one process: the handshake reader, the descriptor budget, the caps
(real sockets on loopback, a real unix socket behind), the --listen parser."""

import asyncio
import socket
from pathlib import Path

import pytest

from main_process.wire.tcp_front import FrontLimits, TcpFront, parse_tcp_listen
from main_process.wire.zmtp_handshake import GREETING_BYTES, ServerHandshake
from shared.descriptors import DescriptorBudget, open_count, raise_soft_limit
from shared.errors import ConfigError


def greeting() -> bytes:
    signature = b"\xff" + b"\0" * 8 + b"\x7f"
    return signature + b"\x03\x01" + b"CURVE".ljust(20, b"\0") + b"\x01" + b"\0" * 31


def command(name: bytes, data: bytes = b"", *, long: bool = False) -> bytes:
    body = bytes([len(name)]) + name + data
    if long:
        return b"\x06" + len(body).to_bytes(8, "big") + body
    return b"\x04" + bytes([len(body)]) + body


@pytest.mark.parametrize("last, stage", [(b"READY", "ready"), (b"ERROR", "refused")])
def test_the_handshake_ends_with_the_servers_ready_or_error_however_the_bytes_are_cut(last: bytes,
                                                                                       stage: str) -> None:
    stream = greeting() + command(b"WELCOME", b"w" * 300, long=True) + command(last, b"x" * 20)
    for cut in range(1, len(stream)):
        watch = ServerHandshake()
        assert watch.feed(stream[:cut]) == "handshake"
        assert watch.feed(stream[cut:]) == stage
    assert len(greeting()) == GREETING_BYTES


def test_a_stream_that_is_not_zmtp_3_is_refused() -> None:
    assert ServerHandshake().feed(b"HTTP/1.1 200 OK\r\n" + b"\0" * 64) == "refused"


def test_the_budget_keeps_its_reserve() -> None:
    opened = open_count()
    assert opened is not None and opened > 0
    assert DescriptorBudget(limit=opened + 10, reserve=5).room(5)
    assert not DescriptorBudget(limit=opened + 10, reserve=5).room(6)
    assert raise_soft_limit() >= opened


def test_listen_addresses() -> None:
    assert parse_tcp_listen("tcp://127.0.0.1:7390") == ("127.0.0.1", 7390)
    assert parse_tcp_listen("tcp://*:7390") == ("0.0.0.0", 7390)
    assert parse_tcp_listen("tcp://[::1]:7390") == ("::1", 7390)
    for bad in ("ipc:///tmp/x", "tcp://7390", "tcp://host:port", "tcp://h:70000"):
        with pytest.raises(ConfigError, match="tcp://HOST:PORT"):
            parse_tcp_listen(bad)


def test_connections_over_the_caps_are_refused_and_silent_ones_closed(tmp_path: Path) -> None:
    async def scenario() -> None:
        backend = str(tmp_path / "b.sock")
        greeted: list[asyncio.StreamWriter] = []

        async def zmtp_like(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(greeting())  # a server that greets and then waits, as libzmq does
            greeted.append(writer)
            await reader.read()

        server = await asyncio.start_unix_server(zmtp_like, backend)
        front = TcpFront("127.0.0.1", 0, backend, limits=FrontLimits(per_source=2, total=3, handshake_s=0.5))
        front.start()
        loop = asyncio.get_running_loop()

        async def connect(source: str) -> socket.socket:
            sock = socket.socket()
            sock.bind((source, 0))
            sock.setblocking(False)
            await loop.sock_connect(sock, ("127.0.0.1", front.port))
            return sock

        async def first_bytes(sock: socket.socket) -> bytes:
            return await asyncio.wait_for(loop.sock_recv(sock, 1024), 5)

        held = [await connect("127.0.0.1"), await connect("127.0.0.1")]
        over_address = await connect("127.0.0.1")
        held.append(await connect("127.0.0.2"))
        over_total = await connect("127.0.0.3")
        assert [len(await first_bytes(sock)) for sock in held] == [GREETING_BYTES] * 3  # piped through
        assert await first_bytes(over_address) == b"" and await first_bytes(over_total) == b""
        status = front.status()
        assert (status.open, status.refused_by) == (3, {"per-address limit": 1, "total limit": 1})
        # None of them sends a handshake: each is closed at the deadline, and their slots are free.
        assert [await first_bytes(sock) for sock in held] == [b""] * 3
        status = front.status()
        assert (status.open, status.dropped_by) == (0, {"no handshake in time": 3})
        for sock in [*held, over_address, over_total]:
            sock.close()
        await front.close()
        server.close()

    asyncio.run(scenario())
