"""Soak test (issue 5, "Load"): many elicitations through a real main while windows come and go.

Starts `python -m cli_process main` with N demo servers over stdio (its config, data and state dirs
in a private temp dir, so the audit log is this run's alone), drives `--elicitations` book_table
calls from a controller peer with bounded concurrency, while renderer peers attach and detach at
random (seeded) and answer: accept / decline / cancel, two windows at once, invalid content first,
or nobody (the request expires). Then it stops main (`elicitron stop`), reads the audit log
(`elicitron audit --json`) and checks that every call got exactly one result, every request was
answered exactly once or expired, no channel took two answers, and the audit log agrees.

`--hosts N` (issue 39) soaks host sessions instead: N of them against one main with windows attached,
ended every way a host ends one, over stdio and HTTP, with `--server` and merged (soaklib/hosts.py);
it prints main's RSS and descriptors before and after, which must stay within +20 MiB and +4.

Prints a summary table (or `--json`); exits 1 on any discrepancy, 2 if main could not be run.
Bounded: every wait has a deadline (`--max-seconds`, default 180), and the temp dir and main are
cleaned up on every path. Only ipc:// (a socket in the temp dir) is used.
"""

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the testing kit
from kit.demo import demo_stdio_entry
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.stats import percentile
from soaklib.driver import Soak
from soaklib.hosts import main_hosts
from soaklib.verify import Verdict, verify

from shared.messages import MAX_AUDIT_ROWS


def soak_config(home: Path, servers: int, elicitations: int, timeout_s: float) -> Path:
    # All of a server's requests may come within one burst window: lift the limit above them.
    entry = demo_stdio_entry(elicitationTimeoutSeconds=timeout_s, elicitationBurst=max(1000, 2 * elicitations))
    return write_config(home / "mcp.json", {f"demo-{i}": entry for i in range(servers)})


def stop_main(main: RunningMain, timeout_s: float) -> int | None:
    """`elicitron stop`, as a user stops main; main's exit code if it stopped by itself."""
    try:
        main.cli("stop", "--timeout", str(timeout_s), timeout=timeout_s + 5)
    except subprocess.TimeoutExpired:
        pass
    try:
        return main.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


def percentile_of(values: list[float], q: float) -> float:
    return percentile(sorted(values), q)


def summarize(args: argparse.Namespace, soak: Soak, verdict: Verdict, main_log: list[str],
              exit_code: int | None, audit_error: str | None) -> dict[str, Any]:
    elapsed = max(1e-9, soak.finished_at - soak.started_at)
    latencies = [c.replied_at - c.sent_at for c in soak.calls if c.replied_at is not None]
    answered = [c.replied_at - c.sent_at for c in soak.calls if c.replied_at is not None and c.elicitation
                and soak.elicitations[c.elicitation].executed_as != "none"]
    log_errors = [line for line in main_log if " ERROR " in line or "Traceback" in line]
    audit_ok = audit_error is None and not verdict.audit_problems
    problems = [*verdict.problems, *verdict.audit_problems, *([audit_error] if audit_error else []),
                *(f"main logged: {line}" for line in log_errors[:20])]
    if exit_code != 0:
        problems.append(f"main did not stop cleanly on `elicitron stop` (exit code {exit_code})")
    return {
        "seed": args.seed, "elicitations": args.elicitations, "servers": args.servers,
        "concurrency": args.concurrency, "timeoutSeconds": args.timeout,
        "calls": len(soak.calls), "replied": sum(1 for c in soak.calls if c.replies),
        "outcomes": dict(verdict.outcomes), "plans": dict(verdict.plans), "refusals": dict(verdict.refusals),
        "seconds": round(elapsed, 2), "callsPerSecond": round(len(latencies) / elapsed, 1),
        "latencyMs": {"p50": round(percentile_of(latencies, 50) * 1000, 1),
                      "p99": round(percentile_of(latencies, 99) * 1000, 1),
                      "answeredP50": round(percentile_of(answered, 50) * 1000, 1),
                      "answeredP99": round(percentile_of(answered, 99) * 1000, 1)},
        "windows": {"attached": soak.stats.attached, "detachedBye": soak.stats.detached_bye,
                    "detachedSilent": soak.stats.detached_silent, "blackouts": soak.stats.blackouts,
                    "maxAttached": soak.stats.max_attached,
                    "deliveredInWelcome": soak.stats.welcomed_with_pending},
        "audit": {"rows": verdict.audit_rows, "outcomes": dict(verdict.audit_outcomes), "agrees": audit_ok},
        "mainLog": {"lines": len(main_log), "errorLines": len(log_errors),
                    "refusedLines": sum(1 for line in main_log if "refused" in line)},
        "mainExitCode": exit_code,
        "problems": problems,
    }


