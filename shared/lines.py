"""Newline-delimited JSON-RPC on a pair of descriptors, without the SDK (`elicitron serve`).

`LineSplitter` turns bytes into lines, with a size limit: a line over it comes out once as an
`Oversized` (whose request id is read from its first bytes, since the host waits on that id) and
the rest of it is skipped unread. `feed_chunks` and `LineWriter` read and write a descriptor with a
native pipe transport when it is a pipe, else on a thread (a regular file, a terminal).
"""

import asyncio
import json
import logging
import os
import re
import stat
from collections.abc import Callable

from shared import jsonrpc
from shared.errors import RpcCode

logger = logging.getLogger(__name__)

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
        if not self._buffer and self._skipping is None and len(chunk) <= self.limit and chunk.endswith(b"\n"):
            lines: list[bytes | Oversized] = [*chunk.split(b"\n")[:-1]]  # the usual chunk: whole lines
            return lines
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


    def leftover(self) -> bytes:
        """The start of a line not yet complete (none while an oversized line is skipped)."""
        return b"" if self._skipping is not None else bytes(self._buffer)


def as_line(raw: bytes) -> bytes:
    """One JSON-RPC message as one line for a stdio host (a message with newlines re-encoded)."""
    return (jsonrpc.one_line(raw) if b"\n" in raw or b"\r" in raw else raw) + b"\n"


def each_line(splitter: LineSplitter, chunk: bytes, deliver: Callable[[bytes], None],
              answer: Callable[[bytes], None]) -> None:
    """A host's chunk: every non-blank line to `deliver`; an oversized one is answered (`answer`)
    with an error naming its size, since the host waits on its id."""
    for line in splitter.feed(chunk):
        if isinstance(line, Oversized):
            logger.warning("refused a %d-byte message from the host (limit %d)", line.size, splitter.limit)
            answer(jsonrpc.error_response(line.request_id(), RpcCode.INVALID_REQUEST,
                                          f"message is over {splitter.limit:,} bytes (at least {line.size:,}); not read"))
            continue
        line = line.strip()
        if line:
            deliver(line)


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



def write_all(fd: int, data: bytes) -> None:
    """Blocking: all of `data` to `fd`."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _Feed(asyncio.Protocol):
    def __init__(self, feed: Callable[[bytes], None], done: "asyncio.Future[None]") -> None:
        self._feed = feed
        self._done = done

    def data_received(self, data: bytes) -> None:
        self._feed(data)

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        if not self._done.done():
            self._done.set_result(None)


def is_pipe_or_socket(fd: int) -> bool:
    """What the loop's pipe transports take (not a regular file, a terminal or /dev/null)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def feed_chunks(fd: int, feed: Callable[[bytes], None]) -> None:
    """Hand what arrives on `fd` to `feed` until EOF: in the loop's own callback when `fd` is a
    pipe or a socket (no task switch per chunk), else from a thread's reads (a file, a terminal,
    /dev/null: the loop's selector refuses some of them only once the transport is made)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    try:
        if not is_pipe_or_socket(fd):
            raise ValueError("not a pipe")
        transport, _ = await loop.connect_read_pipe(lambda: _Feed(feed, done), os.fdopen(fd, "rb", closefd=False))
    except (ValueError, OSError):  # a regular file or a terminal
        while chunk := await asyncio.to_thread(os.read, fd, _CHUNK):
            feed(chunk)
        return
    try:
        await done
    finally:
        transport.close()


class LineWriter:
    """Lines to `fd`: written at once on a native pipe transport when it is a pipe (no task per
    line), else in order on a thread. `closed` once the reader is gone."""

    def __init__(self, fd: int) -> None:
        self.closed = False
        self._fd = fd
        self._stream: asyncio.StreamWriter | None = None  # for drain(); lines go to its transport itself
        self._pipe: asyncio.WriteTransport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._outgoing: list[bytes] = []  # for the write at the end of this turn of the loop
        self._turn_open = False  # a line went out in this turn of the loop: the rest wait for its end
        self._queue: asyncio.Queue[bytes] | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, fd: int, *, own: bool = False) -> "LineWriter":
        """`own`: `fd` is the writer's to close, and must be a pipe or a socket (uvloop's transport
        closes the descriptor it was given whatever the file object says, asyncio's only with it,
        so one that someone else closes too could be closed again once its number is reused)."""
        writer = cls(fd)
        loop = asyncio.get_running_loop()
        pipe_file = os.fdopen(fd, "wb", closefd=own)
        try:
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe_file)
        except (ValueError, OSError):  # a regular file or a terminal
            if own:
                pipe_file.close()
                raise
            writer._queue = asyncio.Queue()
            writer._task = asyncio.ensure_future(writer._write_on_thread())
            return writer
        writer._stream = asyncio.StreamWriter(transport, protocol, None, loop)
        writer._pipe, writer._loop = transport, loop
        return writer

    def write(self, data: bytes) -> None:
        """The first line in a turn of the loop is written at once (one call at a time waits on
        it); the others of that turn leave together at its end (each write wakes the reader)."""
        if self.closed:
            return
        pipe = self._pipe
        if pipe is not None:
            if self._turn_open:
                self._outgoing.append(data)
                return
            if pipe.is_closing():
                self.closed = True
                return
            self._turn_open = True
            assert self._loop is not None  # (set with the pipe)
            self._loop.call_soon(self._flush)
            pipe.write(data)
        elif self._queue is not None:
            self._queue.put_nowait(data)

    def _flush(self) -> None:
        self._turn_open = False
        outgoing, self._outgoing = self._outgoing, []
        if self._stream is None or not outgoing:
            return
        if self._stream.is_closing():
            self.closed = True
            return
        self._stream.writelines(outgoing)

    async def flush(self) -> None:
        """Until what was written has left (or the reader went away)."""
        if self._queue is not None:
            await self._queue.join()
        elif self._stream is not None and not self._stream.is_closing():
            self._flush()
            self._stream.transport.set_write_buffer_limits(high=0)  # drain() waits for an empty buffer
            try:
                await self._stream.drain()
            except (ConnectionError, OSError):
                self.closed = True

    async def _write_on_thread(self) -> None:
        assert self._queue is not None
        while True:
            data = await self._queue.get()
            try:
                if not self.closed:
                    await asyncio.to_thread(write_all, self._fd, data)
            except OSError:
                self.closed = True
            finally:
                self._queue.task_done()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._stream is not None:
            self._stream.close()

    def abort(self) -> None:
        """Close now, dropping what has not left (its descriptor is about to be closed and reused)."""
        self.closed = True
        if self._task is not None:
            self._task.cancel()
        if self._pipe is not None:
            self._pipe.abort()
