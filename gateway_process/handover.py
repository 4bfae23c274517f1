"""serve's side of host pipes (shared/host_pipes.py, PROTOCOL.md §14, host pipes): hand a local main the
host's stdin and stdout, wait while main holds them, and learn on their return what to go on with.

While main holds the pipes, serve reads main's records at most every READ_EVERY_S (one wake-up for
many records, none per message); the socket closing wakes it at once when it was idle.
"""

import asyncio
import logging
import os
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from shared import jsonrpc
from shared.connection_file import read_connection_file
from shared.errors import ConnectionFileError
from shared.host_pipes import Handover, RecordReader, send_handover

logger = logging.getLogger(__name__)

READ_EVERY_S: Final = 0.25
ANSWER_TIMEOUT_S: Final = 5.0


@dataclass
class Returned:
    """The pipes are serve's again."""

    over: bool  # the host closed its stdin: the session is done
    why: str
    handshake: list[bytes] = field(default_factory=list)
    outstanding: dict[jsonrpc.Id, str] = field(default_factory=dict)
    leftover: bytes = b""


async def hand_over(connection: Path, window: str, session: str, server: str,
                    stdin_fd: int, stdout_fd: int) -> socket.socket | None:
    """The socket main holds our pipes on, or None (why logged) when it does not take them: a main
    elsewhere, one without host pipes, or a refusal; serve then relays them itself."""
    if not (_is_pipe(stdin_fd) and _is_pipe(stdout_fd)):
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
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, info.host_pipes)
        send_handover(sock, Handover(token=info.token, window=window, session=session, server=server),
                      stdin_fd, stdout_fd)
        answer = await asyncio.wait_for(_first_record(loop, sock), ANSWER_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError, msgspec.DecodeError) as exc:
        logger.info("not handing the pipes to main: %s", exc)
        sock.close()
        return None
    if answer[0] != "accepted":
        logger.info("main did not take the pipes: %s", answer[1] if len(answer) > 1 else answer[0])
        sock.close()
        return None
    logger.info("main holds the host's pipes (session %s)", session)
    return sock


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


async def returned(sock: socket.socket) -> Returned:
    """Until main gives the pipes back: `back` (main stops), `over`, or the socket closing (main
    went away: what was open is in the records)."""
    loop = asyncio.get_running_loop()
    reader = RecordReader()
    state = Returned(over=False, why="Elicitron's main went away")
    try:
        while True:
            await _readable(loop, sock)
            if _drain(sock, reader, state):
                return state
            await asyncio.sleep(READ_EVERY_S)  # records pile up meanwhile: one wake-up reads them all
    finally:
        sock.close()


def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> "asyncio.Future[None]":
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        loop.remove_reader(sock.fileno())
        if not ready.done():
            ready.set_result(None)
    loop.add_reader(sock.fileno(), wake)
    ready.add_done_callback(lambda _: loop.remove_reader(sock.fileno()) if sock.fileno() >= 0 else None)
    return ready


def _drain(sock: socket.socket, reader: RecordReader, state: Returned) -> bool:
    """Apply every record that came; True once the pipes are back."""
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        if not chunk:
            return True
        try:
            records = reader.feed(chunk)
        except (ValueError, msgspec.DecodeError) as exc:
            logger.warning("main's host-pipes records are unreadable (%s); taking the pipes back", exc)
            return True
        for kind, *values in records:
            if kind == "open" and len(values) == 2 and isinstance(values[0], (int, str)):
                state.outstanding[values[0]] = str(values[1])
            elif kind == "done" and values and isinstance(values[0], (int, str)):
                state.outstanding.pop(values[0], None)
            elif kind == "handshake" and values and isinstance(values[0], bytes):
                state.handshake.append(values[0])
            elif kind == "over":
                state.over, state.why = True, str(values[0]) if values else "the host closed it"
                return True
            elif kind == "back":
                state.why = "Elicitron's main stopped"
                state.leftover = values[0] if values and isinstance(values[0], bytes) else b""
                return True


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
