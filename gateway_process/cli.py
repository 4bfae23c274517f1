"""The arguments of `elicitron serve` (the CLI, cli_process, adds them to its `serve` subcommand and calls
`run_serve`), and `python -m gateway_process` (the same, plus `--listen-http` for main's child).

Importing this module costs nothing: `mcp` is imported only once a gateway actually runs, so the
rest of `elicitron`'s commands stay fast.
"""

import argparse
import logging
from pathlib import Path

from shared.connection_file import resolve_connection_path
from shared.descriptors import raise_soft_limit


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", metavar="NAME",
                        help="expose only this server, under its own tool names (a drop-in for the host's entry)")
    parser.add_argument("--config", type=Path,
                        help="mcpServers JSON for main, when this starts it (default: as `elicitron launch`)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the entry to paste into Claude Desktop / Cursor (mcpServers) and VS Code (servers)")
    parser.add_argument("--http", action="store_true",
                        help="with --print-config: the entry for main's --mcp-http endpoint instead of stdio")
    parser.add_argument("--rotate-token", action="store_true",
                        help="give main's --mcp-http endpoint a new bearer token now (the old one is refused)")


def run_serve(args: argparse.Namespace) -> int:
    from shared.merged_names import Exposure

    connection = resolve_connection_path(args.connection)
    exposure = Exposure(only=args.server)
    if args.print_config:
        from gateway_process.print_config import print_config

        return print_config(connection, exposure, http=args.http, config=args.config,
                            explicit_connection=args.connection)
    from gateway_process.relay_stdio import run_relayed

    return run_relayed(connection, args.server, args.config)  # no --server: every server, merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway_process",
                                     description="Elicitron's MCP gateway: every configured server, for MCP hosts")
    parser.add_argument("--connection", help="main's connection file (default: $ELICITRON_CONNECTION or the runtime dir)")
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--listen-http", metavar="[HOST:]PORT",
                        help="serve streamable HTTP for main (`elicitron main --mcp-http`) instead of stdio")
    parser.add_argument("--tls-cert", type=Path, help="with --listen-http: serve https with this certificate")
    parser.add_argument("--tls-key", type=Path, help="with --listen-http: the certificate's private key")
    parser.add_argument("--insecure-http", action="store_true",
                        help="with --listen-http: plain http on a non-loopback address")
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    raise_soft_limit()  # hosts' connections and main's peers: libzmq aborts on EMFILE (shared/descriptors.py)
    if args.listen_http:
        from gateway_process.http_app import run_http

        tls = (args.tls_cert, args.tls_key) if args.tls_cert and args.tls_key else None
        return run_http(resolve_connection_path(args.connection), args.listen_http, tls, args.insecure_http)
    return run_serve(args)
