"""`scripts/soak --hosts N` (issue 39): N host sessions against one main with two windows attached,
ended every way a host ends one (sessions.py), over stdio and HTTP, with `--server` and merged.

main runs the stdlib tiny server (tiny_server.py: one process per session, ~20 ms to start) and
`--mcp-http`, with the HTTP idle sweep at IDLE_S so abandoned sessions are given back within the run.
Sessions run CONCURRENCY at a time. Before the first and after the last (once no host peer, HTTP
session or per-session server is left, and main's descriptors are steady) it reads main's and the
HTTP child's RSS and descriptors; main must stay within +20 MiB and +4 descriptors. Then it stops
main and checks the audit log against what the windows were asked and answered.
"""

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.env import child_env
from kit.main import RunningMain, start_main, write_config
from kit.paths import PYTHON, ROOT
from kit.peer import WirePeer

from soaklib.hosts_window import Windows
from soaklib.probe import Held, children, held
from soaklib.sessions import ROWS, Context, Outcome, row_name, run_session

TINY = Path(__file__).resolve().parent / "tiny_server.py"
IDLE_S = 5.0  # short, so abandoned sessions go within the run; not so short that a loaded machine's
# pause between a host's initialize and its next request outlasts it
MAX_RSS_GROWTH_KIB = 20 << 10
MAX_FD_GROWTH = 4
PROGRESS_S = 10.0


@dataclass
class HostsRun:
    hosts: int
    concurrency: int
    seed: int
    exit_within_s: float
    outcomes: list[Outcome] = field(default_factory=list)
    before: dict[str, Held] = field(default_factory=dict)  # "main", "http child"
    after: dict[str, Held] = field(default_factory=dict)
    seconds: float = 0.0
    settle_problem: str | None = None
    problems: list[str] = field(default_factory=list)
    audit: Counter[str] = field(default_factory=Counter)


def start(home: Path) -> RunningMain:
    # Every session's elicitation may come within one burst window: lift the limit (20 a minute) above them.
    config = write_config(home / "mcp.json", {"tiny": {"command": PYTHON, "args": ["-I", "-S", str(TINY)],
                                                       "elicitationBurst": 10**9}})
    os.environ["ELICITRON_MCP_HTTP_IDLE_S"] = str(IDLE_S)  # main's HTTP child inherits it
    main = start_main(config, home, "--mcp-http", "0", home=home)
    main.wait_server_ready("tiny")
    main.wait_status(lambda status: (status.get("mcpHttp") or {}).get("state") == "listening",
                     "its MCP HTTP endpoint listening")
    return main


def http_child(main: RunningMain) -> int:
    return next(pid for pid, command in children(main.pid).items() if "--listen-http" in command)


def _wait(holds: Callable[[], bool], timeout_s: float, every_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while not holds():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_s)  # a poll interval: main's state, asked over the wire and read in /proc
    return True


def settle(main: RunningMain, timeout_s: float) -> tuple[dict[str, Held], str | None]:
    """main's and the child's holdings once no session is left; and what was still left if not."""
    info = main.info
    left: list[str] = []

    def quiet() -> bool:
        peer = WirePeer(info["endpoint"], info["token"], name="soak-status", role="controller")
        try:
            peer.hello()
            status = peer.status()
        finally:
            peer.close()
        gateway = status.get("mcpHttp") or {}
        hosts = [p["name"] for p in status["peers"] if p["role"] == "host"]
        servers = sum(1 for command in children(main.pid).values() if "tiny_server.py" in command) - 1
        left[:] = [f"{len(hosts)} host peers", f"{gateway.get('sessions', 0)} HTTP sessions",
                   f"{gateway.get('mainPeers', 0)} HTTP main peers", f"{servers} per-session servers"]
        return not hosts and not gateway.get("sessions") and not gateway.get("mainPeers") and servers == 0

    problem = None if _wait(quiet, timeout_s, 0.5) else "still held after the run: " + ", ".join(left)
    child = http_child(main)
    readings: list[tuple[int, int]] = []

    def steady() -> bool:  # the same counts five readings in a row: the status peer's socket is gone
        readings.append((held(main.pid).descriptors, held(child).descriptors))
        return len(readings) >= 5 and len(set(readings[-5:])) == 1
    _wait(steady, 20.0)
    return {"main": held(main.pid), "http child": held(child)}, problem


