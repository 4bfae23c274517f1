"""`elicitron main --mcp-http [HOST:]PORT`: MCP over streamable HTTP, served by a child process.

main does not grow an HTTP server: it runs `python -m gateway_process --listen-http HOST:PORT` (the
same gateway `elicitron serve` is, speaking HTTP), reads the `LISTENING <url>` line it prints, puts
the URL and the bearer token in the connection file, restarts it with backoff if it dies (five
failures without a stable minute end that), and stops it with main (child.py supervises it). The child attaches to main like
any other peer; each host it serves is a host peer. Why the child stopped (its last line on stderr,
e.g. "cannot listen on 127.0.0.1:8765: Address already in use") goes to main's log and, with the
gateway's state and address, into `elicitron status` (`StatusReport.mcpHttp`). A port already in use
when main starts is refused before anything starts (`probe_listen`: one line, exit 2).

The bearer token is new on every main start and on `elicitron serve --rotate-token` (the child
restarts on the new one); it lives only in the connection file (0600), for the child and for
`elicitron serve --print-config --http`. A host's pasted HTTP entry must be printed again after a
restart; the stdio `serve` entry carries no token and survives every rotation.
"""

import json
import logging
import secrets
import socket
from collections.abc import Callable
from pathlib import Path

import platformdirs

from main_process.child import SupervisedChild
from shared.addresses import split_listen, tls_files
from shared.errors import ConfigError
from shared.messages import HttpGatewayStatus

logger = logging.getLogger(__name__)


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


def probe_listen(listen: str, option: str = "--mcp-http") -> None:
    """Raise ListenError when `HOST:PORT` (checked) cannot be bound now, as the child would bind it."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, int(port)))
    except OSError as exc:
        raise ListenError(f"{option} {listen}: cannot listen there ({exc.strerror or exc}); pick another "
                          "port, or stop what listens on it") from None


class HttpGatewayChild(SupervisedChild):
    """Runs and supervises the HTTP gateway process; `on_url(url)` once it listens (again)."""

    what = "MCP HTTP gateway"

    def __init__(self, listen: str, connection: Path, log_dir: Path, on_url: Callable[[str], None], *,
                 tls: tuple[Path, Path] | None = None, insecure: bool = False) -> None:
        super().__init__(listen, log_dir / "mcp-http.stderr.log", on_url, error_prefix="elicitron http gateway: ")
        self._exposure_args = ([] if tls is None else ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]) + (
            ["--insecure-http"] if insecure else [])
        self.connection = connection
        self.counts: dict[str, int] = {}  # the child's own `STATS` line: its connections

    def argv(self) -> list[str]:
        return ["-m", "gateway_process", "--listen-http", self.listen, "--connection", str(self.connection),
                "--log-level", "info", *self._exposure_args]

    def ready_url(self, line: str) -> str | None:
        return line.split(" ", 1)[1] if line.startswith("LISTENING ") else None

    def on_start(self) -> None:
        self.counts = {}

    def on_line(self, line: str) -> None:
        """The child's `STATS {json}` lines."""
        kind, _, rest = line.partition(" ")
        if kind != "STATS":
            return
        try:
            counts = json.loads(rest)
        except ValueError:
            return
        if isinstance(counts, dict):
            self.counts = {key: value for key, value in counts.items() if isinstance(value, int)}

    def status(self) -> HttpGatewayStatus:
        """For `elicitron status`: state, the address asked for, where hosts reach it, the last error."""
        counts = self.counts
        return HttpGatewayStatus(state=self.state, address=self.listen, url=self.url, error=self.error,
                                 open_connections=counts.get("openConnections", 0),
                                 refused_connections=counts.get("refusedConnections", 0),
                                 timed_out_connections=counts.get("timedOutConnections", 0),
                                 sessions=counts.get("sessions", 0), refused_sessions=counts.get("refusedSessions", 0),
                                 main_peers=counts.get("mainPeers", 0))
