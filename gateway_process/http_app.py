"""Streamable HTTP for MCP hosts that take a URL: main's `--mcp-http` child process.

    python -m gateway_process --listen-http HOST:PORT --connection FILE

main starts this process, reads the `LISTENING <url>` line it prints, and stops (or restarts) it;
this process ends by itself when main does. Every request is checked before any MCP code sees it:
a foreign `Origin` or `Host` gets 403 (DNS-rebinding protection, the checks of
`mcp.server.transport_security`), a missing or wrong `Authorization: Bearer <token>` gets 401 (the
token is in main's 0600 connection file). `/mcp/<server>` is one server as itself: each host's own
session with it, relayed; `/mcp` every server at once, with prefixed names, each host's own
sessions with all of them, merged by main (`http_relay.py`).

Hosts: the MCP sessions of one host (its `clientInfo` title or name) share a host peer of main
(`http_peers.py`); 2026-07-28 requests carry no session, so those of one client are one session.
At most 32 sessions per host and 100 in all (`http_sessions.py`); a session goes when it is
deleted, or after 10 minutes (`ELICITRON_MCP_HTTP_IDLE_S`) without a request or a GET stream.
"""

import hmac
import json
import logging
import os
import socket
import ssl
import sys
from pathlib import Path
from urllib.parse import unquote

import anyio
import anyio.abc
import uvicorn
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from gateway_process.http_hosts import in_url, public_host, served_names
from gateway_process.http_logs import bound_repeats
from gateway_process.http_peers import PeerPool
from gateway_process.http_relay import RelayedServer
from gateway_process.http_sessions import IDLE_S, SessionBudget, idle_seconds
from gateway_process.link import MainLink
from shared.addresses import is_loopback, split_listen
from shared.connection_file import read_connection_file
from shared.descriptors import raise_soft_limit
from shared.errors import ConfigError, ConnectionFileError, MainUnreachableError
from shared.http_guard import ConnectionGuard, guarded_protocol
from shared.messages import MainBody

logger = logging.getLogger(__name__)

SWEEP_S = 10.0  # at most; a shorter idle time is swept four times as often as it lasts
MIN_SWEEP_S = 0.25
PARENT_CHECK_S = 1.0
EXIT_FAILED = 1
MAX_CONNECTIONS = 1000
MAX_PER_SOURCE = 128  # from one non-loopback address
DESCRIPTOR_RESERVE = 256  # the child's own: its links to main, logs, what the SDK opens
HEAD_TIMEOUT_S = 5.0  # a connection that sends no request head (new, or idle after one) is closed
BODY_TIMEOUT_S = 30.0
REPORT_S = 1.0  # how often main hears the counts (when they changed)


def parse_listen(value: str) -> tuple[str, int]:
    """`[HOST:]PORT` -> (host, port); 127.0.0.1 unless a host is named. Raises ConfigError."""
    return split_listen(value, "--listen-http", 8765)


def security_settings(names: list[str]) -> TransportSecuritySettings:
    """`Host` and `Origin` may name only what this gateway serves (`http_hosts.served_names`)."""
    shown = [in_url(name) for name in names]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=[f"{name}:*" for name in shown],
                                     allowed_origins=[f"{scheme}://{name}:*" for name in shown
                                                      for scheme in ("http", "https")])


class _Directory:
    """A controller-role link for what the paths need before any host attaches: the servers (for
    `/mcp/<server>`)."""

    def __init__(self, connection: Path) -> None:
        self.link = MainLink(connection, "elicitron http gateway", self, role="controller")

    def on_pushed(self, body: MainBody) -> None:
        pass  # the link keeps `servers` itself

    def on_detached(self, why: str) -> None:
        pass


