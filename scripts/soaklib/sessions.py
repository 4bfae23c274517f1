"""The host sessions of `scripts/soak --hosts N`: one row per way a host ends a session, over stdio
(`elicitron serve --server tiny`, and merged `elicitron serve`) and over HTTP (`/mcp/tiny` and `/mcp`).

Session `n` takes row `n % len(ROWS)`; some sessions (seeded, `plan_of`) first make a `book` call
whose elicitation a scripted window answers (accept / decline / cancel), so the audit log has rows
to agree with. Every stdio run must end within EXIT_WITHIN_S with no traceback and exit code 0 (or
the signal's own: -N, 128+N); every HTTP session must be served until it is left.
"""

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soaklib.http_host import HostError as HttpHostError
from soaklib.http_host import HttpHostSession
from soaklib.probe import alive
from soaklib.stdio_host import HostError as StdioHostError
from soaklib.stdio_host import StdioHost

EXIT_WITHIN_S = 2.0
ELICIT_SHARE = 0.3
PLANS = ("accept", "decline", "cancel")
SERVER = "tiny"
HOST_PROC = Path(__file__).resolve().parent / "host_proc.py"

STDIO_ENDS = ("eof", "eof-in-flight", "sigterm", "sigterm-in-flight", "sigint", "sighup",
              "read-end-first", "both-ends", "host-sigkill")
HTTP_ENDS = ("delete", "abandoned", "dropped-mid-call")
MODES = ("server", "merged")
ROWS: tuple[tuple[str, str, str], ...] = (
    *(("stdio", mode, end) for end in STDIO_ENDS for mode in MODES),
    *(("http", mode, end) for end in HTTP_ENDS for mode in MODES),
)
SIGNALS = {"sigterm": signal.SIGTERM, "sigint": signal.SIGINT, "sighup": signal.SIGHUP}


def row_name(row: tuple[str, str, str]) -> str:
    return "/".join(row)


def plan_of(seed: int, number: int) -> str | None:
    """What session `number` asks: None (no elicitation) or how the window answers its `book`."""
    rng = random.Random(seed * 1_000_003 + number)
    return rng.choice(PLANS) if rng.random() < ELICIT_SHARE else None


def who(number: int) -> str:
    return f"soak-{number}"


def answer_for(number: int, plan: str) -> dict[str, Any]:
    """The ElicitResult the window sends for session `number` (and the tool's result must echo)."""
    content = {"name": who(number), "party_size": number % 12 + 1} if plan == "accept" else None
    return {"action": plan, "content": content}


@dataclass
class Outcome:
    number: int
    row: str
    plan: str | None
    problem: str | None = None
    seconds: float = 0.0  # stdio: how long serve took to exit once the host ended the session
    exit_code: int | None = None


@dataclass
class Context:
    """What every session needs: how to start serve, where HTTP hosts go."""

    serve_argv: list[str]  # `python -m cli_process serve --connection FILE`
    env: dict[str, str]
    cwd: str
    http_url: str
    http_token: str
    seed: int
    exit_within_s: float = EXIT_WITHIN_S


def run_session(ctx: Context, number: int) -> Outcome:
    transport, mode, end = ROWS[number % len(ROWS)]
    outcome = Outcome(number, row_name((transport, mode, end)), plan_of(ctx.seed, number))
    prefix = "" if mode == "server" else f"{SERVER}__"
    try:
        if transport == "http":
            _http(ctx, outcome, mode, end, prefix)
        elif end == "host-sigkill":
            _host_killed(ctx, outcome, mode, prefix)
        else:
            _stdio(ctx, outcome, mode, end, prefix)
    except (StdioHostError, HttpHostError, OSError, ValueError, subprocess.SubprocessError) as exc:
        outcome.problem = f"{type(exc).__name__}: {str(exc)[:300]}"
    return outcome


def _check_book(outcome: Outcome, result: dict[str, Any]) -> None:
    assert outcome.plan is not None
    got = json.loads(result["content"][0]["text"])
    want = answer_for(outcome.number, outcome.plan)
    if got != want:
        outcome.problem = f"book got {got}, the window answered {want}"


