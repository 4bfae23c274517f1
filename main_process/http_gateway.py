"""`elicitron main --mcp-http [HOST:]PORT`: MCP over streamable HTTP, served by a child process.

main does not grow an HTTP server: it runs `python -m gateway_process --listen-http HOST:PORT` (the
same gateway `elicitron serve` is, speaking HTTP), reads the `LISTENING <url>` line it prints, puts
the URL and the bearer token in the connection file, restarts it with backoff if it dies (five
failures without a stable minute end that), and stops it with main. The child attaches to main like
any other peer; each host it serves is a host peer. Why the child stopped (its last line on stderr,
e.g. "cannot listen on 127.0.0.1:8765: Address already in use") goes to main's log and, with the
gateway's state and address, into `elicitron status` (`StatusReport.mcpHttp`). A port already in use
when main starts is refused before anything starts (`probe_listen`: one line, exit 2).

The bearer token is new on every main start and on `elicitron serve --rotate-token` (the child
restarts on the new one); it lives only in the connection file (0600), for the child and for
`elicitron serve --print-config --http`. A host's pasted HTTP entry must be printed again after a
restart; the stdio `serve` entry carries no token and survives every rotation.
"""

import asyncio
import json
import logging
import secrets
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import platformdirs

from main_process.capped_log import CappedLog
from shared.addresses import split_listen, tls_files
from shared.errors import ConfigError
from shared.messages import HttpGatewayState, HttpGatewayStatus

logger = logging.getLogger(__name__)

LISTEN_TIMEOUT_S = 60.0  # the child imports mcp and binds before it prints its URL
STOP_TIMEOUT_S = 5.0
RESTART_LIMIT = 5
STABLE_S = 60.0


def new_token() -> str:
    """A fresh bearer token: one per main start (and per `serve --rotate-token`), so a token read
    while main was down (a process squatting the port, reading a host's retry) is refused after."""
    return secrets.token_urlsafe(32)


