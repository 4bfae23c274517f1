"""main's own connection to a configured stdio server, for the SDK's `Client`: its `stdio_client`
with a line cap and linear reading.

The SDK's reader joins the unfinished line to every 64 KiB chunk it reads, so one long line costs
time and memory quadratic in its length (48 MiB took 20 s of main's CPU). This one splits lines
with `LineSplitter`, and a line over the cap (the relayed sessions' MAX_LINE_BYTES) ends the
connection with `OversizedLineError`: the supervisor shows it and restarts the server with backoff.
The session reads and writes the pipes itself: its receive reads the server's stdout
(`StdoutReader`), its send writes to its stdin (`StdinWriter`), with no memory streams and
reader or writer tasks between them, so a message costs no task switch (four per tool call).
The rest is the SDK's: the process (the SDK's inherited environment plus the config's `env`, its
own process group, stderr to `errlog`) and the shutdown (stdin closed, a grace period, then
SIGTERM and SIGKILL to the group, the server's output drained meanwhile: the SDK's private
`_stop_server_process` and `_drain_stdout`, whose version uv.lock pins).
"""

import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Self, TextIO

import anyio
import mcp_types
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
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
    assert process.stdin is not None and process.stdout is not None
    overflow: list[OversizedLineError] = []

    async with anyio.create_task_group() as group:
        def too_long(size: int) -> None:
            overflow.append(OversizedLineError(
                f"server {config.name!r} wrote a line over {limit >> 20} MiB without a line break "
                f"({size:,} bytes so far); its connection was closed"))
            group.cancel_scope.cancel()  # ends the connection now: its calls fail, run() restarts it

        read_stream = StdoutReader(config.name, process.stdout, limit, too_long)
        write_stream = StdinWriter(process.stdin, read_stream)
        group.start_soon(_drain_after_reading, read_stream, process)
        try:
            yield read_stream, write_stream
        finally:
            # Bounded, and shielded so that a cancelled caller cannot leak the process. What the
            # session wrote is in the pipe's transport already, which flushes it before stdin closes.
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await _stop_server_process(process)
            group.cancel_scope.cancel()
    if overflow:
        raise overflow[0]


class StdoutReader:
    """The session's read stream: each receive takes the next line of the server's stdout, read and
    split here in the session's own task (a line that is no JSON-RPC message comes as the error
    reading it, which the session logs and skips). It ends at the server's end of file, at a line
    over `limit` (after `too_long`), at `close`, or at `end` (a write failed)."""

    def __init__(self, name: str, stdout: ByteReceiveStream, limit: int, too_long: Callable[[int], None]) -> None:
        self._name = name
        self._stdout = stdout
        self._splitter = LineSplitter(limit)  # linear: each byte is copied once, whatever the line's length
        self._too_long = too_long
        self._lines: deque[bytes] = deque()
        self._reading: anyio.CancelScope | None = None  # the wait for stdout, which `end` cancels
        self.ended = anyio.Event()  # from here on nothing reads stdout but its drain

    async def receive(self) -> SessionMessage | Exception:
        while not self._lines:
            if self.ended.is_set():
                raise anyio.EndOfStream
            with anyio.CancelScope() as self._reading:
                try:
                    chunk = await self._stdout.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    self.end()
                    raise anyio.EndOfStream from None
            self._reading = None
            if self.ended.is_set():
                raise anyio.EndOfStream
            for line in self._splitter.feed(chunk):
                if isinstance(line, Oversized):
                    self.end()
                    self._too_long(line.size)
                    raise anyio.EndOfStream
                line = line.strip()
                if line:
                    self._lines.append(line)
        return _parse(self._name, self._lines.popleft())

    def end(self) -> None:
        """No more reading: a receive waiting for stdout ends (EndOfStream), and its drain begins."""
        if self._reading is not None:
            self._reading.cancel()
        self.ended.set()

    def close(self) -> None:
        self.end()

    async def aclose(self) -> None:
        self.end()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> None:
        self.end()


async def _drain_after_reading(reader: StdoutReader, process: Process) -> None:
    """Once the session's reading ended, the rest of the output is drained until shutdown closes
    it, so a server blocked writing can exit. The wait is shielded: every way the connection ends
    ends the reading first (`close` in capped_stdio_client's finally), so it cannot outlive it,
    and the drain never reads beside a receive."""
    with anyio.CancelScope(shield=True):
        await reader.ended.wait()
        await anyio.lowlevel.checkpoint()  # a cancelled receive leaves stdout first
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

    def __init__(self, stdin: ByteSendStream, reader: StdoutReader) -> None:
        self._stdin = stdin
        self._reader = reader
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
            self._reader.end()

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> None:
        self.close()
