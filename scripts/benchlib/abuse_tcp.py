"""Idle TCP connections, in a process of their own (so the measuring side keeps its descriptors):
`python abuse_tcp.py HOST PORT N [TIMEOUT_S [SOURCES]]`.

Opens N connections that never send a byte, BATCH at a time (a listen backlog drops SYNs beyond
it), and waits until the listener has dealt with each one of a batch (it sent something, closed
it, or refused it), or 0.25 s, before the next (and after the last); at most TIMEOUT_S (default
60) in all: a listener that stopped accepting leaves the rest queued in the kernel. Prints `ready
ANSWERED CLOSED WAITING`, then keeps N open until stdin closes: each one the listener closes is
opened again (at most BATCH every 0.25 s), as an attacker would.
SOURCES > 1 (HOST on loopback): the connections come from that many addresses, 127.0.0.2 and up,
as from many machines. No project
imports.
"""

import os
import resource
import selectors
import socket
import sys
import time

BATCH = 50
BATCH_WAIT_S = 0.25


def hold(host: str, port: int, count: int, timeout_s: float, sources: int = 1) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 64 and (hard == resource.RLIM_INFINITY or hard > soft):  # room for every connection
        resource.setrlimit(resource.RLIMIT_NOFILE, (count + 64 if hard == resource.RLIM_INFINITY
                                                    else min(hard, count + 64), hard))
    selector = selectors.DefaultSelector()
    held: list[socket.socket] = []
    answered = closed = 0
    deadline = time.monotonic() + timeout_s
    while len(held) < count and time.monotonic() < deadline:
        for _ in range(min(BATCH, count - len(held))):
            sock = _open(host, port, sources, len(held))
            held.append(sock)
            selector.register(sock, selectors.EVENT_READ)
        got = _wait(selector, min(deadline, time.monotonic() + BATCH_WAIT_S))
        answered, closed = answered + got[0], closed + got[1]
    got = _wait(selector, min(deadline, time.monotonic() + BATCH_WAIT_S))
    answered, closed = answered + got[0], closed + got[1]
    waiting = len(selector.get_map())
    selector.close()
    print(f"ready {answered} {closed} {waiting}", flush=True)
    _keep(held, host, port, sources)


def _open(host: str, port: int, sources: int, index: int) -> socket.socket:
    sock = socket.socket()
    if sources > 1:
        source = 2 + index % sources
        sock.bind((f"127.0.{source >> 8}.{source & 255}", 0))
    sock.setblocking(False)
    sock.connect_ex((host, port))
    return sock


def _keep(held: list[socket.socket], host: str, port: int, sources: int) -> None:
    """Until stdin closes: read and drop what the listener sends; open again what it closed."""
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin, selectors.EVENT_READ)
    for sock in held:
        selector.register(sock, selectors.EVENT_READ)
    lost = 0
    opened = len(held)
    next_batch = time.monotonic() + BATCH_WAIT_S
    while True:
        for key, _ in selector.select(max(0.0, next_batch - time.monotonic())):
            if key.fileobj is sys.stdin:
                if not os.read(sys.stdin.fileno(), 1):
                    selector.close()
                    for sock in held:
                        sock.close()
                    return
                continue
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                alive = bool(sock.recv(1 << 16))
            except BlockingIOError:
                alive = True
            except OSError:
                alive = False
            if not alive:
                selector.unregister(sock)
                sock.close()
                held.remove(sock)
                lost += 1
        if time.monotonic() < next_batch:
            continue
        next_batch = time.monotonic() + BATCH_WAIT_S
        for _ in range(min(BATCH, lost)):
            sock = _open(host, port, sources, opened)
            opened += 1
            held.append(sock)
            selector.register(sock, selectors.EVENT_READ)
            lost -= 1


def _wait(selector: selectors.BaseSelector, until: float) -> tuple[int, int]:
    """Until every registered connection was answered or closed, or `until`: (answered, closed)."""
    answered = closed = 0
    while len(selector.get_map()) and time.monotonic() < until:
        for key, _ in selector.select(min(1.0, max(0.0, until - time.monotonic()))):
            selector.unregister(key.fileobj)
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                got = sock.recv(1 << 16)
            except OSError:
                got = b""
            if got:
                answered += 1
            else:
                closed += 1
    return answered, closed


if __name__ == "__main__":
    hold(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else 60.0,
         int(sys.argv[5]) if len(sys.argv) > 5 else 1)
