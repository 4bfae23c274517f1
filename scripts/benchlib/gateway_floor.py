"""The floor under the gateway figure: the relay's process topology with nothing in it but bytes.

    python gateway_floor.py main ENDPOINT   a ROUTER at ENDPOINT; the first message from a peer starts
                                            the demo server for it; lines both ways, as they are
    python gateway_floor.py serve ENDPOINT  stdin lines -> a DEALER at ENDPOINT -> stdout lines

host -> [serve] -> ZeroMQ ipc -> [main] -> demo server, and back: the same hops, pipes and event loop
(uvloop) as `elicitron serve --server demo` through main, each line forwarded at once. What it
leaves out is everything Elicitron does: hello, liveness and reattach, the relay's envelope peek,
consent (tools/call, elicitation routing, initialize's capabilities), msgpack bodies, depth and size
checks, limits, the write coalescing. So "via" against "floor" is Elicitron's own cost; "floor"
against "direct" is what two more processes across a ZeroMQ boundary cost, which no relay code can
remove.
"""

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

import zmq

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


def _reader(sock: zmq.Socket[bytes], each: Callable[[list[bytes]], None]) -> Callable[[], None]:
    def drain() -> None:
        while int(sock.get(zmq.EVENTS)) & zmq.POLLIN:  # edge-triggered: read until nothing is left
            each(sock.recv_multipart(zmq.NOBLOCK))
    return drain


async def _main_side(endpoint: str) -> None:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind(endpoint)
    loop = asyncio.get_running_loop()
    servers: dict[bytes, asyncio.WriteTransport] = {}
    starting: dict[bytes, list[bytes]] = {}

    async def start(peer: bytes) -> None:
        done = loop.create_future()

        def out(line: bytes) -> None:
            sock.send_multipart([peer, line])
            loop.call_soon(drain)
        transport, _ = await loop.subprocess_exec(lambda: _Server(out, done), PYTHON, str(DEMO_SERVER),
                                                  stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.DEVNULL)
        stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))  # uvloop's subclasses neither
        servers[peer] = stdin
        for line in starting.pop(peer):
            stdin.write(line + b"\n")

    def each(frames: list[bytes]) -> None:
        peer, line = frames
        if peer in servers:
            servers[peer].write(line + b"\n")
        elif peer in starting:
            starting[peer].append(line)
        else:
            starting[peer] = [line]
            asyncio.ensure_future(start(peer))

    drain = _reader(sock, each)
    loop.add_reader(sock.fileno(), drain)
    print("ready", flush=True)
    await asyncio.Event().wait()


class _Server(asyncio.SubprocessProtocol):
    def __init__(self, out: Callable[[bytes], None], done: asyncio.Future[None]) -> None:
        self._lines = _Lines(out, done)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self._lines.data_received(data)


async def _serve_side(endpoint: str) -> None:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    sock.connect(endpoint)
    loop = asyncio.get_running_loop()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(1, "wb", closefd=False))
    drain = _reader(sock, lambda frames: out.write(frames[0] + b"\n"))
    loop.add_reader(sock.fileno(), drain)
    done = loop.create_future()

    def each(line: bytes) -> None:
        sock.send(line)
        loop.call_soon(drain)
    await loop.connect_read_pipe(lambda: _Lines(each, done), os.fdopen(0, "rb", closefd=False))
    await done


def main() -> None:
    side, endpoint = sys.argv[1], sys.argv[2]
    asyncio.run(_main_side(endpoint) if side == "main" else _serve_side(endpoint), loop_factory=loop_factory())


if __name__ == "__main__":
    main()
