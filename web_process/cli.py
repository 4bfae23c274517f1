"""`elicitron web`: the web window's arguments and its server (Starlette on uvicorn).

The socket is bound here before uvicorn starts, so `--listen 127.0.0.1:0` knows its port: the
origins the app accepts, the URL printed on stdout and the one written for `elicitron pair --web`
all name the real one. uvicorn serves through the connection guard (connections.py), which also
does the TLS handshake.
"""

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from shared.errors import ConfigError
from web_process.listen import DEFAULT_HOST, DEFAULT_PORT, Listen, check_listen

if TYPE_CHECKING:
    import socket

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 2


def add_web_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--listen", default=f"{DEFAULT_HOST}:{DEFAULT_PORT}", metavar="[HOST:]PORT",
                   help=f"where browsers reach the web window (default {DEFAULT_HOST}:{DEFAULT_PORT}; "
                        "port 0 picks a free one; a non-loopback host needs --tls-cert/--tls-key or --insecure-http)")
    p.add_argument("--tls-cert", type=Path, metavar="FILE", help="serve https with this certificate (PEM)")
    p.add_argument("--tls-key", type=Path, metavar="FILE", help="the certificate's private key (PEM)")
    p.add_argument("--insecure-http", action="store_true",
                   help="plain http on a non-loopback address: the device cookie in clear text")
    p.add_argument("--origin", action="append", default=[], metavar="URL",
                   help="also accept pages served as URL (scheme://host[:port]), e.g. by a TLS reverse proxy")
    add_web_dir_argument(p)


def add_web_dir_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--web-dir", type=Path, metavar="DIR",
                   help="the web window's private directory: paired devices, pairing codes "
                        "(default: $ELICITRON_WEB_DIR or <user state dir>/elicitron/web)")


def run_web(args: argparse.Namespace) -> int:
    import asyncio  # here, not above: every command's parser loads this module for its arguments

    from shared.connection_file import resolve_connection_path
    from web_process.devices import WebDir

    listen = check_listen(args.listen, args.tls_cert, args.tls_key, args.insecure_http, tuple(args.origin))
    connection = resolve_connection_path(args.connection)
    web_dir = WebDir(args.web_dir)
    sock = _bind(listen)
    listen = listen.with_port(sock.getsockname()[1])
    import uvicorn  # only now: `elicitron web --help` stays fast

    from shared.http_guard import guarded_protocol
    from web_process.app import WebWindow
    from web_process.connections import BACKLOG, HEAD_TIMEOUT_S, connection_guard
    from web_process.server import WebServer

    guard = connection_guard(listen.tls)  # the soft open-files limit raised first: the caps follow it
    window = WebWindow(connection, web_dir, listen)
    app = window.asgi()
    # An open page's stream never ends by itself: on SIGTERM or Ctrl-C it gets SHUTDOWN_GRACE_S.
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_S, http=guarded_protocol(guard),
                            timeout_keep_alive=int(HEAD_TIMEOUT_S), backlog=BACKLOG)
    server = WebServer(config, window.close_streams, guard.run)
    # Behind a reverse proxy the address a phone can open is the first --origin, not ours: pairing
    # links and notify's links name it.
    public = listen.extra_origins[0] if listen.extra_origins else listen.url()
    web_dir.announce(public)
    served_as = f", browsers open {public}" if public != listen.url() else ""
    print(f"elicitron web: {listen.url()} (pair a browser: elicitron pair --web{served_as})", flush=True)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        web_dir.withdraw()
        sock.close()
    return 0


def _bind(listen: Listen) -> "socket.socket":
    import socket

    from web_process.connections import BACKLOG

    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((listen.host, listen.port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--listen {listen.host}:{listen.port}: cannot listen there "
                          f"({exc.strerror or exc}); pick another port, or stop what listens on it") from None
    sock.listen(BACKLOG)  # how many the guard may have to take at once (connections.py)
    sock.set_inheritable(True)
    return sock


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m web_process")
    parser.add_argument("--connection")
    add_web_arguments(parser)
    logging.basicConfig(level=logging.WARNING)
    try:
        return run_web(parser.parse_args())
    except ConfigError as exc:
        print(f"elicitron web: {exc}", file=sys.stderr)
        return 2
