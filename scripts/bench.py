"""Elicitron benchmark (issue 6): every figure in one run, a table with ratios and absolute times.

    scripts/bench [--quick] [--only NAME ...] [--json] [--profile DIR]

Figures (NAME for --only):
  raw       raw floor: pyzmq ROUTER<->DEALER round trip, main's event-loop style, same bytes
  broker    broker round trip, in-process Broker, p50 vs the raw floor (measures raw too)
  e2e       calls/s of an eliciting tool through a real main vs an in-process mcp.Client
  fanout    10 peers, first answer wins: time until the 9 others hold their dismiss
  replay    1,000 pending, a new peer attaches: time to a full welcome; main's RSS
  coldstart new renderer process -> first pending card shown (offscreen Qt)
  ask       `elicitron ask` process start -> its card painted in an already open window (offscreen Qt)
  fuzz      100,000 malformed frames at a real main (10,000 with --quick): main stays up, answers
            only contract errors, logs refusals rate-limited, and a legit window still books a table
  rules     main's CPU per call when a rule decides (an auto-allowed call, a rule-answered
            elicitation) against a main with no rule store
  policy    200 Cedar policies: one decision in-process (p50/p90, against cedarpy's plain is_authorized),
            and main's CPU per call a policy permits against a main with no policy
  cli       `elicitron status` with no main, and `elicitron ask --help`: a fresh process's wall time
  card      a card's latency in an open window: the invoke leaves main -> the card is painted
  abuse     a legitimate window's round trip while a peer floods main and 500 peers attach; main's RSS;
            the same while 2,000 idle TCP connections sit on each listener (tcp+CURVE, sign-in,
            --mcp-http) and 1,000 HTTP sessions are open, and whether main and the HTTP child serve
            and while 2,000 idle connections and one device's 64 event streams flood the web window
            (its paired browser's GET / too), and while relayed sessions flood both ways (a server writing
            400 MiB to a host that reads nothing, a host writing to a server that reads nothing)
  gateway   a host through `elicitron serve` vs the same host on the server directly; 10 hosts at once
  serve     a host spawns `elicitron serve` -> its `initialize` answered, with main running and without
  team      4 mains on one PostgreSQL store vs one SQLite main: requests answered from windows on other
            mains, none lost or answered twice; answer -> server and dismiss latency; main's CPU per request
  web       the web window: invoke leaves main -> card painted in Debian's chromium; the web process idle
            (CPU, RSS); main's RSS with 50 more pages attached

It always exits 0: it reports, the table says PASS/FAIL per target. `--profile DIR` also writes
profiles: pyinstrument of the broker round trip (pyinstrument importable from $BENCH_TOOLS,
default /tmp/tools/lib/python3.12/site-packages) and py-spy of main during end to end (py-spy on
PATH or /tmp/tools/bin/py-spy). Neither goes into the project venv.
"""

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from benchlib.common import Figure

FIGURES = ["raw", "broker", "e2e", "fanout", "replay", "coldstart", "fuzz", "rules", "policy", "ask", "cli", "card",
           "abuse", "gateway", "serve", "web", "team"]


