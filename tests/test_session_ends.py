"""Every way a host ends its session with `elicitron serve` (issue 39): serve exits at once and
cleanly, main lets the session go, the server stops working for nobody, no descriptor is closed twice.

One row per way a host ends a session, each against `--server` and merged (serve without
--server: main merges every server), in both eras (a 2025-11-25 handshake, a 2026-07-28 host); all
of them while main holds the host's pipes, then all of them again after main has restarted (serve
relays every host itself). Rows run at once against one main
per test; each is a real `elicitron serve` on pipes the test holds as the host would. The server
(tests/session_end_server.py) logs what reaches it, so the test knows which process is the session's.
"""

import asyncio
import errno
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kit.ebadf import DoubleCloses, start_main_with
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, write_config
from kit.paths import ROOT

from shared.event_loop import loop_factory
from shared.lines import LineWriter

SERVER = ROOT / "tests" / "session_end_server.py"
EXIT_WITHIN_S = 2.0
SERVER_ENDS_WITHIN_S = 6.0  # main stops a session's process: stdin closed, SIGTERM after 2 s
WAIT_S = 60.0  # set-up steps on a loaded machine
AT_ONCE = 6  # rows set up or ended at a time
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT = "io.modelcontextprotocol/clientInfo"


@dataclass(frozen=True)
class Ending:
    name: str
    in_flight: bool  # a call is at the server when the host ends the session
    signum: int | None = None


ENDINGS = (
    Ending("stdin-eof", False), Ending("stdin-eof-mid-call", True),
    Ending("sigterm", False, signal.SIGTERM), Ending("sigterm-mid-call", True, signal.SIGTERM),
    Ending("sigint", False, signal.SIGINT), Ending("sighup", False, signal.SIGHUP),
    Ending("read-end-first", True), Ending("both-ends", True), Ending("host-sigkilled", True),
)
MODES = ("server", "merged")
ERAS = ("2025-11-25", "2026-07-28")


