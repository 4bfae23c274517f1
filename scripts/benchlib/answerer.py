"""Scripted peer process: hello, then answer every invoke at once with accept + fixed content.

`python answerer.py ENDPOINT TOKEN [CONTENT-JSON]` prints `ready` once welcomed. Contract-only (the
kit's wire helpers: raw pyzmq + msgpack), no project imports, so the same peer serves the raw-pyzmq
floor and the real broker: any difference between the two is main's side. The loop is lean on
purpose (one pre-encoded answer, bodies decoded only for invokes): its CPU shares the two cores.
"""

import json
import os
import sys
import time
from pathlib import Path

import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from kit import contract, wire  # the kit lives in tests/

CONTENT = {"name": "Ada", "party_size": 2}


def main() -> int:
    endpoint, token = sys.argv[1], sys.argv[2]
    content = json.loads(sys.argv[3]) if len(sys.argv) > 3 else CONTENT
    result = wire.encode({"action": "accept", "content": content})
    heartbeat = wire.frames(contract.HEARTBEAT, {})
    decode = wire.decode
    parent = os.getppid()

    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 500)
    sock.connect(endpoint)
    sock.send_multipart(wire.hello_frames(token, f"answerer-{os.getpid()}", "bench answerer"))
    last_sent = time.monotonic()
    invoke = contract.INVOKE.encode("ascii")
    welcome = contract.WELCOME.encode("ascii")
    recv, send = sock.recv_multipart, sock.send_multipart
    while True:
        try:
            frames = recv()
        except zmq.Again:
            frames = None
            if os.getppid() != parent:
                return 0  # the benchmark is gone
        if frames is not None:
            topic = frames[0]
            if topic == invoke:
                send([decode(frames[1])["responseChannel"].encode("ascii"), result])
                last_sent = time.monotonic()
                continue
            if topic == welcome:
                print("ready", flush=True)
            elif topic == b"bench-stop":
                return 0
        if time.monotonic() - last_sent > 0.8:
            send(heartbeat)
            last_sent = time.monotonic()


if __name__ == "__main__":
    sys.exit(main())
