"""Where a ZMTP 3 handshake stands, read from the bytes main's side of a connection sends.

The tcp front (tcp_front.py) pipes bytes between a remote window and main's CURVE ROUTER without
reading them, but it must know when the handshake is over: a connection that never completes one
is a stranger holding a descriptor. The server's stream is a 64-byte greeting, then frames
(`flags, size, body`); a command frame's body starts with its name. The server's `READY` ends a
handshake it accepted, its `ERROR` one it refused. Everything after `READY` is left unread.
"""

from typing import Final, Literal

GREETING_BYTES: Final = 64
_COMMAND: Final = 0x04
_LONG: Final = 0x02

Stage = Literal["handshake", "ready", "refused"]


class ServerHandshake:
    """Feed it what the server sends, in order; `stage` says where the handshake is."""

    def __init__(self) -> None:
        self.stage: Stage = "handshake"
        self._buffer = bytearray()
        self._greeted = False

    def feed(self, data: bytes) -> Stage:
        if self.stage != "handshake":
            return self.stage
        self._buffer += data
        if not self._greeted:
            if len(self._buffer) < GREETING_BYTES:
                return self.stage
            if self._buffer[0] != 0xFF or self._buffer[9] != 0x7F or self._buffer[10] < 3:
                self.stage = "refused"  # not a ZMTP 3 server: nothing to pipe to
                return self.stage
            del self._buffer[:GREETING_BYTES]
            self._greeted = True
        while self.stage == "handshake":
            frame = self._next_frame()
            if frame is None:
                break
            flags, body = frame
            if not flags & _COMMAND:
                self.stage = "ready"  # a message: past any handshake (NULL mechanism never sends READY first)
            elif body[:1] and body[1:1 + body[0]] == b"READY":
                self.stage = "ready"
            elif body[:1] and body[1:1 + body[0]] == b"ERROR":
                self.stage = "refused"
        return self.stage

    def _next_frame(self) -> tuple[int, bytes] | None:
        buffer = self._buffer
        if not buffer:
            return None
        flags = buffer[0]
        head = 9 if flags & _LONG else 2
        if len(buffer) < head:
            return None
        size = int.from_bytes(buffer[1:head], "big")
        if len(buffer) < head + size:
            return None
        body = bytes(buffer[head:head + size])
        del buffer[:head + size]
        return flags, body
