"""Helpers for the sign-in tests: the test authorization + MCP server process, main with its own
data dir (so its token file is the test's), and the test browser."""

import json
import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit import zygote
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, write_config
from kit.output import ChildOutput
from kit.paths import ROOT
from kit.peer import WirePeer
from kit.zygote import launched

OAUTH_SERVER = ROOT / "tests" / "oauth_server.py"
BROWSER_SCRIPT = ROOT / "tests" / "oauth_browser.py"


@dataclass
class OAuthServers:
    proc: subprocess.Popen[bytes]
    mcp: str
    issuer: str
    elsewhere: str | None = None  # with --token-elsewhere: the token endpoint's origin

    def post(self, path: str) -> dict[str, Any]:
        request = urllib.request.Request(self.issuer + path, data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.issuer + "/test/stats", timeout=10) as response:
            return json.loads(response.read())


@contextmanager
def oauth_servers(*args: str) -> Iterator[OAuthServers]:
    entry = launched(OAUTH_SERVER, *args)  # forked by the test zygote (it imports mcp's server side)
    proc = subprocess.Popen([entry["command"], *entry["args"]], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().decode() if ready else ""
        assert line.startswith("READY "), f"the test OAuth servers did not start: {line!r}"
        urls = json.loads(line.removeprefix("READY "))
        yield OAuthServers(proc=proc, mcp=urls["mcp"], issuer=urls["issuer"], elsewhere=urls.get("elsewhere"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class Browser:
    """The test browser as `BROWSER` names it, with its own log of what it saw."""

    def __init__(self, directory: Path) -> None:
        self.log = directory / "browser.jsonl"
        self.command = f"{sys.executable} {BROWSER_SCRIPT} %s"

    def env(self, *, tamper: bool = False, follow: bool = True) -> dict[str, str]:
        return {"BROWSER": self.command, "OAUTH_BROWSER_LOG": str(self.log),
                "OAUTH_BROWSER_TAMPER": "1" if tamper else "0", "OAUTH_BROWSER_FOLLOW": "1" if follow else "0"}

    def open(self, url: str, **options: bool) -> None:
        """What a window does on Accept: hand the URL to the user's browser (as `webbrowser` would
        run the `BROWSER` command), and wait for it to finish."""
        command = [part.replace("%s", url) for part in self.command.split()]
        subprocess.run(command, env={**child_env(), **self.env(**options)}, timeout=60, check=True)

    def steps(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@dataclass
class OAuthMain:
    running: RunningMain
    data_home: Path

    @property
    def token_file(self) -> Path:
        return self.data_home / "elicitron" / "oauth-tokens.json"

    @property
    def audit_db(self) -> Path:
        return self.data_home / "elicitron" / "audit.sqlite3"


def start_oauth_main(config: Path, data_home: Path, runtime: Path | None = None, *,
                     open_files: int | None = None) -> OAuthMain:
    """main (log level debug, to stderr) whose data dir, and so token file, is `data_home`.
    No keyring backend: the file is the store, as on CI. `open_files`: main runs as under
    `ulimit -n open_files` (soft and hard limit both, so main cannot raise it)."""
    runtime = runtime or short_tmp_dir()
    connection = runtime / "connection.json"
    argv = [sys.executable, "-m", "cli_process", "--log-level", "debug", "main", "--connection", str(connection),
            "--config", str(config)]
    env = child_env(XDG_DATA_HOME=str(data_home), PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
    env.pop("ELICITRON_TOKEN_STORE", None)
    proc: Any
    if open_files is not None:  # the shell's ulimit, then exec: the pid is main's
        argv = ["sh", "-c", f'ulimit -n {int(open_files)} && exec "$@"', "sh", *argv]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=env, cwd=ROOT)
    elif zygote.enabled():  # forked from a process that imported main (kit/zygote.py)
        proc = zygote.spawn_cli(argv[3:], env)
    else:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=env, cwd=ROOT)
    assert proc.stderr is not None
    running = RunningMain(proc, connection, None, ChildOutput(proc.stderr))
    running.wait_up()
    return OAuthMain(running=running, data_home=data_home)


def oauth_config(directory: Path, name: str, url: str, oauth: dict[str, Any] | None = None, **extra: Any) -> Path:
    entry: dict[str, Any] = {"url": url, **extra}
    if oauth is not None:
        entry["oauth"] = oauth
    return write_config(Path(tempfile.mkdtemp(dir=directory)) / "mcp.json", {name: entry})


def server_status(peer: Any, name: str, wanted: str, timeout_s: float = 30.0, error_has: str = "") -> dict[str, Any]:
    """Wait until main's `servers` list shows `name` with status `wanted` (and an error holding
    `error_has`); that server's entry."""
    def matches(topic: str, body: Any) -> bool:
        servers = body.get("servers") if topic in ("servers", "welcome") else None
        return any(s["name"] == name and s["status"] == wanted and error_has in (s.get("error") or "")
                   for s in servers or [])

    _, body = peer.expect(matches, timeout_s)
    return next(s for s in body["servers"] if s["name"] == name)


def stop_and_read_log(main: OAuthMain) -> str:
    """Stop main (SIGTERM) and return everything it logged."""
    proc = main.running.proc
    for peer in main.running.peers:
        peer.close()
    main.running.peers.clear()
    proc.terminate()
    proc.wait(timeout=20)
    return main.running.stderr.text()


def expect_sign_in_card(peer: Any, timeout_s: float = 30.0) -> dict[str, Any]:
    _, invoke = peer.expect(lambda t, b: t == "msgElicitationTransferInvoke" and b.get("kind") == "sign-in",
                            timeout_s)
    return invoke


def reply_on(peer: Any, channel: str, timeout_s: float = 30.0) -> dict[str, Any]:
    return peer.expect(lambda t, b: t == channel, timeout_s)[1]


def open_files_of(pid: int) -> int:
    """How many descriptors process `pid` holds now."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except FileNotFoundError:  # it is gone
        return 0


CONNECT_TIMEOUT_S = 5.0


class IdleFlood:
    """`count` TCP connections to 127.0.0.1:`port` that send nothing, opened one after another as
    a local attacker would. `closed_by_peer()` tells how many the listener has closed."""

    def __init__(self, port: int, count: int) -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = count + 512
        if soft < wanted:  # this test process holds them all
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
        self.open: list[socket.socket] = []
        self.closed = 0
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(CONNECT_TIMEOUT_S)
            try:
                sock.connect(("127.0.0.1", port))
            except TimeoutError:
                pass  # the listener's queue is full: it stays a half-open attempt
            except OSError:  # refused outright
                sock.close()
                self.closed += 1
                continue
            sock.setblocking(False)
            self.open.append(sock)

    def closed_by_peer(self, wait_s: float = 0.0) -> int:
        """Read every connection still open (waiting up to `wait_s` for one to have something);
        those the listener closed (EOF, reset, or an answer and then EOF) are counted and let go.
        The running total."""
        poller = select.poll()
        by_fd = {sock.fileno(): sock for sock in self.open}
        for fd in by_fd:
            poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        for fd, _ in poller.poll(int(wait_s * 1000)):
            sock = by_fd[fd]
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:  # reset, or the connect was refused
                data = b""
            if data:
                continue  # an answer; its EOF comes next
            sock.close()
            self.open.remove(sock)
            self.closed += 1
        return self.closed

    def close(self) -> None:
        for sock in self.open:
            sock.close()
        self.open.clear()


@contextmanager
def started_mains() -> Iterator[list[OAuthMain]]:
    """A list a test appends the mains it starts to; every one is stopped at the end."""
    started: list[OAuthMain] = []
    try:
        yield started
    finally:
        for main in started:
            main.running.stop()


def start_with_window(started: list[OAuthMain], config: Path, data_home: Path) -> tuple[OAuthMain, WirePeer]:
    """main for `config` (kept in `started`) and a contract window attached to it."""
    main = start_oauth_main(config, data_home)
    started.append(main)
    return main, main.running.peer("sign-in window")
