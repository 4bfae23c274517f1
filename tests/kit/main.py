"""RunningMain: `python -m cli_process main` in isolated dirs, and waits on what it reports.

Every wait here is on what main says over the wire, never on its log: main is up once its
connection file names its pid and a hello gets a welcome; a server is ready, or a window attached
or detached, once a watcher (a controller attached for the wait) sees it in main's `servers` and
`peers` pushes or its msgStatus reply. main's stderr (its log) is kept for failure messages and
for the tests whose subject is the log.
"""

import json
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kit import contract, zygote
from kit.env import child_env, short_tmp_dir
from kit.output import ChildOutput
from kit.paths import PYTHON, ROOT
from kit.peer import WirePeer
from kit.procs import terminate

Servers = list[dict[str, Any]]
Peers = list[dict[str, Any]]


class RunningMain:
    def __init__(self, proc: "subprocess.Popen[bytes]", connection: Path, home: Path | None,
                 stderr: ChildOutput) -> None:
        self.proc = proc
        self.connection = connection
        self.home = home  # its config/data/state dirs; None: the kit's default home
        self.stderr = stderr  # main's log
        self.peers: list[WirePeer] = []  # closed when main stops

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def runtime(self) -> Path:
        return self.connection.parent

    @property
    def info(self) -> dict[str, Any]:
        """The connection file: endpoint, token, pid (and serverKey on tcp)."""
        return json.loads(self.connection.read_text())

    def peer(self, name: str = "wire-peer", role: str = "renderer", hello: bool = True,
             strict: bool = False) -> WirePeer:
        """A contract-only peer of this main, closed when main stops; welcomed unless `hello=False`."""
        info = self.info
        peer = WirePeer(info["endpoint"], info["token"], name=name, role=role, strict=strict,
                        companions=self.peers)
        self.peers.append(peer)
        if hello:
            welcome = peer.hello()
            assert welcome["topic"] == "welcome", welcome
        return peer

    # ---- waits on what main reports ----------------------------------------------------------

    def wait_up(self, timeout_s: float = 30.0) -> None:
        """Until main's connection file names this process and a hello gets a welcome."""
        deadline = time.monotonic() + timeout_s
        while not self._connection_is_mine():
            if self.proc.poll() is not None:
                raise AssertionError(f"main exited with {self.proc.returncode} before it was up; "
                                     f"its log:\n{self.stderr.tail()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"main wrote no connection file within {timeout_s} s; "
                                     f"its log:\n{self.stderr.tail()}")
            # main logs as it starts: wake on that, and look at the file again at least every 0.1 s
            self.stderr.wait_change(self.stderr.size, min(left, 0.1))
        with self.watch(timeout_s=max(1.0, deadline - time.monotonic())):
            pass

    def _connection_is_mine(self) -> bool:
        try:
            return self.info.get("pid") == self.proc.pid
        except (OSError, ValueError):  # not there yet, or half written
            return False

    @contextmanager
    def watch(self, timeout_s: float = 15.0) -> Iterator["MainWatcher"]:
        """A controller attached for the length of the block that follows what main reports."""
        watcher = MainWatcher(self, timeout_s)
        try:
            yield watcher
        finally:
            watcher.close()

    def wait_server_ready(self, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
        with self.watch() as watcher:
            return watcher.wait_server_ready(name, timeout_s)

    def wait_peer(self, name: str, *, attached: bool = True, role: str | None = None,
                  timeout_s: float = 30.0) -> None:
        with self.watch() as watcher:
            watcher.wait_peer(name, attached=attached, role=role, timeout_s=timeout_s)

    def wait_status(self, holds: Callable[[dict[str, Any]], bool], what: str,
                    timeout_s: float = 60.0) -> dict[str, Any]:
        """main's status (what `status --json` prints, as msgStatus round trips on one connection)
        once `holds(status)`. Between two asks it waits for main to log something, at most 0.1 s:
        what is waited for (a listener up, a count reported) is not pushed to peers."""
        deadline = time.monotonic() + timeout_s
        with self.watch() as watcher:
            while True:
                seen = self.stderr.size
                status = watcher.peer.status()
                if holds(status):
                    return status
                left = deadline - time.monotonic()
                assert left > 0, f"main's status never showed {what} within {timeout_s} s: {status}"
                self.stderr.wait_change(seen, min(left, 0.1))

    def status(self, timeout_s: float = 15.0) -> dict[str, Any]:
        """What `elicitron status --json` shows, asked over the wire (msgStatus)."""
        with self.watch() as watcher:
            return watcher.peer.status(timeout_s)

    # ---- the CLI, as a user runs it ----------------------------------------------------------

    def cli(self, *args: str, timeout: float = 60) -> "subprocess.CompletedProcess[str]":
        """`elicitron ARGS --connection <this main's file>`."""
        return self.cli_plain(*args, "--connection", str(self.connection), timeout=timeout)

    def cli_plain(self, *args: str, timeout: float = 60) -> "subprocess.CompletedProcess[str]":
        """`elicitron ARGS` in main's isolated dirs (for commands that take no --connection). The
        test's peers heartbeat meanwhile: on a busy machine a command can outlast main's 5 s
        silence limit, and a peer the test holds would be detached under it."""
        argv = [PYTHON, "-m", "cli_process", *args]
        started: Any = (zygote.spawn_cli(list(args), child_env(self.home), stdout_pipe=True) if zygote.enabled() else
                        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=child_env(self.home), cwd=ROOT))
        with started as proc:
            done = threading.Event()
            output: list[str] = []

            def read() -> None:
                output.extend(proc.communicate())
                done.set()

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            deadline = time.monotonic() + timeout
            while not done.wait(0.2):
                for peer in self.peers:
                    if peer.welcomed:
                        peer.heartbeat_if_due()
                if time.monotonic() > deadline:
                    proc.kill()
                    reader.join()
                    raise subprocess.TimeoutExpired(argv, timeout)
            reader.join()
        return subprocess.CompletedProcess(argv, proc.returncode, output[0], output[1])

    def stop(self, timeout_s: float = 20.0) -> int:
        """Close its peers, SIGTERM (SIGKILL after `timeout_s`); main's exit code. The log stays."""
        for peer in self.peers:
            peer.close()
        code = terminate(self.proc, timeout_s)
        self.stderr.close()
        return code