def _serve_argv(ctx: Context, mode: str) -> list[str]:
    return [*ctx.serve_argv, *(["--server", SERVER] if mode == "server" else [])]


def _stdio(ctx: Context, outcome: Outcome, mode: str, end: str, prefix: str) -> None:
    host = StdioHost(_serve_argv(ctx, mode), ctx.env, ctx.cwd, f"soak-stdio-{outcome.number}")
    try:
        host.open()
        if outcome.plan is not None:
            _check_book(outcome, host.call(f"{prefix}book", {"who": who(outcome.number)}))
        if end.endswith("-in-flight"):
            host.start_request("tools/call", {"name": f"{prefix}hang", "arguments": {}})
            host.call(f"{prefix}echo", {"text": "after the hang"})  # the hang reached main before this
        _end_stdio(host, end)
    except BaseException:
        host.kill()
        raise
    code, waited, stderr = host.finish(timeout_s=10.0)
    outcome.exit_code, outcome.seconds = code, waited
    signal_number = SIGNALS.get(end.removesuffix("-in-flight"))
    allowed = {0} | ({-signal_number, 128 + signal_number} if signal_number else set())
    if outcome.problem is not None:
        return
    if code is None:
        outcome.problem = "serve did not exit within 10 s"
    elif code not in allowed:
        outcome.problem = f"serve exited {code}: {_last_line(stderr)}"
    elif "Traceback" in stderr:
        outcome.problem = f"serve wrote a traceback: {_last_line(stderr)}"
    elif waited > ctx.exit_within_s:
        outcome.problem = f"serve took {waited:.1f} s to exit"


def _end_stdio(host: StdioHost, end: str) -> None:
    kind = end.removesuffix("-in-flight")
    if kind == "eof":
        host.close_stdin()
    elif kind in SIGNALS:
        host.signal(SIGNALS[kind])
    elif kind == "read-end-first":
        host.close_stdout()
        host.close_stdin()
    elif kind == "both-ends":
        host.close_stdout()  # no step between the two closes: as a process that exits does
        host.close_stdin()
    else:
        raise ValueError(f"no such end: {end}")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(nothing on stderr)"


def _host_killed(ctx: Context, outcome: Outcome, mode: str, prefix: str) -> None:
    """A host process that dies by SIGKILL with the session open (every other session of this row
    with a call in flight): serve must still exit by itself, within EXIT_WITHIN_S."""
    flags = ["--in-flight"] if outcome.number % 2 else []
    argv = [sys.executable, "-I", str(HOST_PROC), f"soak-killed-{outcome.number}", prefix, *flags, "--",
            *_serve_argv(ctx, mode)]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=ctx.env, cwd=ctx.cwd)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        line = proc.stdout.readline().decode()
        if not line.startswith("READY "):
            raise StdioHostError(f"the host process did not open its session: {line!r}")
        serve_pid = int(line.split()[1])
        proc.kill()
        proc.wait()
        began = time.monotonic()
        _wait(lambda: not alive(serve_pid), 10.0)
        outcome.seconds = time.monotonic() - began
        if alive(serve_pid):
            outcome.problem = "serve still ran 10 s after its host was killed"
        elif outcome.seconds > ctx.exit_within_s:
            outcome.problem = f"serve took {outcome.seconds:.1f} s to exit after its host was killed"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stdin.close()


def _wait(holds: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not holds() and time.monotonic() < deadline:
        time.sleep(0.02)  # a poll interval: another process's exit, seen in /proc


def _http(ctx: Context, outcome: Outcome, mode: str, end: str, prefix: str) -> None:
    url = ctx.http_url + (f"/{SERVER}" if mode == "server" else "")
    session = HttpHostSession(url, ctx.http_token, f"soak-http-{outcome.number % 16}").open()
    try:
        if outcome.plan is not None:
            _check_book(outcome, session.call(f"{prefix}book", {"who": who(outcome.number)}))
        if end == "delete":
            status = session.delete()
            if status != 200:
                outcome.problem = f"DELETE answered {status}"
        elif end == "abandoned":
            session.abandon()
        elif end == "dropped-mid-call":
            session.drop_mid_call(f"{prefix}hang")
        else:
            raise ValueError(f"no such end: {end}")
    except BaseException:
        session.abandon()
        raise
