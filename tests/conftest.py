"""Fixtures that start real main processes and real MCP servers."""

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# Qt widgets are tested offscreen (scripts/test sets this too; a bare pytest run must not need a display).
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from wire_peer import WirePeer

ROOT = Path(__file__).resolve().parent.parent
DEMO_SERVER = ROOT / "main_process" / "demo_server.py"


# Every child's config, data (audit log) and state (logs) dirs live in one private temp dir.
XDG_HOME = Path(tempfile.mkdtemp(prefix="eli-xdg-"))


def child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
           "XDG_CONFIG_HOME": str(XDG_HOME / "config"), "XDG_DATA_HOME": str(XDG_HOME / "data"),
           "XDG_STATE_HOME": str(XDG_HOME / "state"), **extra}
    env.pop("ELICITRON_CONNECTION", None)
    return env


class StderrReader:
    """Reads a child's stderr up to a marker line, keeping everything it saw for failure messages."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.seen = b""

    def until(self, marker: str, timeout_s: float, occurrences: int = 1) -> str:
        """Block until `marker` has appeared `occurrences` times in all output so far."""
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        while self.seen.count(marker.encode()) < occurrences:
            ready, _, _ = select.select([fd], [], [], timeout_s)
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                raise AssertionError(f"{marker!r} never appeared; stderr so far:\n{self.text()}")
            self.seen += chunk
        return self.text()

    def text(self) -> str:
        return self.seen.decode(errors="replace")


@dataclass
class RunningMain:
    proc: subprocess.Popen[bytes]
    connection: Path
    stderr: StderrReader
    peers: list[WirePeer] = field(default_factory=list)

    @property
    def info(self) -> dict[str, Any]:
        return json.loads(self.connection.read_text())

    def peer(self, name: str = "wire-peer", role: str = "renderer", hello: bool = True) -> WirePeer:
        peer = WirePeer(self.info["endpoint"], self.info["token"], name=name, role=role)
        self.peers.append(peer)
        if hello:
            welcome = peer.hello()
            assert welcome["topic"] == "welcome", welcome
        return peer

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run `elicitron ARGS --connection <this main's file>` as a user would."""
        argv = [sys.executable, "-m", "main_process", *args, "--connection", str(self.connection)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=child_env(), cwd=ROOT)

    def cli_plain(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run `elicitron ARGS` (for commands without --connection) in the same isolated dirs."""
        argv = [sys.executable, "-m", "main_process", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=child_env(), cwd=ROOT)

    def stop(self) -> None:
        for peer in self.peers:
            peer.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def short_tmp_dir() -> Path:
    # ipc paths are limited to 107 characters: keep the runtime dir short.
    return Path(tempfile.mkdtemp(prefix="eli-", dir="/tmp"))


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def demo_stdio_entry(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(DEMO_SERVER)], **extra}


def start_main(config: Path | None, runtime: Path, *extra_args: str) -> RunningMain:
    connection = runtime / "connection.json"
    argv = [sys.executable, "-m", "main_process", "--log-level", "info", "main", "--connection", str(connection)]
    if config is not None:
        argv += ["--config", str(config)]
    proc = subprocess.Popen([*argv, *extra_args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=child_env(), cwd=ROOT)
    running = RunningMain(proc=proc, connection=connection, stderr=StderrReader(proc))
    running.stderr.until("listening on", timeout_s=30)
    return running


def start_window(connection: Path, name: str) -> tuple[subprocess.Popen[bytes], StderrReader]:
    """A real renderer process (`elicitron window`), offscreen, logging to a pipe we read."""
    proc = subprocess.Popen([sys.executable, "-m", "main_process", "window", "--connection", str(connection),
                             "--name", name], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=child_env(QT_QPA_PLATFORM="offscreen"), cwd=ROOT)
    return proc, StderrReader(proc)


def end_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
    if proc.stderr is not None:
        proc.stderr.close()


def descendants(pid: int) -> dict[int, str]:
    """Every live process under `pid` with its command line (Linux /proc)."""
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    try:
                        found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    except OSError:
                        continue
                    frontier.append(child)
    return found


WindowFactory = Callable[[Path, str], tuple[subprocess.Popen[bytes], StderrReader]]


@pytest.fixture
def windows() -> Iterator[WindowFactory]:
    started: list[subprocess.Popen[bytes]] = []

    def factory(connection: Path, name: str) -> tuple[subprocess.Popen[bytes], StderrReader]:
        proc, reader = start_window(connection, name)
        started.append(proc)
        return proc, reader

    yield factory
    for proc in started:
        end_process(proc)


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    path = short_tmp_dir()
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
def main_factory(runtime_dir: Path, tmp_path: Path) -> Iterator[Callable[..., RunningMain]]:
    started: list[RunningMain] = []

    def factory(servers: dict[str, Any] | None = None, *extra_args: str) -> RunningMain:
        config = write_config(tmp_path / f"mcp-{len(started)}.json", servers) if servers is not None else None
        running = start_main(config, runtime_dir, *extra_args)
        started.append(running)
        return running

    def with_config(config: Path, *extra_args: str) -> RunningMain:
        running = start_main(config, runtime_dir, *extra_args)
        started.append(running)
        return running

    factory.with_config = with_config  # type: ignore[attr-defined]
    yield factory
    for running in started:
        running.stop()


@pytest.fixture
def demo_main(main_factory: Callable[..., RunningMain]) -> RunningMain:
    """main with the demo server over stdio, ready to serve."""
    running = main_factory({"demo": demo_stdio_entry()})
    running.stderr.until("server demo ready", timeout_s=60)
    return running


@pytest.fixture
def http_demo_server() -> Iterator[str]:
    """The demo server over streamable HTTP on loopback; yields its URL."""
    proc = subprocess.Popen([sys.executable, str(DEMO_SERVER), "--http"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline().decode() if ready else ""
    assert line.startswith("LISTENING "), f"HTTP demo server did not start: {line!r}"
    yield line.split()[1]
    proc.terminate()
    proc.wait(timeout=10)
