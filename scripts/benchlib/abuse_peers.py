"""The attackers of the `abuse` figure, in a process of their own (so they do not share a GIL with the
measuring peer): `python abuse_peers.py flood|crowd ENDPOINT TOKEN [N [ROLE]]`.

flood: one peer says hello, then sends heartbeats as fast as ZeroMQ takes them, until stdin closes.
crowd: N peers (role ROLE, default renderer) say hello and stay (a heartbeat each 0.8 s), reading
nothing main sends; prints `ready WELCOMED REFUSED` once each has had main's answer (a full main
refuses a hello with too-many-peers), and runs until stdin closes.
Written from the wire contract alone (the kit's frames), no project imports.
"""

import os
import select
import sys
import uuid
from pathlib import Path

import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kit import wire


def _stdin_closed() -> bool:
    ready, _, _ = select.select([sys.stdin], [], [], 0)
    return bool(ready) and not os.read(sys.stdin.fileno(), 1)


def flood(endpoint: str, token: str) -> None:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    sock.send_multipart(wire.hello_frames(token, str(uuid.uuid4()), "flooder"))
    heartbeat = wire.frames("heartbeat", {})
    print("ready", flush=True)
    while not _stdin_closed():
        for _ in range(2000):
            sock.send_multipart(heartbeat)
        while sock.poll(0):
            sock.recv_multipart()


def crowd(endpoint: str, token: str, count: int, role: str = "renderer") -> None:
    context = zmq.Context.instance()
    socks = []
    for i in range(count):
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, 50)  # never read: main's further sends to it are dropped by main
        sock.connect(endpoint)
        sock.send_multipart(wire.hello_frames(token, str(uuid.uuid4()), f"crowd-{i}", role))
        socks.append(sock)
    welcomed, refused = 0, 0
    for sock in socks:  # each one's first message is its welcome, or main's refusal
        if not sock.poll(60_000):
            raise SystemExit("a crowd peer had no answer to its hello")
        topic, body = wire.decode_frames(sock.recv_multipart())
        if topic == "welcome":
            welcomed += 1
        elif topic == "error" and body.get("code") == "too-many-peers":
            refused += 1
        else:
            raise SystemExit(f"a crowd peer's hello got {topic} {body}")
    print(f"ready {welcomed} {refused}", flush=True)
    heartbeat = wire.frames("heartbeat", {})
    while not _stdin_closed():
        for sock in socks:
            sock.send_multipart(heartbeat, zmq.NOBLOCK)
        select.select([sys.stdin], [], [], 0.8)  # the contract: a heartbeat after 1 s of silence


if __name__ == "__main__":
    mode, endpoint, token = sys.argv[1:4]
    if mode == "flood":
        flood(endpoint, token)
    else:
        crowd(endpoint, token, int(sys.argv[4]), *sys.argv[5:6])
