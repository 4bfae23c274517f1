"""serve's side of host pipes (shared/host_pipes.py, PROTOCOL.md §14, host pipes): hand a local main the
host's stdin and stdout, wait while main holds them, and learn on their return what to go on with.

The descriptors serve sends stay serve's (main gets copies of its own, which it closes); the socket
and the records pipe's read end are closed once, by whoever holds them when the handover ends.

While main holds the pipes, serve drains main's records pipe every DRAIN_EVERY_S (one wake-up for
many records, none per message) and when the socket wakes it: `over`, `back`, or main gone.
"""

import asyncio
import fcntl
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import msgspec

from shared import jsonrpc
from shared.connection_file import read_connection_file
from shared.errors import ConnectionFileError
from shared.host_pipes import Handover, RecordReader, send_handover
from shared.lines import is_pipe_or_socket

logger = logging.getLogger(__name__)

DRAIN_EVERY_S: Final = 1.0
RECORDS_PIPE_BYTES: Final = 1 << 20  # room for a second of records at any rate a host reaches
ANSWER_TIMEOUT_S: Final = 30.0  # a main this slow to answer would be as slow relaying: waiting is no loss


@dataclass
class Returned:
    """The pipes are serve's again."""

    over: bool  # the host closed its stdin: the session is done
    why: str
    said_why: bool = False  # main said `over` or `back`; else its socket closed unannounced (it was killed)
    handshake: list[bytes] = field(default_factory=list)
    outstanding: dict[jsonrpc.Id, str] = field(default_factory=dict)
    leftover: bytes = b""


@dataclass
class Handed:
    """main holds the pipes: the socket it answers on and the records pipe's read end."""

    sock: socket.socket
    records_fd: int


async def hand_over(connection: Path, window: str, session: str, server: str,
                    stdin_fd: int, stdout_fd: int) -> Handed | None:
    """main holds our pipes, or None (why logged) when it does not take them: a main elsewhere, one
    without host pipes, or a refusal; serve then relays them itself."""
    if not (is_pipe_or_socket(stdin_fd) and is_pipe_or_socket(stdout_fd)):
        return None
    try:
        info = read_connection_file(connection)
    except ConnectionFileError as exc:
        logger.info("not handing the pipes to main: %s", exc)
        return None
    if info.is_remote or not info.host_pipes:
        return None
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    records_fd, records_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    handed: Handed | None = None
    try:
        sock.setblocking(False)
        try:
            fcntl.fcntl(records_fd, fcntl.F_SETPIPE_SZ, RECORDS_PIPE_BYTES)
        except OSError:
            pass  # over the system's pipe-max-size: the default (64 KiB) still works, main buffers the rest
        try:
            await loop.sock_connect(sock, info.host_pipes)
            send_handover(sock, Handover(token=info.token, window=window, session=session, server=server),
                          stdin_fd, stdout_fd, records_w)
            answer = await asyncio.wait_for(_first_record(loop, sock), ANSWER_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError, msgspec.DecodeError) as exc:
            logger.info("not handing the pipes to main: %s", exc)
            answer = ("failed",)
        finally:
            os.close(records_w)  # main's copy alone: its end reads as EOF here
        if answer[0] == "accepted":
            logger.info("main holds the host's pipes (session %s)", session)
            handed = Handed(sock, records_fd)
        elif answer[0] == "refused":
            logger.info("main did not take the pipes: %s", answer[1] if len(answer) > 1 else "no reason")
        return handed
    finally:
        if handed is None:  # (also when cancelled: a signal ends serve while main has not answered)
            sock.close()
            os.close(records_fd)


async def _first_record(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> tuple[object, ...]:
    """Only `accepted` or `refused` come before main reads the host: the first record alone."""
    reader = RecordReader()
    while True:
        chunk = await loop.sock_recv(sock, 4096)
        if not chunk:
            raise ConnectionError("main closed the socket without an answer")
        records = reader.feed(chunk)
        if records:
            return records[0]


async def returned(handed: Handed) -> Returned:
    """Until main gives the pipes back: `back` (main stops), `over`, or the socket closing (main
    went away: what was open is in the records)."""
    loop = asyncio.get_running_loop()
    records = RecordReader()
    control = RecordReader()
    state = Returned(over=False, why="Elicitron's main went away")
    try:
        while True:
            woke = await _readable_within(loop, handed.sock, DRAIN_EVERY_S)
            if not _drain_records(handed.records_fd, records, state):
                return state
            if woke and _control(handed.sock, control, state):
                _drain_records(handed.records_fd, records, state)  # main wrote them before it ended
                return state
    finally:
        handed.sock.close()
        os.close(handed.records_fd)


async def _readable_within(loop: asyncio.AbstractEventLoop, sock: socket.socket, seconds: float) -> bool:
    ready: asyncio.Future[bool] = loop.create_future()

    def settle(readable: bool) -> None:
        if not ready.done():
            ready.set_result(readable)
    loop.add_reader(sock.fileno(), settle, True)
    timer = loop.call_later(seconds, settle, False)
    try:
        return await ready
    finally:
        timer.cancel()
        loop.remove_reader(sock.fileno())


Stream = Literal["open", "ended", "unreadable"]


def _available(read: Callable[[], bytes], reader: RecordReader) -> tuple[list[tuple[object, ...]], Stream]:
    """The records that have come, and the stream's state."""
    got: list[tuple[object, ...]] = []
    while True:
        try:
            chunk = read()
        except (BlockingIOError, InterruptedError):
            return got, "open"
        except OSError:
            return got, "ended"
        if not chunk:
            return got, "ended"
        try:
            got += reader.feed(chunk)
        except (ValueError, msgspec.DecodeError) as exc:
            logger.warning("main's host-pipes records are unreadable (%s); taking the pipes back", exc)
            return got, "unreadable"


def _control(sock: socket.socket, reader: RecordReader, state: Returned) -> bool:
    """True once the pipes are back: `over`, `back`, or the socket closed."""
    got, stream = _available(lambda: sock.recv(1 << 16), reader)
    for kind, *values in got:
        if kind == "over":
            state.over, state.why = True, str(values[0]) if values else "the host closed it"
            state.said_why = True
            return True
        if kind == "back":
            state.why, state.said_why = "Elicitron's main stopped", True
            state.leftover = values[0] if values and isinstance(values[0], bytes) else b""
            return True
    return stream != "open"


def _drain_records(fd: int, reader: RecordReader, state: Returned) -> bool:
    """Apply every record waiting in the pipe; False when they cannot be read (take the pipes back).
    (The pipe's end is no news: main's socket says when it is done.)"""
    got, stream = _available(lambda: os.read(fd, 1 << 16), reader)
    for kind, *values in got:
        if kind == "open" and len(values) == 2 and isinstance(values[0], (int, str)):
            state.outstanding[values[0]] = str(values[1])
        elif kind == "done" and values and isinstance(values[0], (int, str)):
            state.outstanding.pop(values[0], None)
        elif kind == "handshake" and values and isinstance(values[0], bytes):
            state.handshake.append(values[0])
    return stream != "unreadable"

