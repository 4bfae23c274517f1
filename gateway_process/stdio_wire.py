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

import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from gateway_process.lines import MAX_LINE_BYTES, LineSplitter, Oversized, fd_writer, read_chunks
from shared.errors import RpcCode

logger = logging.getLogger(__name__)


ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


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
        async for chunk in read_chunks(0, opening):
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


async def _write_lines(messages: MemoryObjectReceiveStream[SessionMessage], fd: int,
                       answered: EarlyAnswer | None) -> None:
    write = await fd_writer(fd)
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