def print_table(summary: dict[str, Any]) -> None:
    rows: list[tuple[str, Any]] = [
        ("elicitations / servers / in flight",
         f"{summary['calls']} / {summary['servers']} / {summary['concurrency']} (seed {summary['seed']})"),
        ("calls answered with one result", f"{summary['replied']} of {summary['calls']}"),
    ]
    for outcome in ("accept", "decline", "cancel", "expired"):
        rows.append((f"  outcome {outcome}", summary["outcomes"].get(outcome, 0)))
    plans = summary["plans"]
    rows += [
        ("  races (two windows at once)", plans.get("race", 0)),
        ("  invalid content, then valid", plans.get("invalid", 0)),
        ("  nobody answered (expired)", plans.get("none", 0)),
        ("second answers: already-answered", summary["refusals"].get("already-answered", 0)),
        ("invalid content: invalid-content", summary["refusals"].get("invalid-content", 0)),
        ("wall time", f"{summary['seconds']} s"),
        ("calls/s", summary["callsPerSecond"]),
        ("call latency p50 / p99 (all)", f"{summary['latencyMs']['p50']} / {summary['latencyMs']['p99']} ms"),
        ("call latency p50 / p99 (answered)",
         f"{summary['latencyMs']['answeredP50']} / {summary['latencyMs']['answeredP99']} ms"),
        ("windows attached", summary["windows"]["attached"]),
        ("windows detached (bye / vanished)",
         f"{summary['windows']['detachedBye']} / {summary['windows']['detachedSilent']}"),
        ("blackouts (no window) / max attached",
         f"{summary['windows']['blackouts']} / {summary['windows']['maxAttached']}"),
        ("invokes delivered in a welcome", summary["windows"]["deliveredInWelcome"]),
        ("audit rows", f"{summary['audit']['rows']} {summary['audit']['outcomes']}"),
        ("audit agrees", "yes" if summary["audit"]["agrees"] else "NO"),
        ("main log lines (refused / errors)",
         "{lines} ({refusedLines} / {errorLines})".format(**summary["mainLog"])),
        ("discrepancies", len(summary["problems"])),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    for text in summary["problems"][:50]:
        print(f"  - {text}")
    if len(summary["problems"]) > 50:
        print(f"  ... and {len(summary['problems']) - 50} more")


def hosts_main(args: argparse.Namespace) -> int:
    concurrency = args.concurrency or 16
    if args.hosts < 1 or concurrency < 1:
        print("soak: --hosts and --concurrency must be positive", file=sys.stderr)
        return 2
    home = short_tmp_dir("eli-soak-hosts-")
    try:
        return main_hosts(args.hosts, concurrency, args.seed, args.exit_within, home, args.json,
                          lambda line: print(f"soak: {line}", file=sys.stderr, flush=True))
    except (AssertionError, RuntimeError, OSError) as exc:
        print(f"soak: could not run main: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.keep:
            print(f"kept {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elicitations", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=None,
                        help="calls in flight at most (50); with --hosts, sessions at once (16)")
    parser.add_argument("--hosts", type=int, default=0, metavar="N",
                        help="soak N host sessions ended every way (stdio and HTTP) instead of elicitations")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="elicitationTimeoutSeconds of every server")
    parser.add_argument("--churn-ms", type=float, default=250.0,
                        help="mean time between windows attaching or detaching")
    parser.add_argument("--exit-within", type=float, default=2.0, metavar="S",
                        help="with --hosts: serve must exit within S seconds of its host ending the session")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=180.0, help="the whole run, start to cleanup")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (main's log, audit log)")
    args = parser.parse_args(argv)
    if args.hosts:
        return hosts_main(args)
    args.concurrency = args.concurrency or 50
    if args.elicitations < 1 or args.servers < 1 or args.concurrency < 1 or args.churn_ms <= 0:
        parser.error("--elicitations, --servers, --concurrency and --churn-ms must be positive")

    began = time.monotonic()
    home = short_tmp_dir("eli-soak-")  # main's config, connection file, audit log and logs: this run's alone
    main: RunningMain | None = None
    soak: Soak | None = None
    try:
        config = soak_config(home, args.servers, args.elicitations, args.timeout)
        try:
            main = start_main(config, home, home=home)
            info = main.info
            soak = Soak(endpoint=info["endpoint"], token=info["token"],
                        servers=[f"demo-{i}" for i in range(args.servers)], elicitations=args.elicitations,
                        concurrency=args.concurrency, seed=args.seed, churn_mean_s=args.churn_ms / 1000)
            soak.wait_ready(timeout_s=60)
        except (AssertionError, RuntimeError, OSError, ValueError) as exc:
            print(f"soak: could not start main: {exc}", file=sys.stderr)
            return 2
        # Leave time to stop main and read the audit log within --max-seconds.
        soak.run(deadline_s=max(10.0, args.max_seconds - (time.monotonic() - began) - 35))
        soak.close()
        exit_code = stop_main(main, timeout_s=20)
        main.stop()  # what `elicitron stop` left (nothing, normally); main's log is complete now
        audit_rows: list[dict[str, Any]] | None = None
        audit_error = None
        # One row per elicitation; `elicitron audit` gives at most MAX_AUDIT_ROWS (it refused the
        # 10 * N + 100 this asked for before, and the soak's audit check failed on that alone).
        if args.elicitations + 100 > MAX_AUDIT_ROWS:
            audit_error = (f"the audit check reads at most {MAX_AUDIT_ROWS} rows (elicitron audit --limit): "
                           f"run it with --elicitations {MAX_AUDIT_ROWS - 100} or fewer")
        else:
            done = main.cli_plain("audit", "--json", "--limit", str(args.elicitations + 100), timeout=30)
            if done.returncode != 0:
                audit_error = f"elicitron audit exited {done.returncode}: {done.stderr.strip()[:300]}"
            else:
                audit_rows = json.loads(done.stdout)
        verdict = verify(soak, audit_rows)
        summary = summarize(args, soak, verdict, main.stderr.lines(), exit_code, audit_error)
        if args.json:
            print(json.dumps(summary, indent=2))
        else:
            print_table(summary)
        if args.keep:
            print(f"kept {home}", file=sys.stderr)
        return 1 if summary["problems"] else 0
    finally:
        if main is not None:
            main.stop(timeout_s=10)
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
