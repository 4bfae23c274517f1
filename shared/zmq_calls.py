"""The Cython socket calls and plain-int flags for the per-message path (main's broker, the peers'
MainSocket).

pyzmq's Python layer above `zmq.backend.Socket` (send_multipart, recv_multipart, getsockopt) turns
every flag and option into an enum (`SocketOption(option)`, `SNDMORE | flags`) and checks routing
ids and groups per frame: for a small message that is most of what a send or receive costs.
"""

from collections.abc import Callable
from typing import Final, cast

import zmq

EVENTS: Final = int(zmq.EVENTS)
POLLIN: Final = int(zmq.POLLIN)
NOBLOCK: Final = int(zmq.NOBLOCK)
SEND_MORE: Final = int(zmq.SNDMORE) | NOBLOCK
RCVMORE: Final = int(zmq.RCVMORE)

zsend = zmq.backend.Socket.send
zrecv = zmq.backend.Socket.recv
# Only ever asked for int options (EVENTS, RCVMORE); the stub's get covers every option (int | bytes).
zget = cast(Callable[[zmq.backend.Socket, int], int], zmq.backend.Socket.get)


def recv_frames(sock: zmq.Socket[bytes]) -> list[bytes]:
    """Every frame of the next message, without blocking; raises zmq.Again when none waits."""
    frames = [zrecv(sock, NOBLOCK)]
    while zget(sock, RCVMORE):
        frames.append(zrecv(sock, NOBLOCK))
    return frames


def send_frames(sock: zmq.Socket[bytes], frames: list[bytes]) -> None:
    """One message, without blocking; raises zmq.Again when it cannot be queued (a multipart message
    is atomic: once its first frame is queued, the rest are too)."""
    last = len(frames) - 1
    for index in range(last):
        zsend(sock, frames[index], SEND_MORE)
    zsend(sock, frames[last], NOBLOCK)
