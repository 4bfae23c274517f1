"""Scripted peer process: hello, then answer every invoke at once with accept + fixed content.

`python answerer.py ENDPOINT TOKEN` prints `ready` once welcomed. Written from the wire contract
alone (raw pyzmq + msgpack), no project imports, so the same peer serves the raw-pyzmq floor and
the real broker: any difference between the two is main's side.
"""

import json
import os
import sys
import time

import msgspec
import zmq

CONTENT = {"name": "Ada", "party_size": 2}


def main() -> int:
    endpoint, token = sys.argv[1], sys.argv[2]
    content = json.loads(sys.argv[3]) if len(sys.argv) > 3 else CONTENT
    encoder = msgspec.msgpack.Encoder()
    decoder = msgspec.msgpack.Decoder()
    result = encoder.encode({"action": "accept", "content": content})
    heartbeat = [b"heartbeat", encoder.encode({})]
    parent = os.getppid()

    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 500)
    sock.connect(endpoint)
    sock.send_multipart(
        [
            b"hello",
            encoder.encode(
                {
                    "protocol": 1,
                    "token": token,
                    "window": f"answerer-{os.getpid()}",
                    "name": "bench answerer",
                    "role": "renderer",
                }
            ),
        ]
    )
    last_sent = time.monotonic()
    invoke = b"msgElicitationTransferInvoke"
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
                send([decoder.decode(frames[1])["responseChannel"].encode("ascii"), result])
                last_sent = time.monotonic()
                continue
            if topic == b"welcome":
                print("ready", flush=True)
            elif topic == b"bench-stop":
                return 0
        if time.monotonic() - last_sent > 0.8:
            send(heartbeat)
            last_sent = time.monotonic()


if __name__ == "__main__":
    sys.exit(main())