def _run_figure(name: str, quick: bool, profile_dir: Path | None) -> list[Figure]:
    if name in ("raw", "broker"):
        from benchlib import roundtrip

        return roundtrip.run(quick, only_raw=(name == "raw"), profile_dir=profile_dir)
    if name == "e2e":
        from benchlib import e2e

        return e2e.run(quick, profile_dir)
    if name == "fanout":
        from benchlib import fanout

        return fanout.run(quick)
    if name == "replay":
        from benchlib import replay

        return replay.run(quick)
    if name == "coldstart":
        from benchlib import coldstart

        return coldstart.run(quick)
    if name == "fuzz":
        from benchlib import fuzz

        return fuzz.run(quick)
    if name == "rules":
        from benchlib import rules

        return rules.run(quick)
    if name == "policy":
        from benchlib import policy

        return policy.run(quick)
    if name == "ask":
        from benchlib import ask

        return ask.run(quick)
    if name in ("cli", "card", "serve"):
        from benchlib import startup

        run = {"cli": startup.run_cli, "card": startup.run_card, "serve": startup.run_serve}[name]
        return run(quick)
    if name == "abuse":
        from benchlib import abuse, abuse_web  # abuse_web: a main and a web window of its own

        return [*abuse.run(quick), *abuse_web.run(quick)]
    if name == "gateway":
        from benchlib import gateway

        return gateway.run(quick)
    if name == "team":
        from benchlib import team

        return team.run(quick)
    if name == "web":
        from benchlib import web

        return web.run(quick)
    raise ValueError(name)


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def _table(figures: list[Figure], quick: bool, seconds: float, notes: list[str]) -> str:
    rows = [("figure", "result", "target", "", "absolute")]
    for fig in figures:
        verdict = "" if fig.passed is None else ("PASS" if fig.passed else "FAIL")
        rows.append((fig.title, fig.value, fig.target or "(printed)", verdict, fig.absolute))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for i, row in enumerate(rows):
        cells = [row[j].ljust(widths[j]) for j in range(4)]
        lines.append(" | ".join([*cells, row[4]]).rstrip())
        if i == 0:
            lines.append("-+-".join("-" * w for w in widths) + "-+-" + "-" * 20)
    lines.append("")
    lines.append("how each was measured:")
    for fig in figures:
        lines.append(f"  {fig.title}: {fig.how}")
    lines += notes
    lines.append(
        f"({'quick' if quick else 'full'} run, {seconds:.0f} s, {os.cpu_count()} cpus, "
        f"Python {platform.python_version()})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small N: a smoke run")
    parser.add_argument(
        "--only",
        action="append",
        choices=FIGURES,
        metavar="NAME",
        help=f"run only this figure (repeatable): {', '.join(FIGURES)}",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="write pyinstrument profiles here")
    args = parser.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)

    wanted = args.only or FIGURES
    if "broker" in wanted and "raw" in wanted:
        wanted = [name for name in wanted if name != "raw"]  # broker measures the floor beside it
    started = time.monotonic()
    load_before = _loadavg()
    figures: list[Figure] = []
    errors: dict[str, str] = {}
    for name in wanted:
        t0 = time.monotonic()
        try:
            figures += _run_figure(name, args.quick, args.profile)
        except Exception as exc:  # noqa: BLE001 (one broken figure must not hide the others)
            errors[name] = "".join(traceback.format_exception(exc))
            figures.append(
                Figure(
                    name=name,
                    title=name,
                    value="ERROR",
                    target="",
                    passed=False,
                    absolute=f"{type(exc).__name__}: {exc}"[:200],
                    how="see the error above",
                )
            )
            print(f"bench: {name} failed:\n{errors[name]}", file=sys.stderr)
        print(f"bench: {name} done in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    seconds = time.monotonic() - started
    load_after = _loadavg()
    notes = [
        (
            f"load average (1 min) before {load_before}, after {load_after}: other work on the machine "
            "moves every figure; compare ratios measured side by side, not absolute times across runs"
        )
    ]
    if args.profile is not None:
        notes.append(f"PROFILED RUN: timings are inflated by the profilers; profiles in {args.profile}")

    if args.json:
        print(
            json.dumps(
                {
                    "quick": args.quick,
                    "seconds": seconds,
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "loadavg_before": load_before,
                    "loadavg_after": load_after,
                    "profiled": args.profile is not None,
                    "figures": [
                        {
                            "name": f.name,
                            "title": f.title,
                            "value": f.value,
                            "target": f.target,
                            "passed": f.passed,
                            "absolute": f.absolute,
                            "how": f.how,
                            "data": f.data,
                        }
                        for f in figures
                    ],
                    "errors": errors,
                },
                indent=2,
                default=str,
            )
        )
    else:
        print(_table(figures, args.quick, seconds, notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
