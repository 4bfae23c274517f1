"""The floor under the gateway figure: the relay's process topology with nothing in it but bytes.

    python gateway_floor.py main PATH   a Unix socket at PATH; a serve that connects hands it its
                                        stdin and stdout (SCM_RIGHTS), and the demo server is
                                        started for it; lines both ways, as they are
    python gateway_floor.py serve PATH  hands its stdin and stdout over, then waits

host -> [main] -> demo server, and back, with serve only a bystander: the same processes, pipes,
handover and event loop (uvloop) as `elicitron serve --server demo` on a local main (host pipes,
PROTOCOL.md §14, host pipes), each line forwarded at once. What it leaves out is everything Elicitron does:
hello, liveness, the relay's envelope peek, consent (tools/call, elicitation routing, initialize's
capabilities), the pump's bookkeeping and its records for serve, limits, the write coalescing. So
"via" against "floor" is Elicitron's own cost; "floor" against "direct" is what one more process on
the path costs, which no relay code can remove.
"""

import asyncio
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from kit.paths import DEMO_SERVER, PYTHON  # the kit lives in tests/

from shared.event_loop import loop_factory


class _Lines(asyncio.Protocol):
    def __init__(self, each: Callable[[bytes], None], done: asyncio.Future[None]) -> None:
        self._each = each
        self._done = done
        self._buffer = b""

    def data_received(self, data: bytes) -> None:
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        for line in lines:
            self._each(line)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            self._done.set_result(None)


class _Server(asyncio.SubprocessProtocol):
    def __init__(self, out: Callable[[bytes], None], done: asyncio.Future[None]) -> None:
        self._lines = _Lines(out, done)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self._lines.data_received(data)


async def _main_side(path: str) -> None:
    loop = asyncio.get_running_loop()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    listener.setblocking(False)
    keep: list[object] = []

    async def take(conn: socket.socket) -> None:
        readable = loop.create_future()
        loop.add_reader(conn.fileno(), lambda: readable.done() or readable.set_result(None))
        await readable
        loop.remove_reader(conn.fileno())
        _, (host_in, host_out), _, _ = socket.recv_fds(conn, 64, 2)
        out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(host_out, "wb"))
        done = loop.create_future()

        def to_host(line: bytes) -> None:
            out.write(line + b"\n")
        transport, _ = await loop.subprocess_exec(lambda: _Server(to_host, done), PYTHON, str(DEMO_SERVER),
                                                  stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.DEVNULL)
        stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))  # uvloop's subclasses neither
        await loop.connect_read_pipe(lambda: _Lines(lambda line: stdin.write(line + b"\n"), done),
                                     os.fdopen(host_in, "rb"))
        keep.extend((conn, transport))

    print("ready", flush=True)
    while True:
        conn, _ = await loop.sock_accept(listener)
        keep.append(asyncio.ensure_future(take(conn)))


def _serve_side(path: str) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    socket.send_fds(sock, [b"pipes"], [0, 1])
    sock.recv(1)  # the floor's main never answers: this waits until it goes


def main() -> None:
    side, path = sys.argv[1], sys.argv[2]
    if side == "main":
        asyncio.run(_main_side(path), loop_factory=loop_factory())
    else:
        _serve_side(path)


if __name__ == "__main__":
    main()
