"""One fan-out peer process: a renderer that reports what it receives, and answers when told.

`python fanout_peer.py ENDPOINT TOKEN NAME`. The kit's contract-only WirePeer, read without
blocking. Lines out (stdout), stamps are `time.perf_counter_ns()` (CLOCK_MONOTONIC, comparable
across processes):
  ready                      welcomed
  invoke CHANNEL             an invoke arrived
  sent CHANNEL T             answered CHANNEL (T taken just before the send)
  dismiss CHANNEL T          its dismiss arrived (T taken right after the receive)
Lines in (stdin): `answer CHANNEL` (accept with fixed content), `quit`.
"""

import os
import sys
import time
from pathlib import Path

import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from kit import contract, wire  # the kit lives in tests/
from kit.peer import WirePeer

CONTENT = {"name": "Ada", "party_size": 2}


def main() -> int:
    endpoint, token, name = sys.argv[1], sys.argv[2], sys.argv[3]
    result = wire.encode({"action": "accept", "content": CONTENT})
    peer = WirePeer(endpoint, token, name=name)
    peer.send_hello()
    poller = zmq.Poller()
    poller.register(peer.sock, zmq.POLLIN)
    stdin = sys.stdin.fileno()
    poller.register(stdin, zmq.POLLIN)
    out = sys.stdout
    buffered = b""
    while True:
        for what, _ in poller.poll(300):
            if what is peer.sock:
                got = peer.receive()
                stamp = time.perf_counter_ns()
                for topic, body in got:
                    if topic == contract.DISMISS:
                        out.write(f"dismiss {body['responseChannel']} {stamp}\n")
                    elif topic == contract.INVOKE:
                        out.write(f"invoke {body['responseChannel']}\n")
                    elif topic == contract.WELCOME:
                        out.write("ready\n")
                    elif topic == contract.ERROR:
                        out.write(f"error {body}\n")
                out.flush()
                continue
            chunk = os.read(stdin, 65536)
            if not chunk:
                return 0
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                command, _, channel = line.decode().partition(" ")
                if command == "quit":
                    peer.close()
                    return 0
                if command == "answer":
                    stamp = time.perf_counter_ns()
                    peer.send_raw([channel.encode("ascii"), result])
                    out.write(f"sent {channel} {stamp}\n")
                    out.flush()
        peer.heartbeat_if_due()


if __name__ == "__main__":
    sys.exit(main())
