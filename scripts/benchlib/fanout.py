"""Fan-out: 10 attached renderers, first answer wins; time until the 9 others hold their dismiss.

Through a real main with the demo server over stdio. The 10 renderers are separate processes
(`fanout_peer.py`, the kit's contract-only peer), like 10 real windows. Per sample: a controller calls
`book_table`; once all 10 renderers hold the invoke, renderer k (rotating) is told to answer;
the clock runs from its stamp just before the send to the last stamp of the 9 others taken
right after their dismiss was received (all CLOCK_MONOTONIC, so comparable across processes).
"""

import os
import selectors
import subprocess
import time
from pathlib import Path

from kit.env import child_env
from kit.main import RunningMain
from kit.paths import PYTHON

from benchlib.common import Figure, fmt_us, running_demo_main, summarize_ns

PEERS = 10
PEER_SCRIPT = Path(__file__).with_name("fanout_peer.py")


class PeerProcs:
    def __init__(self, main: RunningMain) -> None:
        info = main.info
        self.procs = [
            subprocess.Popen(
                [PYTHON, str(PEER_SCRIPT), info["endpoint"], info["token"], f"fanout-{i}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=child_env(),
                cwd=PEER_SCRIPT.parent,
            )
            for i in range(PEERS)
        ]
        self.selector = selectors.DefaultSelector()
        self.buffers = [b""] * PEERS
        for i, proc in enumerate(self.procs):
            assert proc.stdout is not None
            os.set_blocking(proc.stdout.fileno(), False)
            self.selector.register(proc.stdout, selectors.EVENT_READ, i)
        self.lines: list[list[str]] = [[] for _ in range(PEERS)]

    def wait_for(self, wanted: dict[int, str], timeout_s: float = 30.0) -> dict[int, str]:
        """Read until each peer i in `wanted` printed a line starting with wanted[i]; returns those lines."""
        found: dict[int, str] = {}
        deadline = time.monotonic() + timeout_s
        while True:
            for i, prefix in wanted.items():
                if i not in found:
                    for j, line in enumerate(self.lines[i]):
                        if line.startswith(prefix):
                            found[i] = line
                            del self.lines[i][: j + 1]
                            break
                    else:
                        for line in self.lines[i]:
                            if line.startswith("error"):
                                raise RuntimeError(f"peer {i}: {line}")
            if len(found) == len(wanted):
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"peers {sorted(set(wanted) - set(found))} never printed {wanted}")
            for key, _ in self.selector.select(min(left, 0.5)):
                i = key.data
                chunk = os.read(key.fileobj.fileno(), 65536)  # type: ignore[union-attr]
                if not chunk:
                    raise RuntimeError(f"fan-out peer {i} exited")
                data = self.buffers[i] + chunk
                *complete, self.buffers[i] = data.split(b"\n")
                self.lines[i].extend(line.decode() for line in complete)

    def tell(self, i: int, line: str) -> None:
        stdin = self.procs[i].stdin
        assert stdin is not None
        stdin.write(line.encode() + b"\n")
        stdin.flush()

    def close(self) -> None:
        for i in range(PEERS):
            try:
                self.tell(i, "quit")
            except OSError:
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.selector.close()


def run(quick: bool) -> list[Figure]:
    n = 30 if quick else 500
    samples: list[int] = []
    firsts: list[int] = []
    with running_demo_main() as main:
        controller = main.peer(name="fanout-controller", role="controller", strict=True)
        peers = PeerProcs(main)
        try:
            peers.wait_for({i: "ready" for i in range(PEERS)})
            for k in range(n + 5):
                call = controller.call_tool("demo", "book_table", {"restaurant": "Fan-out"})
                invokes = peers.wait_for({i: "invoke " for i in range(PEERS)})
                channel = invokes[0].split()[1]
                winner = k % PEERS
                peers.tell(winner, f"answer {channel}")
                sent = int(peers.wait_for({winner: f"sent {channel}"})[winner].split()[2])
                others = peers.wait_for({i: f"dismiss {channel}" for i in range(PEERS) if i != winner})
                stamps = [int(line.split()[2]) for line in others.values()]
                peers.wait_for({winner: f"dismiss {channel}"})
                controller.expect(lambda t, b: t == call)  # noqa: B023
                if k >= 5:  # the first few warm main up
                    samples.append(max(stamps) - sent)
                    firsts.append(min(stamps) - sent)
        finally:
            peers.close()
            controller.close()
    s = summarize_ns(samples)
    first = summarize_ns(firsts)
    return [
        Figure(
            name="fanout",
            title=f"fan-out to {PEERS - 1} others",
            value=f"p50 {fmt_us(s['p50_us'])}",
            target="p50 < 2 ms",
            passed=s["p50_us"] < 2000,
            absolute=f"p90 {fmt_us(s['p90_us'])}, p99 {fmt_us(s['p99_us'])}, max {fmt_us(s['max_us'])}, n={s['n']}; "
            f"first of the 9 p50 {fmt_us(first['p50_us'])}",
            how=f"real main + demo server (stdio); {PEERS} renderer processes (contract-only), rotating winner; "
            "winner's stamp before its send -> last of the 9 others' stamp after its dismiss arrived",
            data={**s, "first_dismiss": first},
        )
    ]