def forget_old_token_file(path: Path | None = None) -> None:
    """Earlier versions kept one token for ever in the config dir: that copy is removed."""
    path = path or Path(platformdirs.user_config_dir("elicitron")) / "mcp-http-token"
    try:
        path.unlink()
        logger.info("removed the old MCP HTTP token file %s (the token changes on every start now)", path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("cannot remove the old MCP HTTP token file %s: %s", path, exc)


def check_listen(value: str) -> str:
    """`[HOST:]PORT` as given, or ConfigError saying what is wrong (checked before main starts)."""
    host, port = split_listen(value, "--mcp-http", 8765)
    return value if value.rpartition(":")[0] else f"{host}:{port}"


def check_exposure(listen: str, cert: Path | None, key: Path | None, insecure: bool) -> tuple[Path, Path] | None:
    """The (certificate, key) to serve https with, or None for http; ConfigError (one line) when
    `listen` (checked) leaves this machine without TLS and without `--insecure-http`, or the
    certificate and key cannot be loaded."""
    return tls_files(listen.rpartition(":")[0].strip("[]"), cert, key, insecure,
                     f"--mcp-http {listen} is reachable from other machines and would send the bearer "
                     "token in clear text: give --tls-cert FILE --tls-key FILE (hosts then use https://), "
                     "or --insecure-http if this network is yours alone")


class ListenError(ConfigError):
    """--mcp-http names an address main cannot listen on (the port is in use, the host is not ours)."""


def probe_listen(listen: str) -> None:
    """Raise ListenError when `HOST:PORT` (checked) cannot be bound now, as the child would bind it."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, int(port)))
    except OSError as exc:
        raise ListenError(f"--mcp-http {listen}: cannot listen there ({exc.strerror or exc}); pick another "
                          "port, or stop what listens on it") from None


class HttpGatewayChild:
    """Runs and supervises the HTTP gateway process; `on_url(url)` once it listens (again)."""

    def __init__(self, listen: str, connection: Path, log_dir: Path, on_url: Callable[[str], None], *,
                 tls: tuple[Path, Path] | None = None, insecure: bool = False) -> None:
        self.listen = listen
        self._exposure_args = ([] if tls is None else ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]) + (
            ["--insecure-http"] if insecure else [])
        self.connection = connection
        self.log_path = log_dir / "mcp-http.stderr.log"
        self.url: str | None = None
        self.state: HttpGatewayState = "starting"
        self.error: str | None = None  # why the child last stopped
        self.counts: dict[str, int] = {}  # the child's own `STATS` line: its connections
        self._on_url = on_url
        self._stopping = asyncio.Event()
        self._process: asyncio.subprocess.Process | None = None
        self._restarting = False  # restart(): the child's exit is asked for, not a failure
        self._listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name="mcp-http gateway")

    def status(self) -> HttpGatewayStatus:
        """For `elicitron status`: state, the address asked for, where hosts reach it, the last error."""
        counts = self.counts
        return HttpGatewayStatus(state=self.state, address=self.listen, url=self.url, error=self.error,
                                 open_connections=counts.get("openConnections", 0),
                                 refused_connections=counts.get("refusedConnections", 0),
                                 timed_out_connections=counts.get("timedOutConnections", 0),
                                 sessions=counts.get("sessions", 0), refused_sessions=counts.get("refusedSessions", 0),
                                 main_peers=counts.get("mainPeers", 0))

    async def stop(self) -> None:
        self._stopping.set()
        process = self._process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._task is not None:
            await asyncio.wait([self._task], timeout=STOP_TIMEOUT_S)

    async def restart(self) -> None:
        """Stop the child and start it again now (a new token); returns once it listens (or a
        timeout passed: `status` says how it went)."""
        process = self._process
        self._listening.clear()
        self.state = "restarting"
        if self._task is None or self._task.done():  # it had failed for good: a new start, failures forgotten
            self.start()
        elif process is not None and process.returncode is None:
            self._restarting = True
            process.terminate()
        try:
            await asyncio.wait_for(self._listening.wait(), LISTEN_TIMEOUT_S)
        except TimeoutError:
            pass

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            error = await self._run_once()
            if self._stopping.is_set():
                self.state = "stopped"
                return
            if self._restarting:
                self._restarting = False
                continue
            self.error = error
            failures = 1 if time.monotonic() - started > STABLE_S else failures + 1
            logger.warning("the MCP HTTP gateway on %s stopped (%s); failure %d of %d", self.listen, error,
                           failures, RESTART_LIMIT)
            if failures >= RESTART_LIMIT:
                self.state = "failed"
                logger.error("not restarting the MCP HTTP gateway on %s (%s); see %s", self.listen, error,
                             self.log_path)
                return
            self.state = "restarting"
            try:
                await asyncio.wait_for(self._stopping.wait(), min(0.5 * 2 ** (failures - 1), 8.0))
            except TimeoutError:
                pass

    async def _run_once(self) -> str:
        log = CappedLog(self.log_path)  # its stderr, bounded: a child flooding it cannot fill the disk
        process = self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway_process", "--listen-http", self.listen,
            "--connection", str(self.connection), "--log-level", "info", *self._exposure_args,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        copying = asyncio.create_task(log.copy(process.stderr))
        try:
            line = await asyncio.wait_for(process.stdout.readline(), LISTEN_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            await copying
            return f"no LISTENING line within {LISTEN_TIMEOUT_S:.0f} s"
        text = line.decode(errors="replace").strip()
        if text.startswith("LISTENING "):
            self.url = text.split(" ", 1)[1]
            self.state = "listening"
            self._on_url(self.url)
            self._listening.set()
            logger.info("MCP hosts reach main at %s", self.url)
            await self._read_reports(process.stdout)
        code = await process.wait()
        await copying
        said = log.last_line.removeprefix("elicitron http gateway: ") or (
            text if not text.startswith("LISTENING ") else "")
        return f"exit code {code}" + (f": {said[:300]}" if said else "")

    async def _read_reports(self, stdout: asyncio.StreamReader) -> None:
        """The child's `STATS {json}` lines, until it exits."""
        self.counts = {}
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # a line over the reader's limit: not ours
                continue
            if not line:
                return
            kind, _, rest = line.decode(errors="replace").partition(" ")
            if kind != "STATS":
                continue
            try:
                counts = json.loads(rest)
            except ValueError:
                continue
            if isinstance(counts, dict):
                self.counts = {key: value for key, value in counts.items() if isinstance(value, int)}
