"""Newline-delimited JSON-RPC on a pair of descriptors, without the SDK (`elicitron serve`).

`LineSplitter` turns bytes into lines, with a size limit: a line over it comes out once as an
`Oversized` (whose request id is read from its first bytes, since the host waits on that id) and
the rest of it is skipped unread. `feed_chunks` and `LineWriter` read and write a descriptor with a
native pipe transport when it is a pipe, else on a thread (a regular file, a terminal).

Each closes what it owns once: a pipe transport gets a copy of the caller's descriptor of its own
(uvloop's transports close the descriptor they were given whatever the file object says, asyncio's
only through the file object: `transport_file`), so the caller's stays the caller's to close.
"""

import asyncio
import fcntl
import json
import logging
import os
import re
import stat
from collections.abc import Callable
from typing import IO

from shared import jsonrpc
from shared.errors import RpcCode

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 4 << 20  # the SDK's own HTTP body limit; main's message limit applies to calls after it
_CHUNK = 1 << 16
FULL_BYTES = 4 << 20  # what may wait for a slow reader before the writer's source is paused (backpressure)
FULL_LOW_BYTES = 1 << 20
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


def descriptor_copy(fd: int) -> int:
    """A descriptor of its own on what `fd` is, never 0-2 (libuv leaves those open whoever owns them)."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def transport_file(fd: int, mode: str) -> IO[bytes]:
    """`fd` as the file object of a pipe transport of the running loop, which then owns `fd` and
    closes it once: uvloop closes the descriptor itself, then closes the file object too (which
    must then leave the number alone: by then it may be someone else's), asyncio's transport closes
    only the file object."""
    loop_closes_it = type(asyncio.get_running_loop()).__module__.split(".")[0] == "uvloop"
    return os.fdopen(fd, mode, closefd=not loop_closes_it)


async def feed_chunks(fd: int, feed: Callable[[bytes], None]) -> None:
    """Hand what arrives on `fd` to `feed` until EOF: in the loop's own callback when `fd` is a
    pipe or a socket (no task switch per chunk), else from a thread's reads (a file, a terminal,
    /dev/null: the loop's selector refuses some of them only once the transport is made). `fd`
    stays the caller's: the transport reads a copy of its own."""
    if not is_pipe_or_socket(fd):
        while chunk := await asyncio.to_thread(os.read, fd, _CHUNK):
            feed(chunk)
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    pipe_file = transport_file(descriptor_copy(fd), "rb")
    try:
        transport, _ = await loop.connect_read_pipe(lambda: _Feed(feed, done), pipe_file)
    except BaseException:
        pipe_file.close()  # (under uvloop a copy it failed to take may stay open: a leak, never a second close)
        raise
    try:
        await done
    finally:
        transport.close()


class _WriteSide(asyncio.streams.FlowControlMixin):
    """The pipe transport's protocol: drain() as a StreamWriter's, `lost` once it is closed, and
    `full(True/False)` as what waits for the reader crosses the transport's limits."""

    def __init__(self, lost: Callable[[], None], full: Callable[[bool], None] | None) -> None:
        super().__init__()
        self._lost = lost
        self._full = full

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._full is not None:
            self._full(True)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._full is not None:
            self._full(False)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._lost()


class LineWriter:
    """Lines to `fd`: written at once on a native pipe transport when it is a pipe (no task per
    line), else in order on a thread. `closed` once the reader is gone; `gone` is done then too,
    unless the writer's own close came first (a host that stops reading ends its session)."""

    def __init__(self, fd: int, *, own: bool) -> None:
        self.closed = False
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._fd = fd
        self._own = own  # the thread's writer closes `fd` once it has ended
        self._ended = False
        self._stream: asyncio.StreamWriter | None = None  # for drain(); lines go to its transport itself
        self._pipe: asyncio.WriteTransport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._outgoing: list[bytes] = []  # for the write at the end of this turn of the loop
        self._turn_open = False  # a line went out in this turn of the loop: the rest wait for its end
        self._queue: asyncio.Queue[bytes | None] | None = None  # None: the end
        self._task: asyncio.Task[None] | None = None
        self._in_thread = False  # a thread is writing to `fd` right now

    @classmethod
    async def open(cls, fd: int, *, own: bool = False, full: Callable[[bool], None] | None = None) -> "LineWriter":
        """`own`: the writer closes `fd`, once, when it is closed or aborted; else `fd` stays the
        caller's (a pipe's transport writes a copy of its own, since uvloop's closes the descriptor
        it was given whatever the file object says). `full`: told True when over FULL_BYTES wait
        for a reader slower than the writer, False once that is under FULL_LOW_BYTES (pipes only)."""
        if not is_pipe_or_socket(fd):  # a regular file or a terminal
            writer = cls(fd, own=own)
            writer._queue = asyncio.Queue()
            writer._task = asyncio.ensure_future(writer._write_on_thread())
            return writer
        writer = cls(fd, own=False)  # the transport owns what it writes to
        loop = asyncio.get_running_loop()
        pipe_file = transport_file(fd if own else descriptor_copy(fd), "wb")
        try:
            transport, protocol = await loop.connect_write_pipe(lambda: _WriteSide(writer._lost, full), pipe_file)
        except BaseException:
            pipe_file.close()  # (under uvloop a descriptor it failed to take may stay open: a leak, never a second close)
            raise
        if full is not None:
            transport.set_write_buffer_limits(high=FULL_BYTES, low=FULL_LOW_BYTES)
        writer._stream = asyncio.StreamWriter(transport, protocol, None, loop)
        writer._pipe, writer._loop = transport, loop
        return writer

    def _lost(self) -> None:
        """The reader went away (or a write failed): `gone`, unless the writer was closed first."""
        if not self._ended and not self.gone.done():
            self.gone.set_result(None)
        self.closed = True

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
                self._lost()
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
        if self._stream is None or not outgoing or self.closed:
            return
        if self._stream.is_closing():
            self._lost()
            return
        self._stream.writelines(outgoing)

    async def flush(self) -> None:
        """Until what was written has left (or the reader went away)."""
        if self._queue is not None:
            if self._task is not None and not self._task.done():
                await self._queue.join()
        elif self._stream is not None and not self._stream.is_closing():
            self._flush()
            self._stream.transport.set_write_buffer_limits(high=0)  # drain() waits for an empty buffer
            try:
                await self._stream.drain()
            except (ConnectionError, OSError):
                self._lost()

    async def _write_on_thread(self) -> None:
        assert self._queue is not None
        try:
            while True:
                data = await self._queue.get()
                try:
                    if data is None:
                        return
                    if not self.closed:
                        self._in_thread = True
                        await asyncio.to_thread(write_all, self._fd, data)
                        self._in_thread = False
                except OSError:
                    self._in_thread = False
                    self._lost()
                finally:
                    self._queue.task_done()
        finally:
            # Never under a thread's write (cancelled mid-write as the loop ends: the process's
            # exit closes it): that write would land on whatever next takes the number.
            if self._own and not self._in_thread:
                os.close(self._fd)

    def close(self) -> None:
        """What was written still leaves, then the descriptor closes."""
        self._end(drop=False)

    def abort(self) -> None:
        """Close now, dropping what has not left."""
        self._end(drop=True)

    def _end(self, *, drop: bool) -> None:
        if self._ended:
            return
        self._ended = True
        if drop:
            self.closed = True
        if self._queue is not None:
            self._queue.put_nowait(None)
        if self._stream is not None:
            outgoing, self._outgoing = self._outgoing, []
            if outgoing and not drop and not self._stream.is_closing():
                self._stream.writelines(outgoing)
            self.closed = True
            if drop:
                self._stream.transport.abort()
            else:
                self._stream.close()