class MainWatcher:
    """A controller attached to main that follows the servers and peers main reports: its
    msgStatus reply, then every `servers` and `peers` push, read in the order main sent them."""

    def __init__(self, main: RunningMain, timeout_s: float = 15.0) -> None:
        self.main = main
        info = main.info
        self.peer = WirePeer(info["endpoint"], info["token"], name="kit-watcher", role="controller")
        try:
            welcome = self.peer.hello(timeout_s=timeout_s)
            assert welcome["topic"] == "welcome", welcome
            self.servers: Servers = welcome["servers"]
            self.peers: Peers | None = None
            self._status_channel = f"watch-{uuid.uuid4()}"
            self.peer.send(contract.STATUS, {"responseChannel": self._status_channel})
            self.wait(lambda: self.peers is not None, "main's status", timeout_s)
        except BaseException:
            self.peer.close()
            raise

    def _next(self, timeout_s: float) -> None:
        topic, body = self.peer.expect(
            lambda t, b: t in (contract.SERVERS, contract.PEERS, self._status_channel), timeout_s)
        if topic == contract.SERVERS:
            self.servers = body["servers"]
        elif topic == contract.PEERS:
            self.peers = body["peers"]
        else:
            self.servers, self.peers = body["status"]["servers"], body["status"]["peers"]

    def wait(self, holds: Callable[[], bool], what: str, timeout_s: float) -> None:
        """Read what main reports until `holds()`; fails after `timeout_s` or if main exits."""
        deadline = time.monotonic() + timeout_s
        while not holds():
            left = deadline - time.monotonic()
            if left <= 0 or self.main.proc.poll() is not None:
                ended = "" if self.main.proc.poll() is None else f" (main exited with {self.main.proc.returncode})"
                raise AssertionError(f"{what}: not within {timeout_s} s{ended}; main reports servers "
                                     f"{self.servers}, peers {self.peers}; main's log:\n{self.main.stderr.tail()}")
            try:
                self._next(min(left, 1.0))  # a second at a time, to notice main exiting
            except AssertionError:
                continue  # nothing new yet

    def server(self, name: str) -> dict[str, Any] | None:
        return next((s for s in self.servers if s["name"] == name), None)

    def wait_server_ready(self, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Until main reports server `name` ready; fails at once if it reports it failed."""
        def ready() -> bool:
            server = self.server(name)
            if server is not None and server["status"] == "failed":
                raise AssertionError(f"server {name} failed: {server.get('error')}; main's log:\n"
                                     f"{self.main.stderr.tail()}")
            return server is not None and server["status"] == "ready"

        self.wait(ready, f"server {name} ready", timeout_s)
        server = self.server(name)
        assert server is not None
        return server

    def attached(self, name: str, role: str | None = None) -> bool:
        return any(p["name"] == name and (role is None or p["role"] == role) for p in self.peers or [])

    def wait_peer(self, name: str, *, attached: bool = True, role: str | None = None,
                  timeout_s: float = 30.0) -> None:
        """Until main reports a peer named `name` attached (or none attached, `attached=False`)."""
        self.wait(lambda: self.peers is not None and self.attached(name, role) == attached,
                  f"{role or 'peer'} {name!r} {'attached' if attached else 'detached'}", timeout_s)

    def close(self) -> None:
        self.peer.close()


def write_config(path: Path, servers: dict[str, Any], **top_level: Any) -> Path:
    """An `mcpServers` config file (plus any top-level keys, e.g. elicitron={...})."""
    path.write_text(json.dumps({"mcpServers": servers, **top_level}))
    return path


def start_main(config: Path | None, runtime: Path, *extra_args: str, home: Path | None = None,
               wait: bool = True, open_files: tuple[int, int] | None = None,
               env: dict[str, str] | None = None) -> RunningMain:
    """`elicitron main` with its connection file in `runtime` and its dirs in `home`; up unless
    `wait=False`. `open_files`: its (soft, hard) descriptor limit, as `ulimit -n` would set it.
    `env`: its whole environment (default: the kit's for `home`)."""
    connection = runtime / "connection.json"
    argv = [PYTHON, "-m", "cli_process", "--log-level", "info", "main", "--connection", str(connection)]
    if config is not None:
        argv += ["--config", str(config)]
    if open_files is not None:  # the shell's own ulimit, then exec: no preexec_fn beside the test's threads
        argv = ["/bin/sh", "-c", f'ulimit -S -n {open_files[0]} && ulimit -H -n {open_files[1]} && exec "$0" "$@"',
                *argv]
    proc: Any
    if env is None and open_files is None and zygote.enabled():  # forked from a process that imported main
        proc = zygote.spawn_cli([*argv[3:], *extra_args], child_env(home))
    else:  # a start that is itself the subject: its own environment, its own limits
        proc = subprocess.Popen([*argv, *extra_args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=child_env(home) if env is None else env, cwd=ROOT)
    assert proc.stderr is not None
    running = RunningMain(proc, connection, home, ChildOutput(proc.stderr))
    if wait:
        try:
            running.wait_up()
        except BaseException:
            running.stop()
            raise
    return running


@contextmanager
def running_main(servers: dict[str, Any], *extra_args: str) -> Iterator[RunningMain]:
    """A main up for the block, with its config, connection file and dirs in one temp dir."""
    tmp = short_tmp_dir("eli-run-")
    try:
        main = start_main(write_config(tmp / "mcp.json", servers), tmp, *extra_args, home=tmp)
        try:
            yield main
        finally:
            main.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