class HttpGateway:
    """The ASGI app."""

    def __init__(self, connection: Path, token: str, bind_host: str, guard: ConnectionGuard | None = None,
                 idle_s: float = IDLE_S) -> None:
        self.connection = connection
        self.guard = guard
        self.idle_s = idle_s  # a session without a request or a GET stream that long is ended
        self._token = token.encode()
        self._names = served_names(bind_host)
        self._settings = security_settings(self._names)
        self._security = TransportSecurityMiddleware(self._settings)
        self._directory = _Directory(connection)
        self._budget = SessionBudget()
        self._pool = PeerPool(connection, self._merged_weight)
        self._relayed: dict[str | None, RelayedServer] = {}  # by server; None: /mcp, every server
        self._group: anyio.abc.TaskGroup | None = None

    # ---- ASGI --------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        refused = await self._security.validate_request(request, is_post=request.method == "POST")
        if refused is not None:
            if refused.status_code in (403, 421):  # a foreign Origin or Host: DNS rebinding, MCP's MUST
                refused = JSONResponse({"error": "forbidden: foreign Origin or Host header (this gateway serves "
                                                 f"{', '.join(self._names)})"}, status_code=403)
            await refused(scope, receive, send)
            return
        if not self._authorized(request):
            await JSONResponse({"error": "unauthorized: send Authorization: Bearer <token> (from `elicitron serve "
                                         "--print-config --http`)"}, status_code=401,
                               headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        path = scope["path"].rstrip("/")
        if path.count("/") == 3 and path.startswith("/mcp/") and path.endswith("/mcp"):
            path = path[:-4]  # `/mcp/<server>/mcp` is `/mcp/<server>` (hosts that append /mcp to a URL)
        if path == "/mcp":
            key: str | None = None
        elif path.startswith("/mcp/") and "/" not in path[5:]:
            key = unquote(path[5:])
            if key not in self._directory.link.servers:
                await JSONResponse({"error": f"no server named {key!r}"}, status_code=404)(scope, receive, send)
                return
        else:
            await JSONResponse({"error": "not found: MCP is at /mcp and /mcp/<server>"},
                               status_code=404)(scope, receive, send)
            return
        # the host's own session with that server (or with every server, merged), relayed (http_relay.py)
        await self._relayed_server(key).handle(scope, receive, send)

    def _authorized(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self._token)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                await self._directory.link.attach()
            except MainUnreachableError as exc:
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            group.start_soon(self._sweep)
            group.start_soon(self._exit_with_parent)
            if self.guard is not None:
                group.start_soon(self.guard.run)
                group.start_soon(self._report)
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            for relayed in self._relayed.values():
                relayed.close()
            self._directory.link.close()
            group.cancel_scope.cancel()
        await send({"type": "lifespan.shutdown.complete"})

    # ---- paths and hosts ----------------------------------------------------------------------

    def _relayed_server(self, server: str | None) -> RelayedServer:
        relayed = self._relayed.get(server)
        if relayed is None:
            assert self._group is not None
            relayed = self._relayed[server] = RelayedServer(self._pool, self._budget, server, self._settings,
                                                            self._group)
        return relayed

    def _merged_weight(self) -> int:
        """Relayed sessions one `/mcp` session opens in main: one per server not stopped or failed."""
        return sum(1 for info in self._directory.link.servers.values() if info.status not in ("stopped", "failed"))

    async def _sweep(self) -> None:
        # An abandoned session is ended at most a quarter of its idle time late (SWEEP_S at most).
        every = max(MIN_SWEEP_S, min(SWEEP_S, self.idle_s / 4))
        while True:
            await anyio.sleep(every)
            for relayed in list(self._relayed.values()):
                relayed.sweep(self.idle_s)

    def counts(self) -> dict[str, int]:
        """What `elicitron status` shows of this child (main reads it from the `STATS` lines)."""
        guard = self.guard
        return {"openConnections": guard.open if guard else 0, "refusedConnections": guard.refused if guard else 0,
                "timedOutConnections": guard.timed_out if guard else 0, "sessions": self._budget.open,
                "refusedSessions": self._budget.refused, "mainPeers": self._pool.peers}

    async def _report(self) -> None:
        said: dict[str, int] = {}
        while True:
            await anyio.sleep(REPORT_S)
            counts = self.counts()
            if counts != said:
                print("STATS " + json.dumps(counts), flush=True)
                said = counts

    async def _exit_with_parent(self) -> None:
        parent = os.getppid()
        while os.getppid() == parent:
            await anyio.sleep(PARENT_CHECK_S)
        logger.warning("main (pid %d) is gone; stopping", parent)
        os._exit(0)  # main's child: nothing left to serve, and nothing to save


def run_http(connection: Path, listen: str, tls: tuple[Path, Path] | None = None, insecure: bool = False) -> int:
    """`tls`: (certificate, key) for https; a non-loopback address needs it, or `insecure`."""
    try:
        host, port = parse_listen(listen)
        info = read_connection_file(connection)
    except (ConfigError, ConnectionFileError) as exc:
        print(f"elicitron http gateway: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not info.mcp_http_token:
        print(f"elicitron http gateway: no mcpHttpToken in {connection}", file=sys.stderr)
        return EXIT_FAILED
    if tls is None and not insecure and not is_loopback(host):  # main checks first; this is the backstop
        print(f"elicitron http gateway: {host} is not loopback: give TLS or --insecure-http", file=sys.stderr)
        return EXIT_FAILED
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        print(f"elicitron http gateway: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    bound = listener.getsockname()[1]
    listener.listen(socket.SOMAXCONN)  # before it is announced: a host told the URL may connect at once
    bound_repeats()
    descriptors = raise_soft_limit()
    context = None
    if tls is not None:  # the guard does the handshake: see http_guard.py
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
    guard = ConnectionGuard(max(16, min(MAX_CONNECTIONS, descriptors - DESCRIPTOR_RESERVE)), MAX_PER_SOURCE,
                            HEAD_TIMEOUT_S, BODY_TIMEOUT_S, tls=context)
    app = HttpGateway(connection, info.mcp_http_token, host, guard, idle_seconds())
    config = uvicorn.Config(app, log_level="warning", lifespan="on", http=guarded_protocol(guard),
                            timeout_keep_alive=int(HEAD_TIMEOUT_S), backlog=socket.SOMAXCONN)
    scheme = "https" if tls is not None else "http"
    print(f"LISTENING {scheme}://{in_url(public_host(host))}:{bound}/mcp", flush=True)
    anyio.run(uvicorn.Server(config).serve, [listener])
    return 0

