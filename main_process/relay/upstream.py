"""A relayed session's own connection to its server, as raw JSON-RPC messages (no MCP model layer).

`StdioUpstream` starts the server's command the way an MCP host would (the SDK's inherited
environment plus the config's `env`, its own process group, stderr appended to the server's log)
and frames one message per line. What arrives goes to `UpstreamEvents.on_message` as the bytes the
server wrote; `on_closed` comes once, with a sentence, when the process ends or its output breaks
the framing. `close()` ends it the way the MCP spec asks: close stdin, wait, SIGTERM, wait, SIGKILL.
"""

import asyncio
import logging
import os
import shutil
import signal
from pathlib import Path
from typing import Protocol

from mcp.client.stdio import get_default_environment

from main_process.config import StdioServerConfig
from main_process.private_files import open_private
from shared import jsonrpc

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 32 << 20  # one message from a server; past it the session ends (main -> peer takes 64 MiB)
# Backpressure: what may wait for a server that reads slower than its host writes. Over HIGH the host's
# input is held (its pipes: main stops reading them); over MAX (a host main cannot hold) the session ends.
TO_SERVER_HIGH_BYTES = 4 << 20
TO_SERVER_LOW_BYTES = 1 << 20
TO_SERVER_MAX_BYTES = 16 << 20  # four of the largest message a host may send (shared.lines.MAX_LINE_BYTES)
EXIT_GRACE_S = 2.0  # after stdin closes, before SIGTERM; then as long again before SIGKILL
_OUTPUT_AFTER_EXIT_S = 0.5


class UpstreamEvents(Protocol):
    def on_message(self, raw: bytes) -> None: ...

    def on_closed(self, why: str) -> None:
        """The connection ended (once); `why` is a sentence for the host and the log."""

    def on_server_full(self, full: bool) -> None:
        """The server reads slower than it is written to: hold the host's input (True) or let it go."""


class UpstreamError(Exception):
    """The server could not be started; the message says why and what to do."""


def spawn_error(config: StdioServerConfig, exc: OSError, path: str | None) -> str:
    """One sentence for a command that would not start (the most common config mistake)."""
    if isinstance(exc, FileNotFoundError):
        where = path if path is not None else os.environ.get("PATH", "")
        return (f"command {config.command!r} of server {config.name!r} was not found (looked in PATH={where}); "
                "install it or give its absolute path in the config")
    if isinstance(exc, PermissionError):
        return f"command {config.command!r} of server {config.name!r} is not executable ({exc.strerror})"
    return f"could not start server {config.name!r} ({config.command!r}): {exc}"


class _Pipes(asyncio.SubprocessProtocol):
    def __init__(self, events: UpstreamEvents) -> None:
        self._events = events
        self._buffer = bytearray()
        self._closed = False
        self.server_full = False  # its stdin holds over TO_SERVER_HIGH_BYTES
        self.exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.SubprocessTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a SubprocessTransport subclass

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1 or self._closed:
            return
        buffer = self._buffer
        start = len(buffer)
        buffer += data
        end = buffer.find(b"\n", start)
        if end < 0:
            if len(buffer) > MAX_LINE_BYTES:
                self.fail(f"the server sent a message over {MAX_LINE_BYTES >> 20} MiB without a line break")
            return
        begin = 0
        while end >= 0:
            line = bytes(buffer[begin:end]).strip()
            if line:
                self._events.on_message(line)
                if self._closed:
                    return
            begin = end + 1
            end = buffer.find(b"\n", begin)
        del buffer[:begin]

    def pause_writing(self) -> None:  # the server's stdin: over TO_SERVER_HIGH_BYTES wait for it
        self.server_full = True
        self._events.on_server_full(True)

    def resume_writing(self) -> None:
        self.server_full = False
        self._events.on_server_full(False)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1 and not self._closed:
            code = self.transport.get_returncode() if self.transport is not None else None
            self.fail("the server closed its output" if code is None else f"the server exited (code {code})")

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
        # Its last lines may still be in the pipe: the end of its output closes the session. A
        # child of the server that holds the pipe open must not keep it open forever, though.
        code = self.transport.get_returncode() if self.transport is not None else None
        asyncio.get_running_loop().call_later(_OUTPUT_AFTER_EXIT_S, self.fail, f"the server exited (code {code})")

    def fail(self, why: str) -> None:
        if not self._closed:
            self._closed = True
            self._events.on_closed(why)


