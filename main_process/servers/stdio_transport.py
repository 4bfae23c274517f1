"""main's own connection to a configured stdio server, for the SDK's `Client`: its `stdio_client`
with a line cap and linear reading.

The SDK's reader joins the unfinished line to every 64 KiB chunk it reads, so one long line costs
time and memory quadratic in its length (48 MiB took 20 s of main's CPU). This one splits lines
with `LineSplitter`, and a line over the cap (the relayed sessions' MAX_LINE_BYTES) ends the
connection with `OversizedLineError`: the supervisor shows it and restarts the server with backoff.
The session's writes go straight to the server's stdin (`StdinWriter`): no memory stream and
writer task between them, so a message to the server costs no task switch (two per tool call);
the reader hands each message on without yielding when the session is waiting for it.
The rest is the SDK's: the process (the SDK's inherited environment plus the config's `env`, its
own process group, stderr to `errlog`) and the shutdown (stdin closed, a grace period, then
SIGTERM and SIGKILL to the group, the server's output drained meanwhile: the SDK's private
`_stop_server_process` and `_drain_stdout`, whose version uv.lock pins).
"""

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Self, TextIO

import anyio
import mcp_types
from anyio.abc import ByteSendStream, Process
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.client.stdio import _drain_stdout, _stop_server_process, get_default_environment
from mcp.shared.message import SessionMessage

from main_process.config import StdioServerConfig
from main_process.log_limiter import RateLimitedLog, cut
from main_process.relay.upstream import MAX_LINE_BYTES
from shared.errors import OversizedLineError
from shared.lines import LineSplitter, Oversized

logger = logging.getLogger(__name__)
_complaints = RateLimitedLog(logger)  # a server writing junk to stdout cannot flood main's log


@asynccontextmanager
async def capped_stdio_client(config: StdioServerConfig, errlog: TextIO,
                              limit: int = MAX_LINE_BYTES) -> AsyncIterator[TransportStreams]:
    """Start the server and yield the (read, write) streams of SessionMessage that `Client` takes.
    Raises OSError when the command will not start, OversizedLineError (on leaving) when a line
    went over `limit`."""
    process = await anyio.open_process(
        [config.command, *config.args], env=get_default_environment() | config.env, stderr=errlog,
        cwd=config.cwd, start_new_session=True)
    # No awaits from here until the task group is entered: a cancellation would leak the process.
    incoming, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    assert process.stdin is not None
    write_stream = StdinWriter(process.stdin, incoming)
    overflow: list[OversizedLineError] = []

    async with anyio.create_task_group() as group:
        def too_long(size: int) -> None:
            overflow.append(OversizedLineError(
                f"server {config.name!r} wrote a line over {limit >> 20} MiB without a line break "
                f"({size:,} bytes so far); its connection was closed"))
            group.cancel_scope.cancel()  # ends the connection now: its calls fail, run() restarts it

        group.start_soon(_read_stdout, config.name, process, incoming, limit, too_long)
        try:
            yield read_stream, write_stream
        finally:
            # Bounded, and shielded so that a cancelled caller cannot leak the process. What the
            # session wrote is in the pipe's transport already, which flushes it before stdin closes.
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await _stop_server_process(process)
                for stream in (read_stream, incoming):
                    await stream.aclose()
            group.cancel_scope.cancel()
    if overflow:
        raise overflow[0]


async def _read_stdout(name: str, process: Process, incoming: MemoryObjectSendStream[SessionMessage | Exception],
                       limit: int, too_long: Callable[[int], None]) -> None:
    """Each line to `incoming` (a line that is no JSON-RPC message as the error reading it, which
    the session logs and skips); a line over `limit` calls `too_long`. Then the rest of the
    output is drained until shutdown closes it, so a server blocked writing can exit."""
    assert process.stdout is not None
    splitter = LineSplitter(limit)  # linear: each byte is copied once, whatever the line's length
    try:
        async with incoming:
            while True:
                try:
                    chunk = await process.stdout.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    return
                for line in splitter.feed(chunk):
                    if isinstance(line, Oversized):
                        too_long(line.size)
                        return
                    line = line.strip()
                    if line:
                        message = _parse(name, line)
                        try:
                            try:
                                incoming.send_nowait(message)  # the session waits for it: no yield first
                            except anyio.WouldBlock:
                                await incoming.send(message)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return  # the session is gone
    finally:
        await _drain_stdout(process)


def _parse(name: str, line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # pydantic's ValidationError, invalid UTF-8 included
        _complaints.warning(("stdout", name), "server %r wrote a line that is no JSON-RPC message: %r",
                            name, cut(line))
        return exc


class StdinWriter:
    """The session's write stream: each message written to the server's stdin as it is sent, in the
    sender's task. Once a write fails (the server closed its stdin), the session's reading ends too
    (the server may live on, and a request would wait forever) and later sends raise
    BrokenResourceError, as a closed memory stream's would."""

    def __init__(self, stdin: ByteSendStream, incoming: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        self._stdin = stdin
        self._incoming = incoming
        self._broken = False
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        try:
            await self._stdin.send(data.encode())  # written before any wait: sends keep their order
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            self._broken = True
            self._incoming.close()

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> None:
        self.close()