def run(run: HostsRun, main: RunningMain, home: Path, say: Callable[[str], None]) -> Windows:
    info = main.info
    windows = Windows(info["endpoint"], info["token"], run.seed)
    windows.start()
    run.before, _ = settle(main, 30.0)
    say(f"before: main {run.before['main']}; http child {run.before['http child']}")
    ctx = Context(serve_argv=[PYTHON, "-m", "cli_process", "serve", "--connection", str(main.connection)],
                  env=child_env(home), cwd=str(ROOT), http_url=info["mcpHttpUrl"], http_token=info["mcpHttpToken"],
                  seed=run.seed, exit_within_s=run.exit_within_s)
    began = last = time.monotonic()
    with ThreadPoolExecutor(run.concurrency) as pool:
        futures = [pool.submit(run_session, ctx, number) for number in range(run.hosts)]
        told: set[str] = set()
        for future in as_completed(futures):
            outcome = future.result()
            run.outcomes.append(outcome)
            if outcome.problem and (kind := f"{outcome.row}: {_kind(outcome.problem)}") not in told:
                told.add(kind)  # each kind of failure once, as it first happens: a cut-short run still says
                say(f"first failure of its kind, session {outcome.number} {outcome.row}: {outcome.problem}")
            if time.monotonic() - last >= PROGRESS_S:
                last = time.monotonic()
                done, spent = len(run.outcomes), last - began
                failed = Counter(outcome.row for outcome in run.outcomes if outcome.problem)
                say(f"{done}/{run.hosts} sessions, {sum(failed.values())} failed {dict(failed)}, "
                    f"{done / spent:.1f}/s, about {(run.hosts - done) * spent / done:.0f} s left; "
                    f"main {held(main.pid)}")
    run.seconds = time.monotonic() - began
    run.after, run.settle_problem = settle(main, 60.0 + IDLE_S)
    say(f"after:  main {run.after['main']}; http child {run.after['http child']}")
    return windows


def verify_audit(run: HostsRun, windows: Windows, rows: list[dict[str, Any]]) -> None:
    """One audit row per elicitation the window was sent, with the outcome it answered."""
    problem = run.problems.append
    seen: dict[int, dict[str, Any]] = {}
    for row in rows:
        run.audit[str(row.get("outcome"))] += 1
        message = str(row.get("message", ""))
        if not message.startswith("Book a table for soak-"):
            problem(f"audit: a row no session asked for: {str(row)[:200]}")
            continue
        number = int(message.removeprefix("Book a table for soak-").removesuffix("?"))
        if number in seen:
            problem(f"audit: two rows for session {number}")
        seen[number] = row
    asked = set(windows.asked.values())
    if len(rows) != len(windows.asked):
        problem(f"audit: {len(rows)} rows for {len(windows.asked)} elicitations the window was sent")
    for number in sorted(asked - set(seen))[:20]:
        problem(f"audit: no row for session {number}'s elicitation")
    for number, action in sorted(windows.answered.items()):
        found = seen.get(number)
        if found is not None and (found.get("outcome"), found.get("server")) != (action, "tiny"):
            problem(f"audit: session {number} answered {action}, the row holds {found.get('outcome')} "
                    f"from {found.get('server')}")


def judge(run: HostsRun) -> list[str]:
    """What breaks the issue's figure: main past +20 MiB or +4 descriptors."""
    if not run.before or not run.after:
        return ["main's holdings were not read"]
    before, after = run.before["main"], run.after["main"]
    found = []
    if after.rss_kib - before.rss_kib > MAX_RSS_GROWTH_KIB:
        found.append(f"main's RSS grew {(after.rss_kib - before.rss_kib) / 1024:.1f} MiB (at most 20)")
    if after.descriptors - before.descriptors > MAX_FD_GROWTH:
        found.append(f"main holds {after.descriptors - before.descriptors} more descriptors (at most 4)")
    return found


