"""One fan-out peer process: a renderer that reports what it receives, and answers when told.

`python fanout_peer.py ENDPOINT TOKEN NAME`. Contract-only (raw pyzmq + msgpack). Lines out
(stdout), stamps are `time.perf_counter_ns()` (CLOCK_MONOTONIC, comparable across processes):
  ready                      welcomed
  invoke CHANNEL             an invoke arrived
  sent CHANNEL T             answered CHANNEL (T taken just before the send)
  dismiss CHANNEL T          its dismiss arrived (T taken right after the receive)
Lines in (stdin): `answer CHANNEL` (accept with fixed content), `quit`.
"""

import os
import sys
import time

import msgspec
import zmq

CONTENT = {"name": "Ada", "party_size": 2}


def main() -> int:
    endpoint, token, name = sys.argv[1], sys.argv[2], sys.argv[3]
    encoder = msgspec.msgpack.Encoder()
    decoder = msgspec.msgpack.Decoder()
    result = encoder.encode({"action": "accept", "content": CONTENT})
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 100)
    sock.connect(endpoint)
    sock.send_multipart(
        [
            b"hello",
            encoder.encode(
                {
                    "protocol": 1,
                    "token": token,
                    "window": f"{name}-{os.getpid()}",
                    "name": name,
                    "role": "renderer",
                }
            ),
        ]
    )
    last_sent = time.monotonic()
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    stdin = sys.stdin.fileno()
    poller.register(stdin, zmq.POLLIN)
    out = sys.stdout
    buffered = b""
    while True:
        for what, _ in poller.poll(300):
            if what is sock:
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    stamp = time.perf_counter_ns()
                    topic = frames[0]
                    if topic == b"msgElicitationTransferDismiss":
                        out.write(f"dismiss {decoder.decode(frames[1])['responseChannel']} {stamp}\n")
                    elif topic == b"msgElicitationTransferInvoke":
                        out.write(f"invoke {decoder.decode(frames[1])['responseChannel']}\n")
                    elif topic == b"welcome":
                        out.write("ready\n")
                    elif topic == b"error":
                        out.write(f"error {decoder.decode(frames[1])}\n")
                out.flush()
            else:
                chunk = os.read(stdin, 65536)
                if not chunk:
                    return 0
                buffered += chunk
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    command, _, channel = line.decode().partition(" ")
                    if command == "quit":
                        sock.send_multipart([b"bye", encoder.encode({})])
                        sock.close()
                        return 0
                    if command == "answer":
                        stamp = time.perf_counter_ns()
                        sock.send_multipart([channel.encode("ascii"), result])
                        last_sent = time.monotonic()
                        out.write(f"sent {channel} {stamp}\n")
                        out.flush()
        if time.monotonic() - last_sent > 0.8:
            sock.send_multipart([b"heartbeat", encoder.encode({})])
            last_sent = time.monotonic()


if __name__ == "__main__":
    sys.exit(main())
