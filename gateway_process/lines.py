"""Newline-delimited JSON-RPC on a pair of descriptors, without the SDK (`elicitron serve`).

`LineSplitter` turns bytes into lines, with a size limit: a line over it comes out once as an
`Oversized` (whose request id is read from its first bytes, since the host waits on that id) and
the rest of it is skipped unread. `read_chunks` and `fd_writer` read and write a descriptor with a
native pipe transport when it is a pipe, else on a thread (a regular file, a terminal).
"""

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable

MAX_LINE_BYTES = 4 << 20  # the SDK's own HTTP body limit; main's message limit applies to calls after it
_CHUNK = 1 << 16
_ID_IN_HEAD = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')


class LineSplitter:
    """Bytes in, complete lines out; a line over `limit` comes out once as an `Oversized`."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._skipping: Oversized | None = None  # the rest of an oversized line is dropped unread

    def feed(self, chunk: bytes) -> list["bytes | Oversized"]:
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self._skipping is not None:
                self._skipping.size += len(piece)
                if end >= 0:
                    self._skipping = None
            elif len(self._buffer) + len(piece) > self.limit:
                head = bytes(self._buffer[:256] or piece[:256])
                self._skipping = Oversized(size=len(self._buffer) + len(piece), head=head)
                out.append(self._skipping)
                self._buffer.clear()
                if end >= 0:
                    self._skipping = None
            else:
                self._buffer += piece
                if end >= 0:
                    out.append(bytes(self._buffer))
                    self._buffer.clear()
            if end < 0:
                return out
            start = end + 1


class Oversized:
    def __init__(self, size: int, head: bytes) -> None:
        self.size = size
        self.head = head

    def request_id(self) -> str | int | None:
        match = _ID_IN_HEAD.search(self.head)
        if match is None:
            return None
        try:
            value = json.loads(match.group(1))
        except ValueError:
            return None
        return value if isinstance(value, str | int) else None



async def read_chunks(fd: int, opening: bytes) -> AsyncIterator[bytes]:
    """`opening`, then what arrives on `fd` until EOF: a native pipe reader when it is a pipe, else
    a thread."""
    if opening:
        yield opening
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_CHUNK)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", closefd=False))
    except (ValueError, OSError):  # a regular file or a terminal
        while chunk := await asyncio.to_thread(os.read, fd, _CHUNK):
            yield chunk
        return
    while chunk := await reader.read(_CHUNK):
        yield chunk



async def fd_writer(fd: int) -> Callable[[bytes], Awaitable[None]]:
    """How to write to `fd`: a native pipe writer when it is a pipe, else a thread."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            os.fdopen(fd, "wb", closefd=False))
    except (ValueError, OSError):  # a regular file or a terminal
        return lambda data: asyncio.to_thread(write_all, fd, data)
    stream = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(data: bytes) -> None:
        stream.write(data)
        await stream.drain()

    return write


def write_all(fd: int, data: bytes) -> None:
    """Blocking: all of `data` to `fd`."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