def summary(run: HostsRun, windows: Windows, main_log: list[str]) -> dict[str, Any]:
    by_row: dict[str, dict[str, Any]] = {}
    for row in ROWS:
        mine = [outcome for outcome in run.outcomes if outcome.row == row_name(row)]
        failures = Counter(_kind(outcome.problem) for outcome in mine if outcome.problem)
        by_row[row_name(row)] = {
            "sessions": len(mine), "failed": sum(failures.values()), "failures": dict(failures.most_common(5)),
            "elicited": sum(1 for outcome in mine if outcome.plan),
            "exitSecondsP50": _quantile([outcome.seconds for outcome in mine], 0.5),
            "maxExitSeconds": round(max((outcome.seconds for outcome in mine), default=0.0), 2),
            "exitCodes": dict(Counter(str(outcome.exit_code) for outcome in mine if outcome.exit_code is not None))}
    log_errors = [line for line in main_log if " ERROR " in line or "Traceback" in line]
    figure = {name: {"before": {"rssMiB": round(run.before[name].rss_kib / 1024, 1),
                                "descriptors": run.before[name].descriptors},
                     "after": {"rssMiB": round(run.after[name].rss_kib / 1024, 1),
                               "descriptors": run.after[name].descriptors}}
              for name in run.before if name in run.after}
    problems = [*judge(run), *([run.settle_problem] if run.settle_problem else []), *run.problems,
                *windows.problems, *(f"main logged: {line}" for line in log_errors[:20])]
    return {"hosts": run.hosts, "concurrency": run.concurrency, "seed": run.seed, "exitWithinSeconds": run.exit_within_s,
            "seconds": round(run.seconds, 1),
            "sessionsPerSecond": round(len(run.outcomes) / max(run.seconds, 1e-9), 2),
            "failedSessions": sum(1 for outcome in run.outcomes if outcome.problem),
            "held": figure, "withinFigure": not judge(run), "rows": by_row,
            "elicitations": {"asked": len(windows.asked), "answered": dict(Counter(windows.answered.values())),
                             "dismissedAtSecondWindow": dict(windows.dismissed)},
            "audit": {"rows": sum(run.audit.values()), "outcomes": dict(run.audit),
                      "agrees": not run.problems}, "mainLogErrorLines": len(log_errors), "problems": problems}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else 0.0


def _kind(problem: str) -> str:
    """A failure without its numbers, so alike ones count together."""
    return "".join("#" if char.isdigit() else char for char in problem)[:160]


def print_summary(result: dict[str, Any]) -> None:
    print(f"host sessions: {result['hosts']} ({result['concurrency']} at a time, seed {result['seed']}, serve must "
          f"exit within {result['exitWithinSeconds']} s) in "
          f"{result['seconds']} s ({result['sessionsPerSecond']}/s); {result['failedSessions']} failed")
    for name, figure in result["held"].items():
        before, after = figure["before"], figure["after"]
        print(f"{name:<11} before {before['rssMiB']:>7} MiB {before['descriptors']:>4} fds   after "
              f"{after['rssMiB']:>7} MiB {after['descriptors']:>4} fds   (+{after['rssMiB'] - before['rssMiB']:.1f} MiB, "
              f"{after['descriptors'] - before['descriptors']:+d} fds)")
    print(f"main within +20 MiB and +4 descriptors: {'yes' if result['withinFigure'] else 'NO'}")
    print(f"{'row':<34} {'sessions':>8} {'elicited':>8} {'failed':>6} {'exit s p50/max':>14}  exit codes")
    for name, row in result["rows"].items():
        exits = f"{row['exitSecondsP50']}/{row['maxExitSeconds']}"
        print(f"{name:<34} {row['sessions']:>8} {row['elicited']:>8} {row['failed']:>6} {exits:>14}  "
              f"{row['exitCodes']}")
        for kind, count in row["failures"].items():
            print(f"    {count} x {kind}")
    print(f"elicitations asked {result['elicitations']['asked']}, answered {result['elicitations']['answered']}, "
          f"dismissed at the second window {result['elicitations']['dismissedAtSecondWindow']}")
    print(f"audit rows {result['audit']['rows']} {result['audit']['outcomes']}; agrees: "
          f"{'yes' if result['audit']['agrees'] else 'NO'}; main log error lines {result['mainLogErrorLines']}")
    for text in result["problems"][:40]:
        print(f"  - {text}")


def main_hosts(hosts: int, concurrency: int, seed: int, exit_within_s: float, home: Path, as_json: bool,
               say: Callable[[str], None]) -> int:
    """The whole `--hosts` run; 0 when nothing failed and main stayed within the figure, else 1."""
    run_ = HostsRun(hosts=hosts, concurrency=concurrency, seed=seed, exit_within_s=exit_within_s)
    main = start(home)
    windows: Windows | None = None
    try:
        windows = run(run_, main, home, say)
        main.cli("stop", "--timeout", "20", timeout=30)
        main.stop()
        done = main.cli_plain("audit", "--json", "--limit", str(hosts + 100), timeout=60)
        if done.returncode != 0:
            run_.problems.append(f"elicitron audit exited {done.returncode}: {done.stderr.strip()[:300]}")
        else:
            verify_audit(run_, windows, json.loads(done.stdout))
        result = summary(run_, windows, main.stderr.lines())
    finally:
        if windows is not None:
            windows.stop()
        main.stop(timeout_s=10)
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print_summary(result)
    return 1 if result["problems"] or result["failedSessions"] else 0
