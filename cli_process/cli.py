"""The `elicitron` command.

    launch   start main in the background if needed, open a window
    main     run main in the foreground (headless)
    window   attach one more window
    pair     allow a remote window and print its connection file
    status   servers, windows and pending requests
    stop     stop main and its servers
    reload   re-read the config
    server   start, stop or restart one server
    call     call a tool through main
    auth     sign-in to a remote server: status, login, logout
    audit    the audit log
    rules    remembered answers, tool approvals, config rules; revoke them (rules_cli)
    ask      ask the person at the windows (asker_process.cli; the exit code is the answer)
    serve    an MCP server for hosts (Claude Desktop, Cursor, ...): every server, through main
    web      a web window: browsers (a phone) as windows of main (web_process; pair with `pair --web`)
    devices  the web window's paired devices; revoke one (devices_cli)
    config   `config import`: a Claude Desktop, Cursor or VS Code config's servers added (config_import)

Each command imports only what it needs (`mcp` for `main` and `serve` alone, Qt never: windows are
their own process), so a command that only talks to main starts fast. `serve` is the gateway
package's (`gateway_process`); this module only hands it its arguments.
"""

import argparse
import json
import logging
import os
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli_process.command import EXIT_FAILED, EXIT_NOT_RUNNING, EXIT_USAGE, connection_of
from cli_process.policy_cli import add_policy_parser, check_policies
from cli_process.store_cli import add_store_arguments
from main_process.paths import default_log_dir
from shared.terminal_text import for_terminal, json_for_terminal

if TYPE_CHECKING:
    from shared.messages import ChannelReply, ListenerStatus, NotifyStatus, ServerInfo

from shared.errors import (
    AlreadyRunningError,
    ConfigError,
    ConnectionFileError,
    ElicitronError,
    MainUnreachableError,
)

logger = logging.getLogger(__name__)

EXIT_CLOSED_PIPE = 128 + 13  # as a process that SIGPIPE ended: the reader of our output went away
SERVER_SETTLE_S = 10.0  # `server start|restart` waits this long for the server to be ready or fail
MAIN_START_TIMEOUT_S = 60.0
LOST_RACE_GRACE_S = 10.0


