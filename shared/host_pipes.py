"""Host pipes (PROTOCOL.md §14, host pipes): a local `serve` hands main the host's stdio.

A host that runs `elicitron serve [--server NAME]` pays for two extra processes on every message: its
own pipe to serve, serve's ZeroMQ hop to main. When main runs on this machine, serve removes one:
after its hello it connects to main's `hostPipes` Unix socket and passes its stdin and stdout
and the write end of a pipe of its own (SCM_RIGHTS) with a `Handover`; main then reads the host's
lines and writes the server's itself.

What main tells serve from then on, length-prefixed msgpack `[kind, ...]` records. On the pipe,
which serve drains about once a second and when the socket wakes it (no wake-up per message):

    open     id method        a request of the host is in flight
    done     id               it was answered (or failed, or cancelled)
    handshake raw             the host's `initialize` or `notifications/initialized`, to replay

On the socket, which wakes serve at once (main writes them after the pipe's records have left):

    accepted                  main holds the pipes now
    refused  why              it does not (serve goes on relaying as before)
    over     why              the session ended for good (the host closed its stdin): serve exits
    back     leftover         main is stopping: the pipes are serve's again, with the bytes of a
                              line main had begun to read

When the socket closes without `over`, main went away: serve takes its pipes back, answers what
was still open with an error (a `done` may be missing if main was killed between its write to the
host and the record: then the host also gets an error for an id it has an answer for, which hosts
ignore) and replays the handshake to the next main, as a relayed session does after a loss.
"""

import socket
import struct
from typing import Final, Literal

import msgspec

from shared.jsonrpc import Id

HANDOVER_MAX_BYTES: Final = 4096
RECORD_HEADER: Final = struct.Struct(">I")
MAX_RECORD_BYTES: Final = 8 << 20  # `back` carries at most one line (4 MiB) of leftover bytes

Kind = Literal["accepted", "refused", "open", "done", "handshake", "over", "back"]


class Handover(msgspec.Struct, rename="camel"):
    """serve -> main with the two descriptors: who hands them over and for which server."""

    token: str  # the connection file's, as in hello
    window: str  # serve's hello window: main's host peer this session belongs to
    session: str
    server: str  # messages.EVERY_SERVER: every server at once, merged by main


_encoder = msgspec.msgpack.Encoder()
_handover_decoder = msgspec.msgpack.Decoder(Handover)
_record_decoder = msgspec.msgpack.Decoder(tuple)


def encode_handover(handover: Handover) -> bytes:
    return _encoder.encode(handover)


def decode_handover(data: bytes) -> Handover:
    """Raises msgspec.ValidationError / DecodeError on anything else."""
    return _handover_decoder.decode(data)


def record(kind: Kind, *values: Id | str | bytes) -> bytes:
    body = _encoder.encode((kind, *values))
    return RECORD_HEADER.pack(len(body)) + body


class RecordReader:
    """Records out of a byte stream, whatever the chunks."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[tuple[object, ...]]:
        self._buffer += chunk
        records: list[tuple[object, ...]] = []
        while len(self._buffer) >= RECORD_HEADER.size:
            (size,) = RECORD_HEADER.unpack_from(self._buffer)
            if size > MAX_RECORD_BYTES:
                raise ValueError(f"a host-pipes record of {size} bytes is over {MAX_RECORD_BYTES}")
            end = RECORD_HEADER.size + size
            if len(self._buffer) < end:
                break
            records.append(_record_decoder.decode(bytes(self._buffer[RECORD_HEADER.size:end])))
            del self._buffer[:end]
        return records


def send_handover(sock: socket.socket, handover: Handover, stdin_fd: int, stdout_fd: int, records_fd: int) -> None:
    socket.send_fds(sock, [encode_handover(handover)], [stdin_fd, stdout_fd, records_fd])


def receive_handover(sock: socket.socket) -> tuple[bytes, list[int]]:
    """One message and the descriptors that came with it (non-blocking socket: raises
    BlockingIOError when nothing is there yet). Every descriptor returned is the caller's to close."""
    data, fds, _flags, _address = socket.recv_fds(sock, HANDOVER_MAX_BYTES, 4)
    return data, fds
