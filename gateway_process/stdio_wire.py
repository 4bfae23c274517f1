"""The stdio transport of `elicitron serve`: newline-delimited JSON-RPC on fd 0 / fd 1.

The SDK's own stdio transport drops a line it cannot parse without a word and reads a line of any
length into memory; a host that sends garbage would wait forever for an answer. Here every bad line
gets a JSON-RPC error naming the problem: -32700 for what is not JSON, -32600 for JSON that is not
a JSON-RPC message and for a line over the size limit (whose id is taken from its first bytes when
it can be, since the host waits on that id; the rest of the line is skipped unread). Stray writes to
fd 1 (a library printing) go to stderr, never into the host's stream.

`serve` reads the host's first line before the SDK is loaded (`stdio.py`): those bytes are served
first (`opening`), and when serve answered that `initialize` itself (`answered`), the SDK's reply to
it is dropped here, with a warning if it says something else.
"""

import asyncio
import json
import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from gateway_process.stdio import write_all
from shared.errors import RpcCode

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 4 << 20  # the SDK's own HTTP body limit; main's message limit applies to calls after it
_CHUNK = 1 << 16
_ID_IN_HEAD = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


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


def error_message(request_id: str | int | None, code: int, message: str) -> SessionMessage:
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                             error=types.ErrorData(code=code, message=message)))


def classify(line: bytes) -> tuple[SessionMessage | None, SessionMessage | None]:
    """(message to serve, error reply to send): exactly one is set."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False)), None
    except ValidationError as exc:
        errors = exc.errors()
        if errors and errors[0].get("type") == "json_invalid":
            return None, error_message(None, RpcCode.PARSE_ERROR, f"Parse error: not JSON ({errors[0].get('msg')})")
        request_id = _id_of(line)
        return None, error_message(request_id, RpcCode.INVALID_REQUEST,
                                   f"Invalid Request: not a JSON-RPC 2.0 message ({_first_problem(exc)})")


def _id_of(line: bytes) -> str | int | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    request_id = value.get("id") if isinstance(value, dict) else None
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {error.get('msg')}" if where else str(error.get("msg"))


@dataclass
class EarlyAnswer:
    """A request serve answered before the SDK ran: its id and the reply line sent."""

    request_id: int | str
    line: bytes
    dropped: bool = False

    def drops(self, message: types.JSONRPCMessage) -> bool:
        """True (once) for the SDK's own reply to that request; warns when the two differ."""
        if self.dropped or not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) \
                or message.id != self.request_id:
            return False
        self.dropped = True
        ours = json.loads(self.line)
        theirs = message.model_dump(mode="json", by_alias=True, exclude_none=True)
        if _handshake(ours) != _handshake(theirs):
            logger.warning("the early answer to initialize %r differs from the SDK's %r", ours, theirs)
        return True


def _handshake(reply: dict[str, Any]) -> tuple[Any, ...]:
    """What must agree (instructions may change in between: a server came up)."""
    result = reply.get("result") or {}
    return reply.get("error"), result.get("protocolVersion"), result.get("capabilities"), result.get("serverInfo")


@asynccontextmanager
async def stdio_streams(limit: int = MAX_LINE_BYTES, *, opening: bytes = b"",
                        answered: EarlyAnswer | None = None) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """(read stream, write stream) for `serve_dual_era_loop`; the read stream ends at EOF.
    `opening`: bytes already read from fd 0, served first; `answered`: see EarlyAnswer."""
    out_fd = os.dup(1)
    os.dup2(2, 1)  # from here on fd 1 is stderr: only `out_fd` reaches the host
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    replies = write_send.clone()  # the reader's own error replies share the host's stream
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_read_lines, read_send, replies, limit, opening)
            group.start_soon(_write_lines, write_receive, out_fd, answered)
            yield read_receive, write_send
            group.cancel_scope.cancel()
    finally:
        os.close(out_fd)


async def _read_lines(messages: MemoryObjectSendStream[SessionMessage | Exception],
                      replies: MemoryObjectSendStream[SessionMessage], limit: int, opening: bytes) -> None:
    splitter = LineSplitter(limit)
    async with messages, replies:
        async for chunk in _chunks(0, opening):
            for line in splitter.feed(chunk):
                if isinstance(line, Oversized):
                    logger.warning("refused a %d-byte request from the host (limit %d)", line.size, limit)
                    await replies.send(error_message(line.request_id(), RpcCode.INVALID_REQUEST,
                                                     f"request is over {limit:,} bytes (at least {line.size:,}); "
                                                     "not read"))
                    continue
                if not line.strip():
                    continue
                message, error = classify(line)
                if error is not None:
                    logger.warning("refused a malformed line from the host: %s", error.message.error.message)  # type: ignore[union-attr]
                    await replies.send(error)
                else:
                    await messages.send(message)  # type: ignore[arg-type]


async def _chunks(fd: int, opening: bytes) -> AsyncIterator[bytes]:
    """`opening`, then what arrives on `fd` until EOF: a native pipe reader when it is a pipe, else
    a thread."""
    if opening:
        yield opening
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_CHUNK)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", closefd=False))
    except (ValueError, OSError):  # a regular file or a terminal
        while chunk := await anyio.to_thread.run_sync(os.read, fd, _CHUNK):
            yield chunk
        return
    while chunk := await reader.read(_CHUNK):
        yield chunk


async def _write_lines(messages: MemoryObjectReceiveStream[SessionMessage], fd: int,
                       answered: EarlyAnswer | None) -> None:
    write = await _writer(fd)
    async with messages:
        async for first in messages:
            batch = [first]
            while True:  # everything already waiting goes out in one write
                try:
                    batch.append(messages.receive_nowait())
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            if answered is not None and not answered.dropped:
                batch = [m for m in batch if not answered.drops(m.message)]
                if not batch:
                    continue
            data = b"".join(m.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                            for m in batch)
            try:
                await write(data)
            except (OSError, ConnectionError) as exc:  # the host closed its end: nothing more to say
                logger.info("the host stopped reading: %s", exc)
                return


async def _writer(fd: int) -> Callable[[bytes], Awaitable[None]]:
    """How to write to `fd`: a native pipe writer when it is a pipe, else a thread."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            os.fdopen(fd, "wb", closefd=False))
    except (ValueError, OSError):  # a regular file or a terminal
        return lambda data: anyio.to_thread.run_sync(write_all, fd, data)
    stream = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(data: bytes) -> None:
        stream.write(data)
        await stream.drain()

    return write