class StdioUpstream:
    """One server process of one relayed session."""

    def __init__(self, pipes: _Pipes, transport: asyncio.SubprocessTransport, stdin: asyncio.WriteTransport) -> None:
        # (the types are asyncio's; uvloop's transports have the same methods without subclassing)
        self._pipes = pipes
        self._transport = transport
        self._stdin = stdin
        self._outgoing: list[bytes] = []  # for the write at the end of this turn of the loop
        self._turn_open = False  # a message went out in this turn of the loop: the rest wait for its end
        self._closing: asyncio.Task[None] | None = None
        self._reading = True
        stdin.set_write_buffer_limits(high=TO_SERVER_HIGH_BYTES, low=TO_SERVER_LOW_BYTES)

    @classmethod
    async def start(cls, config: StdioServerConfig, stderr_path: Path, events: UpstreamEvents) -> "StdioUpstream":
        """Start the server; raises UpstreamError saying why it could not."""
        env = get_default_environment() | config.env
        path = env.get("PATH")
        command = shutil.which(config.command, path=path) if os.sep not in config.command else config.command
        loop = asyncio.get_running_loop()
        pipes = _Pipes(events)
        with open_private(stderr_path, "a") as errlog:  # the child keeps its own copy of the descriptor
            try:
                transport, _ = await loop.subprocess_exec(
                    lambda: pipes, command or config.command, *config.args, stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE, stderr=errlog, env=env, cwd=config.cwd, start_new_session=True)
            except OSError as exc:
                raise UpstreamError(spawn_error(config, exc, path)) from None
        stdin = transport.get_pipe_transport(0)
        assert stdin is not None
        return cls(pipes, transport, stdin)  # type: ignore[arg-type]  # uvloop's pipes subclass neither

    @property
    def pid(self) -> int:
        return self._transport.get_pid()

    def send(self, raw: bytes, headers: dict[str, str] | None = None) -> None:
        """One message for the server (`headers`, HTTP routing headers, mean nothing on stdio).
        The first in a turn of the loop is written at once (one call at a time waits on it); what
        follows in the same turn goes out in one write at its end: every write wakes the server,
        and the wake-ups, not the bytes, are what a relayed message costs."""
        if self._closing is None and not self._stdin.is_closing():
            if self._turn_open:
                self._outgoing += (jsonrpc.one_line(raw), b"\n")
                return
            self._turn_open = True
            asyncio.get_running_loop().call_soon(self._flush)
            self._stdin.writelines((jsonrpc.one_line(raw) if b"\n" in raw or b"\r" in raw else raw, b"\n"))
            if self._pipes.server_full:
                self._over_max()

    def _flush(self) -> None:
        self._turn_open = False
        outgoing, self._outgoing = self._outgoing, []
        if outgoing and not self._stdin.is_closing():
            self._stdin.writelines(outgoing)
        if self._pipes.server_full:
            self._over_max()

    def _over_max(self) -> None:
        if self._stdin.get_write_buffer_size() > TO_SERVER_MAX_BYTES and self._closing is None:
            # A host whose input main cannot hold (a peer over ZeroMQ) kept writing to a server that
            # reads nothing: main's memory is not the place to keep it.
            self._pipes.fail(f"the server read nothing of the last {TO_SERVER_MAX_BYTES >> 20} MiB written to it")
            self.close()

    def pause_reading(self) -> None:
        """The host reads slower than the server writes: what the server writes waits in its pipe."""
        pipe = self._transport.get_pipe_transport(1)
        if self._reading and pipe is not None:
            self._reading = False
            pipe.pause_reading()  # type: ignore[attr-defined]  # (a ReadTransport: asyncio's and uvloop's)

    def resume_reading(self) -> None:
        pipe = self._transport.get_pipe_transport(1)
        if not self._reading and pipe is not None and not pipe.is_closing():
            self._reading = True
            pipe.resume_reading()  # type: ignore[attr-defined]

    def close(self) -> "asyncio.Task[None]":
        """Stop the server (idempotent); the task ends once the process is gone."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._stop())
        return self._closing

    async def _stop(self) -> None:
        self._flush()
        self._pipes.fail("the session was closed")
        if not self._stdin.is_closing():
            self._stdin.close()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                try:
                    os.killpg(self.pid, sig)
                except (ProcessLookupError, PermissionError):
                    break
            try:
                await asyncio.wait_for(asyncio.shield(self._pipes.exited), EXIT_GRACE_S)
                break
            except TimeoutError:
                continue
        self._transport.close()
