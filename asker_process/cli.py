"""`elicitron ask`: a shell script or CI job asks the person at Elicitron's windows.

    elicitron ask [--message] TEXT [--schema JSON | --schema @FILE | --yes-no | --url URL]
                  [--timeout SECONDS] [--name NAME] [--connection FILE ...] [--start]

Prints the accepted content as JSON on stdout (`--yes-no`: `true` or `false`). The exit code is
the answer: 0 accept, 1 decline, 2 usage or a refused question (one line on stderr naming the
problem), 3 no main running, 4 cancel, 5 expired. With `--yes-no` it is 0 only for yes: No (a
decline, or `false` accepted in a window that shows the plain checkbox) prints `false` and exits 1.
SIGINT / SIGTERM withdraw the question (the windows drop the card) and exit 128 + the signal.

Imports only what asking needs (no `mcp`, no Qt, nothing of main): `--help` and the question
reach main fast. `--start` is handed a starter by the CLI (cli_process), which owns starting main.
"""

import argparse
import json
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from shared.terminal_text import for_terminal, json_for_terminal

EXIT_ACCEPT: Final = 0
EXIT_DECLINE: Final = 1
EXIT_USAGE: Final = 2
EXIT_NO_MAIN: Final = 3
EXIT_CANCEL: Final = 4
EXIT_EXPIRED: Final = 5
YES_NO_PROPERTY: Final = "answer"
YES_NO_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {YES_NO_PROPERTY: {"type": "boolean", "title": "Yes"}},
    "required": [YES_NO_PROPERTY],
}

StartMain = Callable[[Path], None]
"""Starts main in the background for the connection file and returns once it answers."""


class _Usage(Exception):
    """A command line that cannot be asked (exit 2)."""


def parser(prog: str = "elicitron ask") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Ask the person at Elicitron's windows; the exit code is the answer.",
        epilog="exit codes: 0 accept, 1 decline, 2 usage or bad schema, 3 no main running, 4 cancel, "
               "5 expired; SIGINT/SIGTERM withdraw the question")
    p.add_argument("text", nargs="?", metavar="MESSAGE", help="the question (or --message)")
    p.add_argument("--message", help="the question")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--schema", metavar="JSON|@FILE",
                      help="MCP requestedSchema for the answer (JSON, or @file)")
    kind.add_argument("--yes-no", action="store_true",
                      help="a yes/no confirm; prints true or false, exit 0 only for yes")
    kind.add_argument("--url", help="ask to open this link instead of a form")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="give up after this long (default 600): exit 5")
    p.add_argument("--name", help="who asks, as the card shows it (default: the program running this)")
    p.add_argument("--connection", action="append", metavar="FILE",
                   help="connection file (default: $ELICITRON_CONNECTION or the runtime dir); repeat it for "
                        "the mains of one shared store: when one is gone, the question moves to the next")
    p.add_argument("--start", action="store_true", help="start main in the background first if none runs")
    return p


def main(argv: list[str] | None = None, start_main: StartMain | None = None,
         prog: str = "elicitron ask", log_level: str | None = None) -> int:
    args = parser(prog).parse_args(argv)
    # Only now: `--help` and usage errors need none of it.
    import asyncio

    from shared.errors import QuestionRefusedError
    from shared.questions import check_question, check_timeout

    level = getattr(logging, (log_level or "warning").upper(), logging.WARNING)
    logging.basicConfig(level=level, format="elicitron: %(message)s")
    try:
        params = _params(args)
        check_question(params)  # the checks main runs: refuse here, before anything is sent
        check_timeout(args.timeout)
    except (_Usage, QuestionRefusedError) as exc:
        return _fail(EXIT_USAGE, str(exc))
    return asyncio.run(_ask(args, params, start_main))


def _params(args: argparse.Namespace) -> dict[str, Any]:
    from shared.questions import question_params

    if (args.text is None) == (args.message is None):
        raise _Usage("give the question once: as MESSAGE or as --message TEXT")
    message = args.text if args.text is not None else args.message
    if args.url is not None:
        return question_params(message, url=args.url)
    schema = YES_NO_SCHEMA if args.yes_no else _schema(args.schema) if args.schema is not None else None
    return question_params(message, schema)


def _schema(text: str) -> Any:
    where = "--schema"
    if text.startswith("@"):
        where = text[1:]
        try:
            text = Path(where).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _Usage(f"--schema: cannot read {where}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Usage(f"{where}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


async def _ask(args: argparse.Namespace, params: dict[str, Any], start_main: StartMain | None) -> int:
    import asyncio

    from asker_process.client import AskerClient
    from asker_process.identity import parent_program
    from shared.errors import MainUnreachableError, QuestionRefusedError

    client = AskerClient(parent_program(args.name), args.connection)  # None, or the files given
    loop = asyncio.get_running_loop()
    signalled: asyncio.Future[int] = loop.create_future()

    def on_signal(signum: int) -> None:
        if not signalled.done():  # a second signal changes nothing: the first one is answered
            signalled.set_result(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    asking = asyncio.ensure_future(_ask_starting(client, params, args, start_main))
    try:
        await asyncio.wait({asking, signalled}, return_when=asyncio.FIRST_COMPLETED)
        if not asking.done():
            asking.cancel()  # withdraws the question: the windows drop the card
            await asyncio.wait({asking})
            signum = signalled.result()
            return _fail(128 + signum, f"{signal.Signals(signum).name}: question withdrawn")
        answer = asking.result()
    except MainUnreachableError as exc:  # no main, or --start could not start one
        return _fail(EXIT_NO_MAIN, str(exc))
    except QuestionRefusedError as exc:
        return _fail(EXIT_USAGE, f"main refused the question: {exc.message}")
    finally:
        await client.aclose()
    return _report(answer, yes_no=args.yes_no, timeout=args.timeout)


async def _ask_starting(client: Any, params: dict[str, Any], args: argparse.Namespace,
                        start_main: StartMain | None) -> Any:
    import asyncio

    from shared.errors import MainNotRunningError

    try:
        return await client.ask(params, args.timeout)
    except MainNotRunningError:
        if not args.start:
            raise
        if start_main is None:
            raise MainNotRunningError("no main is running, and --start works only through the elicitron "
                                      "command") from None
    await asyncio.to_thread(start_main, client.connection_path)
    return await client.ask(params, args.timeout)


def _report(answer: Any, *, yes_no: bool, timeout: float | None) -> int:
    if answer.outcome == "accept":
        content = answer.content
        if yes_no:
            yes = bool(content and content.get(YES_NO_PROPERTY) is True)
            print("true" if yes else "false", flush=True)
            return EXIT_ACCEPT if yes else EXIT_DECLINE
        if content is not None:
            # JSON whose decoded value is the answer exactly; what a terminal would act on (an
            # escape sequence typed or pasted in a window) is a \u escape, so printing it is safe.
            print(json_for_terminal(json.dumps(content, ensure_ascii=False)), flush=True)
        return EXIT_ACCEPT
    if answer.outcome == "decline":
        if yes_no:
            print("false", flush=True)
        return _fail(EXIT_DECLINE, "declined")
    if answer.outcome == "expired":
        return _fail(EXIT_EXPIRED, "expired: nobody answered" + (f" within {timeout:g} s" if timeout else ""))
    if answer.outcome == "withdrawn":
        return _fail(EXIT_CANCEL, "the question was withdrawn")
    return _fail(EXIT_CANCEL, "cancelled")


def _fail(code: int, message: str) -> int:
    print(f"elicitron: {for_terminal(message)}", file=sys.stderr, flush=True)
    return code
