"""What every figure shares: results, percentiles, a real main subprocess, a contract-only peer."""

import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import zmq

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO_SERVER = ROOT / "main_process" / "demo_server.py"
PYTHON = sys.executable

INVOKE = "msgElicitationTransferInvoke"
DISMISS = "msgElicitationTransferDismiss"

# The form every scripted answer fits: small, with the checks main runs on each accept.
BENCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1},
        "party_size": {"type": "integer", "title": "Guests", "minimum": 1, "maximum": 12},
    },
    "required": ["name", "party_size"],
}
BENCH_CONTENT: dict[str, Any] = {"name": "Ada", "party_size": 2}  # valid for BENCH_SCHEMA and book_table's

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


def now_ns() -> int:
    return time.perf_counter_ns()


# ---- results -------------------------------------------------------------------------------


@dataclass
class Figure:
    """One row of the table."""

    name: str  # the --only name
    title: str
    value: str  # the headline, human-readable
    target: str  # "" when the row is only printed
    passed: bool | None  # None: no target
    absolute: str = ""  # the absolute times behind a ratio
    how: str = ""  # how it was measured (one line)
    data: dict[str, Any] = field(default_factory=dict)  # everything, for --json


def percentile(sorted_values: list[int] | list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), math.ceil(q / 100.0 * len(sorted_values))))
    return float(sorted_values[rank - 1])


def summarize_ns(samples_ns: list[int]) -> dict[str, float]:
    """p50/p90/p99/max/mean in microseconds."""
    ordered = sorted(samples_ns)
    mean = sum(ordered) / len(ordered) if ordered else float("nan")
    return {
        "n": len(ordered),
        "p50_us": percentile(ordered, 50) / 1e3,
        "p90_us": percentile(ordered, 90) / 1e3,
        "p99_us": percentile(ordered, 99) / 1e3,
        "max_us": (ordered[-1] / 1e3) if ordered else float("nan"),
        "mean_us": mean / 1e3,
    }


def fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def rss_mb(pid: int) -> float:
    """VmRSS of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for pid {pid}")


def short_tmp_dir() -> Path:
    # ipc paths are limited to 107 characters: keep the runtime dir short.
    return Path(tempfile.mkdtemp(prefix="eli-bench-", dir="/tmp"))


def child_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    """Environment of a child; with `home`, its config, data (audit log) and state dirs live there.

    `home` is on the same filesystem as the user's real data dir here (both under /), so the audit
    log's fsyncs cost what they cost a user.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **extra}
    if home is not None:
        env.update(
            XDG_CONFIG_HOME=str(home / "config"),
            XDG_DATA_HOME=str(home / "data"),
            XDG_STATE_HOME=str(home / "state"),
        )
    env.pop("ELICITRON_CONNECTION", None)
    return env


# ---- a real main ---------------------------------------------------------------------------


class RunningMain:
    """`python -m main_process main` in a subprocess; stderr is read to markers, then drained."""

    def __init__(self, proc: subprocess.Popen[bytes], runtime: Path) -> None:
        self.proc = proc
        self.runtime = runtime
        self.connection = runtime / "connection.json"
        self._seen = b""
        self._tail: deque[bytes] = deque(maxlen=200)
        self._drainer: threading.Thread | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def info(self) -> dict[str, Any]:
        return json.loads(self.connection.read_text())

    def until(self, marker: str, timeout_s: float) -> None:
        assert self.proc.stderr is not None and self._drainer is None
        fd = self.proc.stderr.fileno()
        deadline = time.monotonic() + timeout_s
        while marker.encode() not in self._seen:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                raise RuntimeError(f"main: {marker!r} never appeared; stderr so far:\n{self.stderr_text()}")
            self._seen += chunk

    def keep_draining(self) -> None:
        """From here on a thread reads stderr so main can never block on a full pipe."""
        stderr = self.proc.stderr
        assert stderr is not None

        def drain() -> None:
            for line in stderr:
                self._tail.append(line)

        self._drainer = threading.Thread(target=drain, name="main-stderr", daemon=True)
        self._drainer.start()

    def stderr_text(self) -> str:
        return (self._seen + b"".join(self._tail)).decode(errors="replace")

    def peer(self, name: str = "bench-peer", role: str = "renderer") -> "WirePeer":
        info = self.info()
        peer = WirePeer(info["endpoint"], info["token"], name=name, role=role)
        peer.hello()
        return peer

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def write_config(directory: Path, servers: dict[str, Any]) -> Path:
    path = directory / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def demo_entry() -> dict[str, Any]:
    """The demo MCP server over stdio, as the test suite configures it.

    The per-server burst limit (default 20 requests a minute, then `cancel`) is lifted: the
    benchmark asks thousands of times a minute on purpose.
    """
    return {"command": PYTHON, "args": [str(DEMO_SERVER)], "elicitationBurst": 10_000_000}