class Interrupted(BaseException):
    """A signal that ends a command the way Ctrl-C does (SIGTERM on `call`): exit 128 + signum, quietly."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            code = _main(argv)
        finally:
            sys.stdout.flush()  # here (also after --help), so a reader that left shows up below
    except BrokenPipeError:
        # `elicitron status | head`: whoever read our output has gone; nothing more to say, and
        # nothing for the interpreter to fail to flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_PIPE
    return code


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ask = _ask_command(argv)
    if ask is not None:  # straight there: its start-up is part of every question's latency
        return cmd_ask_argv(*ask)
    args = _parser().parse_args(argv)
    log_format = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    level = getattr(logging, args.log_level.upper())
    try:
        log_file = getattr(args, "log_file", None)
        if log_file:
            from main_process.private_files import open_private_file

            # 0600: tool output and server messages land in main's log (its directory is the user's).
            logging.basicConfig(level=level, format=log_format, stream=open_private_file(Path(log_file), "a"))
        else:
            logging.basicConfig(level=level, format=log_format)
    except (OSError, ConnectionFileError) as exc:
        print(f"elicitron: cannot write the log file: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"elicitron: config error: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except AlreadyRunningError as exc:
        print(f"elicitron: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_FAILED
    except (MainUnreachableError, ConnectionFileError) as exc:
        print(f"elicitron: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_NOT_RUNNING
    except ElicitronError as exc:  # main's messages carry servers' and peers' text
        print(f"elicitron: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except Interrupted as exc:
        return 128 + exc.signum


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elicitron", description="Elicitron: a consent layer for MCP elicitation")
    parser.add_argument("--log-level", default="warning", help="debug, info, warning (default), error")
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_connection(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--connection", help="connection file (default: $ELICITRON_CONNECTION or the runtime dir)")
        return p

    p = with_connection(sub.add_parser("launch", help="start main in the background if needed, open a window"))
    p.add_argument("--config", type=Path, help="mcpServers JSON (default: user config dir, else the demo)")
    p.add_argument("--name", help="window name")
    p.add_argument("--no-auto-open", action="store_true",
                   help="do not let main open a window by itself when a request arrives and none is attached")
    p.add_argument("--no-window", action="store_true", help="only make sure main runs; open no window")
    p.add_argument("--detach", action="store_true",
                   help="open the window as a process of its own and return (its log: <state dir>/log/window.log); "
                        "scripts/launch does this")
    p.set_defaults(func=cmd_launch)

    p = with_connection(sub.add_parser("main", help="run main in the foreground (headless)"))
    p.add_argument("--config", type=Path, help="mcpServers JSON (default: user config dir, else the demo)")
    p.add_argument("--log-file", help="log here instead of stderr")
    p.add_argument("--auto-open-window", action=argparse.BooleanOptionalAction, default=False,
                   help="open a window when a request arrives and none is attached (default: off)")
    p.add_argument("--listen", metavar="tcp://HOST:PORT",
                   help="also accept remote windows here (CURVE; pair them with `elicitron pair`)")
    p.add_argument("--max-message-bytes", type=int, default=1 << 20,
                   help="largest message body a peer may send (default 1048576)")
    p.add_argument("--mcp-http", metavar="[HOST:]PORT",
                   help="also serve every server to MCP hosts over streamable HTTP (/mcp, /mcp/<server>; "
                        "127.0.0.1 unless HOST is given; bearer token in the connection file)")
    p.add_argument("--web", metavar="[HOST:]PORT",
                   help="also run the web window (browsers, a phone: pair them with `elicitron pair --web`) "
                        "as a child of main; 127.0.0.1 unless HOST is given")
    p.add_argument("--tls-cert", type=Path, metavar="FILE",
                   help="with --mcp-http or --web: serve https with this certificate (PEM); needed off loopback")
    p.add_argument("--tls-key", type=Path, metavar="FILE",
                   help="with --mcp-http or --web: the certificate's private key (PEM)")
    p.add_argument("--insecure-http", action="store_true",
                   help="with --mcp-http or --web on a non-loopback address: plain http, the token or the "
                        "device cookie in clear text")
    add_store_arguments(p, config=False)
    p.set_defaults(func=cmd_main)

    p = with_connection(sub.add_parser("pair", help="allow a remote window and print its connection file; "
                                                    "--web: a one-time link that pairs a browser"))
    p.add_argument("--name", help="a name for the remote window's key (default remote), or the browser's (--web; "
                                   "default: yours and the browser's, as in \"ana's Chrome on Android\")")
    p.add_argument("--web", action="store_true",
                   help="print a one-time link (5 minutes) that pairs a browser with the running web window")
    p.add_argument("--qr", action="store_true",
                   help="with --web: print the link's QR code even when stdout is not a terminal")
    from web_process.cli import add_web_arguments, add_web_dir_argument  # no uvicorn until it runs

    add_web_dir_argument(p)
    p.add_argument("--host", help="host name the remote machine uses to reach this one")
    p.add_argument("--output", type=Path, metavar="FILE",
                   help="write the connection file here, 0600 (default: print it)")
    p.set_defaults(func=cmd_pair)

    p = with_connection(sub.add_parser("window", help="attach one more window to the running main"))
    p.add_argument("--name", help="window name")
    p.set_defaults(func=cmd_window)

    p = with_connection(sub.add_parser("status", help="servers, windows and pending elicitations"))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)

    p = with_connection(sub.add_parser("stop", help="stop main and its servers"))
    p.add_argument("--timeout", type=float, default=20.0)
    p.set_defaults(func=cmd_stop)

    p = with_connection(sub.add_parser("reload", help="re-read the config: start added, stop removed servers"))
    p.add_argument("--config", type=Path,
                   help="read this mcpServers JSON instead (main keeps using it; a path on main's machine)")
    p.set_defaults(func=cmd_reload)

    p = with_connection(sub.add_parser("server", help="start, stop or restart one server"))
    p.add_argument("action", choices=["start", "stop", "restart"])
    p.add_argument("server")
    p.add_argument("--wait", type=float, default=SERVER_SETTLE_S, metavar="SECONDS",
                   help=f"start/restart: wait this long for the server to be ready or fail (default "
                        f"{SERVER_SETTLE_S:.0f}; 0: do not wait)")
    p.set_defaults(func=cmd_server)

    p = with_connection(sub.add_parser("audit", help="the audit log: every elicitation and its outcome (from the "
                                                     "running main's store; with no main, this machine's)"))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--limit", type=int, default=50, help="the newest N rows (1 to 10000; default 50)")
    p.add_argument("--server", help="only this server")
    add_store_arguments(p, config=True)
    p.set_defaults(func=cmd_audit)

    p = with_connection(sub.add_parser("call", help="call a tool through main; elicitations show in the windows"))
    p.add_argument("server")
    p.add_argument("tool")
    p.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the result")
    p.add_argument("--json", action="store_true", help="print the whole CallToolResult as JSON")
    p.set_defaults(func=cmd_call)

    p = with_connection(sub.add_parser("auth", help="sign-in (OAuth) to a remote server: status, login, logout"))
    p.add_argument("action", choices=["status", "login", "logout"])
    p.add_argument("server")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_auth)
    p = with_connection(sub.add_parser(
        "rules", help="remembered answers, tool approvals and config rules; revoke them",
        description="List the rules main applies before asking a window, or revoke some: "
                    "`elicitron rules revoke ID...` or `elicitron rules revoke --all [--server S | --asker NAME]`."))
    p.add_argument("action", nargs="?", choices=["list", "revoke"], default="list")
    p.add_argument("ids", nargs="*", metavar="ID", help="rule ids to revoke (see `elicitron rules`)")
    p.add_argument("--all", action="store_true", help="revoke every remembered rule (config rules stay)")
    p.add_argument("--server", help="with --all: only this server's rules")
    p.add_argument("--asker", help="with --all: only the rules of this asking program (`elicitron ask`)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_store_arguments(p, config=True)  # with no main running: the store to read
    p.set_defaults(func=cmd_rules)
    # Listed for --help; `main` hands `elicitron [--log-level L] ask ...` to asker_process before parsing.
    p = sub.add_parser("ask", add_help=False, help="ask the person at the windows; the exit code is the answer "
                       "(`elicitron ask --help`)")
    p.set_defaults(func=lambda args: cmd_ask_argv(["--help"]))
    from gateway_process.cli import add_serve_arguments  # argparse only: no mcp until a gateway runs

    p = with_connection(sub.add_parser("serve", help="an MCP server for hosts (Claude Desktop, Cursor, VS Code): "
                                                     "every configured server through main, over stdio"))
    add_serve_arguments(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("devices", help="the web window's paired devices (browsers); revoke one",
                       description="List the browsers paired with the web window (name, when paired, last "
                                   "seen), or revoke one at once: `elicitron devices revoke NAME`.")
    from cli_process.devices_cli import add_devices_arguments

    add_devices_arguments(p)
    add_web_dir_argument(p)
    p.set_defaults(func=cmd_devices)

    from cli_process.config_import import add_config_arguments

    add_config_arguments(sub)

    p = with_connection(sub.add_parser("web", help="a web window: a browser on this machine or a phone answers "
                                                   "like a window (pair it with `elicitron pair --web`)"))
    add_web_arguments(p)
    p.set_defaults(func=cmd_web)

    add_policy_parser(sub)
    return parser


class _Version(argparse.Action):
    """--version, reading the installed version only when asked (importlib.metadata is not free)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("elicitron")
        except PackageNotFoundError:
            number = "(not installed: run from a checkout)"
        print(f"elicitron {number}")
        parser.exit()