class HostSide:
    """One host: `elicitron serve` on pipes, spoken to in raw JSON-RPC lines."""

    def __init__(self, ending: Ending, mode: str, era: str, connection: Path, env: dict[str, str],
                 logs: Path) -> None:
        self.ending, self.mode, self.era = ending, mode, era
        self.name = f"{ending.name}.{mode}.{era}"
        self.stderr_path = logs / f"{self.name}.stderr"
        args = ["--server", "se"] if mode == "server" else []
        with self.stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen([sys.executable, "-m", "cli_process", "serve", "--connection", str(connection),
                                          *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                         env=env, cwd=ROOT, bufsize=0)
        self._buffer = b""
        self._next_id = 0
        self.exited_after: float | None = None
        self.stderr_at_end = 0

    # ---- speaking --------------------------------------------------------------------------

    def _params(self, params: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
        meta = dict(meta or {})
        if self.era != "2025-11-25":
            meta |= {META_VERSION: self.era, META_CLIENT: {"name": self.name, "version": "1"},
                     "io.modelcontextprotocol/clientCapabilities": {}}
        return {**params, "_meta": meta} if meta else params

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    def request(self, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None) -> int:
        self._next_id += 1
        self.send({"id": self._next_id, "method": method, "params": self._params(params, meta)})
        return self._next_id

    def expect(self, holds: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """The next message of serve's for which `holds`, the others skipped."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + WAIT_S
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                message = json.loads(line)
                if holds(message):
                    return message
            left = deadline - time.monotonic()
            assert left > 0, f"{self.name}: no {what} within {WAIT_S} s; serve's stderr:\n{self.stderr()}"
            readable, _, _ = select.select([fd], [], [], left)
            if readable:
                chunk = os.read(fd, 1 << 16)
                assert chunk, f"{self.name}: serve closed its stdout waiting for {what}; stderr:\n{self.stderr()}"
                self._buffer += chunk

    def answer(self, request_id: int) -> dict[str, Any]:
        message = self.expect(lambda m: m.get("id") == request_id and "method" not in m, f"answer {request_id}")
        assert "result" in message, f"{self.name}: {message}"
        return message

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    # ---- the session's steps ----------------------------------------------------------------

    def open(self) -> None:
        if self.era == "2025-11-25":
            self.answer(self.request("initialize", {"protocolVersion": self.era, "capabilities": {},
                                                    "clientInfo": {"name": self.name, "version": "1"}}))
            self.send({"method": "notifications/initialized"})
        else:
            self.answer(self.request("server/discover", {}))
        self.list_tools()

    def list_tools(self) -> None:
        """A request that reaches the server: the session is open there (again, after a restart)."""
        tools = self.answer(self.request("tools/list", {}))["result"]["tools"]
        assert self.tool("work") in [tool["name"] for tool in tools], tools

    def tool(self, name: str) -> str:
        return name if self.mode == "server" else f"se__{name}"

    def call_in_flight(self) -> None:
        """`work` is at the server: its progress notification has come back."""
        self.request("tools/call", {"name": self.tool("work"), "arguments": {"tag": self.name}},
                     {"progressToken": self.name})
        self.expect(lambda m: m.get("method") == "notifications/progress", "the call's progress")

    def end(self) -> None:
        """End the session the row's way; serve's exit is timed from here."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stderr_at_end = self.stderr_path.stat().st_size
        name = self.ending.name
        holder: subprocess.Popen[bytes] | None = None
        if name == "host-sigkilled":  # the host's ends held by a process of their own, which dies
            holder = subprocess.Popen(["sleep", "600"], pass_fds=(self.proc.stdin.fileno(), self.proc.stdout.fileno()))
        started = time.monotonic()
        if self.ending.signum is not None:
            self.proc.send_signal(self.ending.signum)
        elif name.startswith("stdin-eof"):
            self.proc.stdin.close()
        elif name == "read-end-first":  # serve must end on its own: the host stopped reading
            self.proc.stdout.close()
        elif name == "both-ends":
            self.proc.stdout.close()
            self.proc.stdin.close()
        else:
            assert holder is not None
            self.proc.stdout.close()
            self.proc.stdin.close()
            holder.kill()
            holder.wait()
        try:
            self.proc.wait(EXIT_WITHIN_S)
            self.exited_after = time.monotonic() - started
        except subprocess.TimeoutExpired:
            self.exited_after = None
        finally:
            self.proc.stdin.close()
            self.proc.stdout.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


class ServerProcess:
    """The session's server process, found by the host name it logged."""

    def __init__(self, events: Path, host: str) -> None:
        found = [path for path in events.glob("*.log") if f"host {host}\n" in path.read_text()]
        assert len(found) == 1, f"{host}: the session's server processes: {found}"
        self.log = found[0]
        self.pid = int(self.log.stem)
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except ProcessLookupError:
            self._pidfd = None  # gone already

    def ended_within(self, seconds: float) -> bool:
        if self._pidfd is None:
            return True
        try:
            readable, _, _ = select.select([self._pidfd], [], [], seconds)  # readable once it has exited
            return bool(readable)
        finally:
            os.close(self._pidfd)
            self._pidfd = None

    def events(self) -> list[str]:
        return self.log.read_text().splitlines()


def _each[T](rows: list[HostSide], step: Callable[[HostSide], T]) -> list[T]:
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        return list(pool.map(step, rows))


def _pipes_of(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("pipe:"):
            found.add(target)
    return found


class Bench:
    """One test's main (or mains, one after the other), its config and dirs."""

    def __init__(self) -> None:
        self.home = short_tmp_dir("eli-ends-")
        self.closes = DoubleCloses(self.home)
        self.logs = self.home / "serve-logs"
        self.logs.mkdir()
        self.main: RunningMain | None = None

    def start_main(self, events_name: str) -> Path:
        """A main whose server logs into a directory of its own; that directory."""
        events = self.home / events_name
        events.mkdir()
        config = write_config(self.home / f"{events_name}.json",
                              {"se": {"command": sys.executable, "args": [str(SERVER), str(events)]}},
                              elicitron={"autoOpenWindow": False})
        self.main = start_main_with(self.closes.env(child_env(self.home)), config, self.home, self.home)
        self.main.wait_server_ready("se")
        return events

    def rows(self) -> list[HostSide]:
        assert self.main is not None
        env = self.closes.env(child_env(self.home))
        return [HostSide(ending, mode, era, self.main.connection, env, self.logs)
                for ending in ENDINGS for mode in MODES for era in ERAS]

    def close(self) -> None:
        if self.main is not None:
            self.main.stop()
        shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture
def bench() -> Iterator[Bench]:
    made = Bench()
    try:
        yield made
    finally:
        made.close()


def _end_and_check(rows: list[HostSide], events: Path, bench: Bench) -> None:
    servers = {row.name: ServerProcess(events, row.name) for row in rows}
    _each([row for row in rows if row.ending.in_flight], HostSide.call_in_flight)
    _each(rows, HostSide.end)
    problems = []
    for row in rows:
        code = row.proc.returncode
        allowed = {0} if row.ending.signum is None else {0, -row.ending.signum}
        text = row.stderr()
        after_end = text.encode()[row.stderr_at_end:].decode(errors="replace")
        if row.exited_after is None:
            problems.append(f"{row.name}: still running {EXIT_WITHIN_S} s after the host ended the session")
        elif code not in allowed:
            problems.append(f"{row.name}: exit code {code}")
        if "Traceback" in text or "EBADF" in text:
            problems.append(f"{row.name}: serve's stderr:\n{text}")
        elif len(after_end.splitlines()) > 1:
            problems.append(f"{row.name}: more than one line on stderr at the end:\n{after_end}")
    for row in rows:
        server = servers[row.name]
        if not server.ended_within(SERVER_ENDS_WITHIN_S):
            problems.append(f"{row.name}: the session's server (pid {server.pid}) goes on: {server.events()}")
        elif row.ending.in_flight and f"started {row.name}" not in server.events():
            problems.append(f"{row.name}: the call never reached the server: {server.events()}")
    assert bench.main is not None
    main_log = bench.main.stderr.text()
    assert not problems, "\n".join(problems) + f"\nmain's log:\n{main_log[-4000:]}"
    assert "EBADF" not in main_log, main_log
    bench.main.status()  # main goes on
    bench.closes.check()


@pytest.mark.slow
def test_every_way_a_host_ends_a_session_while_main_holds_its_pipes(bench: Bench) -> None:
    events = bench.start_main("events")
    assert bench.main is not None
    rows = bench.rows()
    try:
        _each(rows, HostSide.open)
        main_pipes = _pipes_of(bench.main.pid)
        for row in rows:  # main reads the host's stdin itself, with or without --server
            assert os.readlink(f"/proc/{row.proc.pid}/fd/0") in main_pipes, row.name
        _end_and_check(rows, events, bench)
    finally:
        for row in rows:
            row.kill()


@pytest.mark.slow
def test_every_way_a_host_ends_a_session_after_main_has_restarted(bench: Bench) -> None:
    bench.start_main("events-first")
    assert bench.main is not None
    rows = bench.rows()
    try:
        _each(rows, HostSide.open)
        assert bench.main.stop() == 0
        events = bench.start_main("events")  # on the same connection file: serve attaches to it
        _each(rows, HostSide.list_tools)  # (the handshake replayed to the new main's server)
        main_pipes = _pipes_of(bench.main.pid)
        for row in rows:  # every host relayed through serve now
            assert os.readlink(f"/proc/{row.proc.pid}/fd/0") not in main_pipes, row.name
        _end_and_check(rows, events, bench)
    finally:
        for row in rows:
            row.kill()


@pytest.mark.slow
def test_the_double_close_check_sees_a_descriptor_closed_twice(tmp_path: Path) -> None:
    closes = DoubleCloses(tmp_path)
    done = subprocess.run([sys.executable, "-c", "import os\nr, w = os.pipe()\nos.close(r)\nos.close(r)"],
                          env=closes.env(child_env()), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "EBADF: os.close(" in done.stderr
    with pytest.raises(AssertionError, match="closed twice"):
        closes.check()


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_pipe_writer_writes_a_copy_of_its_own_and_is_gone_when_the_reader_goes(loop: str) -> None:
    """The caller's descriptor stays the caller's (uvloop's transport closes the one it is given),
    and a reader that closes its end is news: a host that stops reading ends its session."""
    async def scenario() -> None:
        read_end, write_end = os.pipe()
        writer = await LineWriter.open(write_end)
        try:
            writer.write(b"line\n")
            await writer.flush()
            assert os.read(read_end, 100) == b"line\n"
            os.close(read_end)
            await asyncio.wait_for(writer.gone, 10)
            assert writer.closed
        finally:
            writer.close()
        await asyncio.sleep(0)  # (the transport's own close runs on the next turn)
        os.fstat(write_end)  # still open
        os.close(write_end)

    asyncio.run(scenario(), loop_factory=loop_factory({"ELICITRON_LOOP": loop}))


def test_a_writer_that_owns_a_file_closes_it_once_after_its_last_line(tmp_path: Path) -> None:
    async def scenario() -> int:
        fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o600)
        writer = await LineWriter.open(fd, own=True)  # a regular file: written on a thread
        writer.write(b"one\n")
        writer.write(b"two\n")
        writer.close()
        await writer.flush()
        assert not writer.gone.done()  # closed by its owner: not a reader gone
        return fd

    fd = asyncio.run(scenario())
    with pytest.raises(OSError) as closed:
        os.fstat(fd)
    assert closed.value.errno == errno.EBADF
    assert (tmp_path / "out").read_bytes() == b"one\ntwo\n"