@contextmanager
def running_main(
    servers: dict[str, Any], *, wait_for: tuple[str, ...] = (), main_type: type[RunningMain] = RunningMain
) -> Iterator[Any]:
    """A real main for one figure; `main_type` lets a figure read its stderr its own way."""
    runtime = short_tmp_dir()
    config = write_config(runtime, servers)
    argv = [
        PYTHON,
        "-m",
        "main_process",
        "--log-level",
        "info",
        "main",
        "--connection",
        str(runtime / "connection.json"),
        "--config",
        str(config),
    ]
    env = child_env(runtime)  # audit log, server stderr logs: all in the temp dir
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    main = main_type(proc, runtime)
    try:
        main.until("listening on", timeout_s=30)
        for marker in wait_for:
            main.until(marker, timeout_s=60)
        main.keep_draining()
        yield main
    finally:
        main.stop()
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


def running_demo_main() -> Any:
    return running_main({"demo": demo_entry()}, wait_for=("server demo ready",))


# ---- a contract-only peer ------------------------------------------------------------------


class WirePeer:
    """A DEALER speaking wire contract v1 with plain dicts; heartbeats whenever it waits."""

    def __init__(
        self, endpoint: str, token: str, *, name: str = "bench-peer", role: str = "renderer"
    ) -> None:
        self.token = token
        self.name = name
        self.role = role
        self.window = str(uuid.uuid4())
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.connect(endpoint)
        self.last_sent = 0.0
        self.stash: list[
            tuple[str, Any]
        ] = []  # read elsewhere but not wanted there; expect() looks here first

    def send(self, topic: str, body: Any) -> None:
        self.sock.send_multipart([topic.encode("ascii"), _encoder.encode(body)])
        self.last_sent = time.monotonic()

    def hello_frames(self) -> list[bytes]:
        return [
            b"hello",
            _encoder.encode(
                {
                    "protocol": 1,
                    "token": self.token,
                    "window": self.window,
                    "name": self.name,
                    "role": self.role,
                }
            ),
        ]

    def hello(self, timeout_s: float = 15.0) -> dict[str, Any]:
        self.sock.send_multipart(self.hello_frames())
        self.last_sent = time.monotonic()
        return self.expect(lambda t, b: t == "welcome", timeout_s)[1]

    def heartbeat_if_due(self) -> None:
        if time.monotonic() - self.last_sent > 0.8:
            self.send("heartbeat", {})

    def recv_nowait(self) -> tuple[str, Any] | None:
        """One message if one is queued (heartbeats returned too), else None."""
        try:
            frames = self.sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return None
        return frames[0].decode("ascii"), _decoder.decode(frames[1])

    def expect(self, wanted: Callable[[str, Any], bool], timeout_s: float = 15.0) -> tuple[str, Any]:
        for i, (topic, body) in enumerate(self.stash):
            if wanted(topic, body):
                del self.stash[i]
                return topic, body
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.heartbeat_if_due()
            if not self.sock.poll(200):
                continue
            frames = self.sock.recv_multipart()
            topic = frames[0].decode("ascii")
            if topic == "heartbeat":
                continue
            body = _decoder.decode(frames[1])
            if topic == "error":
                raise RuntimeError(f"main refused something: {body}")
            if wanted(topic, body):
                return topic, body
        raise TimeoutError(f"{self.name}: nothing wanted arrived within {timeout_s} s")

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        channel = f"call-{uuid.uuid4()}"
        self.send(
            "msgMcpCallTool",
            {"server": server, "tool": tool, "arguments": arguments, "responseChannel": channel},
        )
        return channel

    def status(self, timeout_s: float = 15.0) -> dict[str, Any]:
        """Extension msgStatus (controllers use it for `elicitron status`)."""
        channel = f"status-{uuid.uuid4()}"
        self.send("msgStatus", {"responseChannel": channel})
        return self.expect(lambda t, b: t == channel, timeout_s)[1]["status"]

    def answer(self, invoke: dict[str, Any], content: dict[str, Any] | None = None) -> None:
        self.send(invoke["responseChannel"], {"action": "accept", "content": content or BENCH_CONTENT})

    def close(self) -> None:
        if not self.sock.closed:
            try:
                self.send("bye", {})
            except zmq.ZMQError:
                pass
            self.sock.close(linger=100)