def _ask_command(argv: list[str]) -> tuple[list[str], str | None] | None:
    """(arguments after `ask`, --log-level) when the command is `ask`, else None."""
    index, level = 0, None
    while index < len(argv) and argv[index].startswith("--log-level"):
        if "=" in argv[index]:
            level = argv[index].split("=", 1)[1]
            index += 1
        else:
            level = argv[index + 1] if index + 1 < len(argv) else None
            index += 2
    return (argv[index + 1:], level) if argv[index:index + 1] == ["ask"] else None


# ---- commands --------------------------------------------------------------------------


def cmd_audit(args: argparse.Namespace) -> int:
    from cli_process.audit_cli import cmd_audit as from_main_or_store  # the store: only for this command

    return from_main_or_store(args)


def cmd_rules(args: argparse.Namespace) -> int:
    from cli_process.rules_cli import cmd_rules as list_or_revoke  # the rule store: only for this command

    return list_or_revoke(args)


def cmd_main(args: argparse.Namespace) -> int:
    import asyncio

    from main_process.config import load_config
    from main_process.http_gateway import ListenError, check_exposure, check_listen
    from main_process.store.factory import chosen_store
    from shared.errors import StoreUnavailableError
    from shared.event_loop import loop_factory

    config = load_config(args.config)
    check_policies(config)  # a bad policy file: one line and exit 2 before anything starts
    store = chosen_store(args.store, config.store)  # --store, else ELICITRON_STORE, else the config's
    new_loop = loop_factory()  # a bad ELICITRON_LOOP fails here, before anything starts
    tls = None
    if args.mcp_http is not None:
        # a bad value, or a LAN address without TLS, fails here with its one-line error, exit 2
        tls = check_exposure(check_listen(args.mcp_http), args.tls_cert, args.tls_key, args.insecure_http)
    web = None
    if args.web is not None:
        from web_process.listen import check_listen as check_web_listen

        web = check_web_listen(args.web, args.tls_cert, args.tls_key, args.insecure_http)  # exit 2 here
    if args.max_message_bytes < 1024:
        print("elicitron: --max-message-bytes must be at least 1024", file=sys.stderr)
        return EXIT_USAGE
    # After the checks: importing main (mcp's types) is ~0.6 s of CPU, which a bad config or option
    # need not wait for to say so.
    from main_process.app import MainApp

    app = MainApp(config, connection_of(args), auto_open_window=args.auto_open_window, listen=args.listen,
                  max_body_bytes=args.max_message_bytes, mcp_http=args.mcp_http, mcp_http_tls=tls,
                  mcp_http_insecure=args.insecure_http, web=web.address() if web is not None else None,
                  web_tls=web.tls if web is not None else None, web_insecure=args.insecure_http, store=store)
    try:
        asyncio.run(app.run(), loop_factory=new_loop)
    except ConnectionFileError as exc:  # e.g. a runtime dir main cannot make private
        print(f"elicitron: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except StoreUnavailableError as exc:  # the store is unreachable: main never started (the URL redacted)
        print(f"elicitron: {for_terminal(str(exc))}", file=sys.stderr)
        if args.log_file:
            logger.error("%s", exc)
        return EXIT_FAILED
    except ListenError as exc:  # --mcp-http or --web on a port in use: main never started
        print(f"elicitron: {exc}", file=sys.stderr)
        if args.log_file:
            logger.error("%s", exc)  # and in the log file, where the next look goes
        return EXIT_USAGE
    return 0


def cmd_pair(args: argparse.Namespace) -> int:
    """Print (or with --output, write 0600) a connection file for a remote window; its key is
    allowed from now on. A window refuses a connection file other users can read."""
    if args.web:
        return _pair_web(args)
    import msgspec

    from main_process.wire.curve_keys import CurveKeys
    from shared.connection_file import ConnectionInfo, read_connection_file

    local = read_connection_file(connection_of(args))
    if not local.remote_endpoint or not local.remote_server_key:
        print("elicitron: main is not listening for remote windows; start it with --listen tcp://HOST:PORT",
              file=sys.stderr)
        return EXIT_FAILED
    endpoint = local.remote_endpoint
    if args.host:
        endpoint = f"tcp://{args.host}:{endpoint.rsplit(':', 1)[1]}"
    output = None
    if args.output is not None:
        try:  # opened before the key is allowed: a file that cannot be written allows nothing
            output = _open_0600(args.output)
        except OSError as exc:
            print(f"elicitron: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_FAILED
    public, secret = CurveKeys().allow_new_client(args.name or "remote")
    remote = ConnectionInfo(protocol=local.protocol, endpoint=endpoint, token=local.token, pid=local.pid,
                            server_key=local.remote_server_key, client_public_key=public.decode(),
                            client_secret_key=secret.decode())
    text = msgspec.json.encode(remote).decode() + "\n"
    if output is None:
        _tighten_if_a_file(sys.stdout)  # `pair > laptop.json`: the shell made it 0644 (umask)
        sys.stdout.write(text)
        if sys.stdout.isatty():
            print("elicitron: save it with `elicitron pair --output FILE` (0600); on the remote machine: "
                  "elicitron window --connection FILE", file=sys.stderr)
        return 0
    with output:
        output.write(text)
    print(f"elicitron: wrote {args.output} (0600); copy it to the remote machine keeping it 0600 (scp -p), "
          f"then: elicitron window --connection {args.output.name}", file=sys.stderr)
    return 0


def _open_0600(path: Path) -> Any:
    """`path` opened for writing, 0600 (an existing file is tightened), never through a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return os.fdopen(fd, "w", encoding="utf-8")


def _tighten_if_a_file(stream: Any) -> None:
    """A regular file of ours that stdout was redirected to is made 0600 (it holds secret keys)."""
    try:
        fd = stream.fileno()
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o700)
    except (OSError, ValueError, AttributeError):
        pass  # a pipe, a terminal, or a stream without a descriptor: nothing to tighten


def cmd_launch(args: argparse.Namespace) -> int:
    from main_process.config import load_config
    from shared.event_loop import loop_factory

    connection = connection_of(args)
    # A window that cannot start (no display, missing system libraries) says so in one line before
    # main is started behind it; the check runs in the renderer's own interpreter setup, without Qt.
    if not args.no_window:
        preflight = subprocess.run([sys.executable, "-m", "renderer_process", "--preflight"], check=False)
        if preflight.returncode != 0:
            return preflight.returncode
    if not _main_is_running(connection):
        check_policies(load_config(args.config))  # a bad config (or policy file) fails here, in the foreground
        loop_factory()  # and so does a bad ELICITRON_LOOP (main's own stderr goes nowhere once it is started)
        if args.no_window:
            _start_main_in_background(connection, args.config, auto_open=not args.no_auto_open)
        else:
            started = _start_main_from_a_launcher(connection, args.config, auto_open=not args.no_auto_open)
            if started != 0:
                return started
    if args.no_window:
        return 0
    if args.detach:
        from cli_process.detached_window import open_detached_window

        return open_detached_window(connection, args.name)
    return cmd_window(args)


def _start_main_from_a_launcher(connection: Path, config: Path | None, auto_open: bool) -> int:
    """`launch --no-window` in a short-lived child: main is that child's child, so once the child
    exits main belongs to init, not to the window this process becomes (which never reaps it: a
    main stopped while the window stays open would linger as a zombie)."""
    argv = [sys.executable, "-m", "cli_process", "launch", "--no-window", "--connection", str(connection)]
    if config is not None:
        argv += ["--config", str(config.resolve())]
    if not auto_open:
        argv.append("--no-auto-open")
    return subprocess.run(argv, stdin=subprocess.DEVNULL, check=False).returncode


def _pair_web(args: argparse.Namespace) -> int:
    from cli_process.pair_web import pair_web

    return pair_web(args)


def cmd_devices(args: argparse.Namespace) -> int:
    from cli_process.devices_cli import cmd_devices as list_or_revoke

    return list_or_revoke(args)


def cmd_web(args: argparse.Namespace) -> int:
    from web_process.cli import run_web

    return run_web(args)


def cmd_serve(args: argparse.Namespace) -> int:
    from gateway_process.cli import run_serve

    if args.rotate_token:
        return _rotate_http_token(args)
    if args.print_config:
        refused = _print_config_refused(args)
        if refused is not None:
            return refused
    else:
        closed = _stdio_unusable()
        if closed is not None:
            print(f"elicitron serve: {closed}", file=sys.stderr)
            return EXIT_USAGE
    return run_serve(args)


def _rotate_http_token(args: argparse.Namespace) -> int:
    """`serve --rotate-token`: main's --mcp-http token is new; what hosts need to do is said."""
    from cli_process.controller import Controller

    with Controller(connection_of(args)) as controller:
        reply = controller.rotate_http_token()
    status = _report(reply, reply.status, "main sent no status")
    if status is None:
        return EXIT_FAILED
    gateway = status.mcp_http
    state = f" (the HTTP gateway is {gateway.state})" if gateway is not None and gateway.state != "listening" else ""
    print(f"the MCP HTTP token is new{state}; the old one is refused from now on. Hosts with an HTTP entry need "
          "the new one: run `elicitron serve --print-config --http` and paste it again (stdio entries need nothing)")
    return 0


def _stdio_unusable() -> str | None:
    """Why serve cannot speak MCP on its stdin/stdout (closed, or stdin is /dev/null), or None."""
    hint = ("serve is an MCP server: an MCP host starts it and talks to it over stdin and stdout "
            "(`elicitron serve --print-config` prints the entry to give your host)")
    for fd, name in ((0, "stdin"), (1, "stdout")):
        try:
            os.fstat(fd)
        except OSError:
            return f"{name} is closed; {hint}"
    try:
        if os.path.samestat(os.fstat(0), os.stat(os.devnull)):
            return f"stdin is {os.devnull}; {hint}"
    except OSError:
        pass
    return None


def _print_config_refused(args: argparse.Namespace) -> int | None:
    """`serve --print-config`: the exit code of an entry that could not work (said on stderr), or None."""
    from cli_process.controller import Controller
    from shared.connection_file import main_is_gone, read_connection_file

    connection = connection_of(args)
    needs = "`serve --print-config --http` needs main running with `elicitron main --mcp-http [HOST:]PORT`"
    if args.http:
        try:
            info = read_connection_file(connection)
        except ConnectionFileError as exc:
            raise MainUnreachableError(f"{exc}; {needs}") from None
        if main_is_gone(info):
            raise MainUnreachableError(f"no main is running (pid {info.pid} in {connection} is gone); "
                                       f"{needs}")
    if args.server is None:
        return None
    try:  # the servers of the main that runs, else of the config a main would start with
        with Controller(connection, attach_timeout_s=2.0) as controller:
            names = [server.name for server in controller.welcome.servers] if controller.welcome else []
    except MainUnreachableError:
        if args.http:
            raise
        from main_process.config import load_config

        names = list(load_config(args.config).servers)
    if args.server in names:
        return None
    print(for_terminal(f"elicitron: unknown server {args.server!r} (configured: {', '.join(names) or 'none'})"),
          file=sys.stderr)
    return EXIT_USAGE


def cmd_reload(args: argparse.Namespace) -> int:
    from cli_process.controller import Controller
    from shared.errors import RpcCode

    config = str(args.config.expanduser().absolute()) if args.config is not None else None
    with Controller(connection_of(args)) as controller:
        reply = controller.reload(config=config)
    if reply.error is not None and reply.error.code == RpcCode.INVALID_PARAMS:  # the config main read is bad
        print(f"elicitron: config error: {for_terminal(reply.error.message)}", file=sys.stderr)
        return EXIT_USAGE
    done = _report(reply, reply.reload, "main sent no reload report")
    if done is None:
        return EXIT_FAILED
    # A toolApproval change applies without a restart: still a change, said as one.
    changed = done.changed + [f"{name} (toolApproval, applied without a restart)" for name in done.updated]
    rows = [("added", done.added), ("removed", done.removed), ("changed", changed), ("unchanged", done.unchanged)]
    if done.settings:
        rows.append(("settings", done.settings))
    for key, names in rows:
        print(f"{key:10} {for_terminal(', '.join(names)) or '-'}")
    for note in done.notes:
        print(f"note: {for_terminal(note)}")
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    from cli_process.controller import Controller

    def settled(server: "ServerInfo") -> bool:
        return server.status in ("ready", "failed", "stopped", "needs-sign-in") or (
            server.status == "restarting" and server.error is not None)

    with Controller(connection_of(args)) as controller:
        reply = controller.control_server(args.server, args.action)
        control = _report(reply, reply.control, "main sent no report")
        if control is None:
            return EXIT_FAILED
        if args.action == "stop" or args.wait <= 0:
            what = "stopped" if args.action == "stop" else f"{args.action} asked, {control.status}"
            print(f"{for_terminal(control.server)}: {for_terminal(what)}")
            return 0
        server = controller.wait_server(args.server, settled, args.wait)
    done = "started" if args.action == "start" else "restarted"
    if args.action == "start" and control.status == "ready":
        done = "already running"
    if server is None:
        print(f"elicitron: {for_terminal(args.server)}: {done}, but main no longer lists it", file=sys.stderr)
        return EXIT_FAILED
    name = for_terminal(server.name)
    if server.status == "ready":
        tools = len(server.tools)
        print(f"{name}: {done}, ready ({tools} tool{'s' if tools != 1 else ''})")
        return 0
    if server.status == "needs-sign-in":
        print(f"{name}: {done}, needs sign-in ({for_terminal(server.error or 'a card is in the windows')}; "
              f"or: elicitron auth login {name})")
        return 0
    if server.status in ("starting", "restarting") and server.error is None:
        print(f"{name}: {done}, still starting after {args.wait:.0f} s "
              "(`elicitron status` shows how it goes)")
        return 0
    error = for_terminal(server.error or "no reason given", lines=True).replace("\n", "\n    ")
    print(f"elicitron: {name}: {done}, but it is {for_terminal(server.status)}: {error}", file=sys.stderr)
    return EXIT_FAILED


def cmd_window(args: argparse.Namespace) -> int:
    # The renderer is its own program (Qt lives only there); replace this process with it.
    argv = [sys.executable, "-m", "renderer_process", "--connection", str(connection_of(args))]
    if args.name:
        argv += ["--name", args.name]
    os.execv(sys.executable, argv)
    return 0  # not reached


def cmd_status(args: argparse.Namespace) -> int:
    from cli_process.controller import Controller
    from cli_process.store_cli import store_lines

    with Controller(connection_of(args)) as controller:
        report = controller.status()
    if args.json:
        import msgspec

        print(json_for_terminal(msgspec.json.encode(report).decode()))
        return 0
    # Every text here came from main, its servers or its peers (a server's tool names and errors,
    # a window's or host's name, a question): shown escaped, so none of it acts on the terminal.
    loop = f" ({for_terminal(report.event_loop)} loop)" if report.event_loop else ""
    print(f"main pid {report.pid}{loop}, session {for_terminal(report.session)}, "
          f"endpoint {for_terminal(report.endpoint)}")
    if report.store is not None:
        print("\n  ".join(store_lines(report.store)))
    gateway = report.mcp_http
    http_url = gateway.url if gateway is not None else _mcp_http_url(connection_of(args))
    if gateway is not None and gateway.state != "listening":
        why = f": {for_terminal(gateway.error)}" if gateway.error else ""
        print(f"MCP hosts over HTTP ({for_terminal(gateway.address)}): {for_terminal(gateway.state)}{why}")
    elif http_url:
        print(f"MCP hosts over HTTP: {for_terminal(http_url)} (entries: elicitron serve --print-config --http)")
        if gateway is not None and gateway.error:
            print(f"  restarted after: {for_terminal(gateway.error)}")
    if gateway is not None and gateway.state == "listening" and (gateway.sessions or gateway.refused_sessions):
        print(f"  {gateway.sessions} MCP sessions on {gateway.main_peers} host peers; {gateway.refused_sessions} "
              "sessions refused (over a cap)")
    if gateway is not None and (gateway.refused_connections or gateway.timed_out_connections):
        print(f"  {gateway.open_connections} open connections; {gateway.refused_connections} connections refused "
              f"(over a cap), {gateway.timed_out_connections} closed for sending no request in time")
    for listener in report.listeners:
        print(_listener_line(listener))
    for notify in report.notify:
        print("\n  ".join(_notify_lines(notify)))
    if report.policies is not None:
        policies = report.policies
        print(f"policies: {policies.policies} from {for_terminal(', '.join(policies.files)) or '-'}")
        if policies.problem:
            print(f"  not reloaded: {for_terminal(policies.problem)}")
    web = report.web_window
    if web is not None:
        why = f" ({for_terminal(web.error)})" if web.error else ""
        print(f"web window: {for_terminal(web.url)} (pair a browser: elicitron pair --web)"
              if web.state == "listening" and web.url else
              f"web window ({for_terminal(web.address)}): {for_terminal(web.state)}{why}")
    print(f"servers ({len(report.servers)}):")
    for server in report.servers:
        tools = ", ".join(for_terminal(tool) for tool in server.tools) or "-"
        print(f"  {for_terminal(server.name):20} {for_terminal(server.status):10} tools: {tools}")
        if server.error:
            print("    " + for_terminal(server.error, lines=True).replace("\n", "\n    "))
    _print_name_clashes(report.servers)
    windows = [p for p in report.peers if p.role == "renderer"]
    print(f"windows ({len(windows)}):")
    for peer in windows:
        print(f"  {for_terminal(peer.name or '-'):20} {for_terminal(peer.window)}")
    from cli_process.devices_cli import device_lines
    from shared.web_devices import read_paired_devices

    print("\n".join(device_lines(read_paired_devices())))  # this machine's web window (default web dir)
    hosts = [p for p in report.peers if p.role == "host"]
    print(f"hosts ({len(hosts)}):")
    for peer in hosts:
        calls = peer.calls or 0
        print(f"  {for_terminal(peer.name or '-'):20} {calls} call{'s' if calls != 1 else ''} in flight  "
              f"{for_terminal(peer.window)}")
    print(f"pending requests ({len(report.pending)}):")
    for pending in report.pending:
        print(f"  {for_terminal(pending.server):20} {for_terminal(pending.response_channel)}  "
              f"{for_terminal(pending.message[:60])}")
    return 0


def _print_name_clashes(servers: "list[ServerInfo]") -> None:
    """The tools hosts of every server at once (`serve`, /mcp) cannot call: two servers' tools
    with one `<server>__<tool>` name are left out there (main_process/relay/merge/)."""
    from shared.merged_names import clash_notice, name_clashes

    clashes = name_clashes({server.name: server.tools for server in servers})
    if clashes:
        print(f"tools left out for hosts of every server at once ({len(clashes)}):")
    for public, owners in clashes.items():
        print(f"  {for_terminal(clash_notice('tool', public, owners))}")


def _listener_line(listener: "ListenerStatus") -> str:
    """`remote windows on tcp://…: 2 open, 1,136 refused (1,120 per-address limit, …)`."""
    def by_reason(counts: dict[str, int]) -> str:
        return ", ".join(f"{n:,} {why}" for why, n in sorted(counts.items(), key=lambda item: -item[1]))

    line = f"{listener.name} on {listener.address}: {listener.open:,} open, {listener.refused:,} refused"
    if listener.refused_by:
        line += f" ({by_reason(listener.refused_by)})"
    if listener.dropped:
        line += f", {listener.dropped:,} closed ({by_reason(listener.dropped_by)})"
    return line


def _notify_lines(notify: "NotifyStatus") -> list[str]:
    """`notify ntfy https://ntfy.sh/…: 4 sent, 1 failed, 2 held (rate limit)`, then the last failure."""
    held = f", {notify.held:,} held ({'rate limit' if notify.state == 'rate-limited' else 'queued'})" \
        if notify.held else ""
    dropped = f", {notify.dropped:,} dropped (queue full)" if notify.dropped else ""
    busy = f" ({notify.state})" if notify.state in ("sending", "retrying") else ""
    counts = f"{notify.sent:,} sent, {notify.failed:,} failed{held}{dropped}{busy}"
    lines = [f"notify {for_terminal(notify.target)}: {counts}"]
    if notify.last_error is not None:
        when = time.strftime("%H:%M:%S", time.localtime((notify.last_error_at or 0) / 1000))
        lines.append(f"last failure at {when}: {for_terminal(notify.last_error)}")
    return lines


def cmd_auth(args: argparse.Namespace) -> int:
    from cli_process.controller import Controller

    with Controller(connection_of(args)) as controller:
        reply = controller.auth(args.server, args.action)
    report = _report(reply, reply.auth, "main sent no sign-in report")
    if report is None:
        return EXIT_FAILED
    if args.json:
        import msgspec

        print(json_for_terminal(msgspec.json.encode(report).decode()))
        return 0
    state = f"signed in ({report.store})" if report.signed_in else "not signed in"
    print(f"{for_terminal(report.server)}: {for_terminal(report.status)}, {for_terminal(state)}")
    if report.authorization_server:  # from the server's metadata, like the scopes and the message
        print(f"  authorization server: {for_terminal(report.authorization_server)}")
    if report.scopes:
        print(f"  scopes: {for_terminal(' '.join(report.scopes))}")
    if report.expires_at:
        expires = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(report.expires_at / 1000))
        print(f"  access token expires: {expires} (refreshed without asking when it can be)")
    if report.listener_refused or report.forged_redirects:
        print(f"  sign-in listener turned away: {report.listener_refused} connections (over its cap, or silent), "
              f"{report.forged_redirects} redirects of no sign-in (wrong state)")
    if report.message:
        print(f"  {for_terminal(report.message)}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from cli_process.controller import Controller
    from cli_process.stop_web import after_stop, running_web_window
    from shared.command_name import elicitron_command

    connection = connection_of(args)
    web = None
    with Controller(connection) as controller:
        pid = controller.pid
        remote = controller.remote
        if not remote:  # this machine's web window: main's own (`main --web`) or one of its own
            web = running_web_window(pid, controller.status().web_window is not None)
            controller.shutdown()
        elif not controller.shutdown_heard(args.timeout):  # its pid is on another machine: wait for its bye
            print(f"elicitron: main (pid {pid} on main's machine) did not say it is stopping within "
                  f"{args.timeout:.0f} s; run `elicitron status` to see whether it still runs", file=sys.stderr)
            return EXIT_FAILED
    if remote:
        print(f"main (pid {pid} on main's machine) is stopping")
        return 0
    if pid is not None and not _wait_for_exit(pid, args.timeout):
        print(f"elicitron: main (pid {pid}) did not stop within {args.timeout:.0f} s", file=sys.stderr)
        return EXIT_FAILED
    print(f"stopped main (pid {pid})")
    if web is not None:
        print(for_terminal(after_stop(web, elicitron_command())))
    return 0


def cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.arguments)
    except json.JSONDecodeError as exc:
        print(f"elicitron: arguments are not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(arguments, dict):
        print("elicitron: arguments must be a JSON object", file=sys.stderr)
        return EXIT_USAGE
    from cli_process.controller import Controller

    def terminated(signum: int, _frame: object) -> None:
        raise Interrupted(signum)  # like Ctrl-C: the call is withdrawn (Controller.call_tool), then 143

    signal.signal(signal.SIGTERM, terminated)
    with Controller(connection_of(args)) as controller:
        reply = controller.call_tool(args.server, args.tool, arguments, args.timeout)
    if reply.error is not None:
        print(f"elicitron: error {reply.error.code}: {for_terminal(reply.error.message)}", file=sys.stderr)
        return EXIT_FAILED
    result: dict[str, Any] = reply.result or {}
    if args.json:  # the exact result, for programs (JSON escapes what a terminal would act on)
        print(json_for_terminal(json.dumps(result, indent=2)))
    else:  # the server's text, its lines kept, anything a terminal would act on shown escaped
        for item in result.get("content", []):
            text = item.get("text") if item.get("type") == "text" else None
            print(for_terminal(text, lines=True) if isinstance(text, str) else json_for_terminal(json.dumps(item)))
    return EXIT_FAILED if result.get("isError") else 0


def cmd_ask_argv(argv: list[str], log_level: str | None = None) -> int:
    """`elicitron ask`: its own package (a peer of main, like a window); `--start` starts main here."""
    from asker_process.cli import main as ask_main

    def start_main(connection: Path) -> None:
        _start_main_in_background(connection, None, auto_open=True)  # as `elicitron launch` does

    return ask_main(argv, start_main=start_main, log_level=log_level)


# ---- helpers ---------------------------------------------------------------------------


def _report[R](reply: "ChannelReply", report: R | None, missing: str) -> R | None:
    """`report`, main's answer in `reply`; None once stderr says why there is none (main's error,
    or `missing` when main answered without the report)."""
    if reply.error is None and report is not None:
        return report
    print(f"elicitron: {for_terminal(reply.error.message) if reply.error else missing}", file=sys.stderr)
    return None


def _mcp_http_url(connection: Path) -> str | None:
    from shared.connection_file import read_connection_file

    try:
        return read_connection_file(connection).mcp_http_url
    except ConnectionFileError:
        return None


def _main_is_running(connection: Path) -> bool:
    from cli_process.controller import Controller

    try:
        with Controller(connection, attach_timeout_s=2.0):
            return True
    except MainUnreachableError:
        return False


def _start_main_in_background(connection: Path, config: Path | None, auto_open: bool) -> None:
    from shared.connection_file import ensure_private_dir, names_remote_main

    if names_remote_main(connection):  # a paired file: its main runs on another machine, and this file must stay as it is
        raise MainUnreachableError(f"main named by {connection} (a remote main, over tcp) does not answer; "
                                   "start it on its own machine")

    log_dir = default_log_dir()
    ensure_private_dir(log_dir)  # server output and tool results end up in main's log
    log_file = log_dir / "main.log"
    argv = [sys.executable, "-m", "cli_process", "--log-level", "info", "main", "--connection", str(connection),
            "--log-file", str(log_file)]
    if config is not None:
        argv += ["--config", str(config.resolve())]
    if auto_open:
        argv.append("--auto-open-window")
    print(f"elicitron: starting main in the background (log: {log_file})", file=sys.stderr)
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + MAIN_START_TIMEOUT_S
    exited_at: float | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            # Exit code 1 is also what a main that lost the lock to another one (started at the same
            # moment, e.g. by several `elicitron serve` a host spawned together) exits with: give
            # that one a moment to answer before calling it a failure.
            exited_at = exited_at or time.monotonic()
            if process.returncode != EXIT_FAILED or time.monotonic() - exited_at > LOST_RACE_GRACE_S:
                raise MainUnreachableError(f"main exited with code {process.returncode} at start; see {log_file}")
        if _main_is_running(connection):
            return
    raise MainUnreachableError(f"main did not come up within {MAIN_START_TIMEOUT_S:.0f} s; see {log_file}")


def _wait_for_exit(pid: int, timeout_s: float) -> bool:
    """Wait for a process that is not our child (pidfd on Linux; polling elsewhere)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (AttributeError, OSError):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.05)
        return False
    try:
        readable, _, _ = select.select([fd], [], [], timeout_s)
        return bool(readable)
    finally:
        os.close(fd)
