"""Soak test (issue 5, "Load"): many elicitations through a real main while windows come and go.

Starts `python -m main_process main` with N demo servers over stdio (its config, data and state dirs
in a private temp dir, so the audit log is this run's alone), drives `--elicitations` book_table
calls from a controller peer with bounded concurrency, while renderer peers attach and detach at
random (seeded) and answer: accept / decline / cancel, two windows at once, invalid content first,
or nobody (the request expires). Then it stops main (`elicitron stop`), reads the audit log
(`elicitron audit --json`) and checks that every call got exactly one result, every request was
answered exactly once or expired, no channel took two answers, and the audit log agrees.

Prints a summary table (or `--json`); exits 1 on any discrepancy, 2 if main could not be run.
Bounded: every wait has a deadline (`--max-seconds`, default 180), and the temp dir and main are
cleaned up on every path. Only ipc:// (a socket in the temp dir) is used.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from soaklib.driver import Soak
from soaklib.verify import Verdict, verify

ROOT = Path(__file__).resolve().parent.parent
DEMO_SERVER = ROOT / "main_process" / "demo_server.py"


class MainProcess:
    """main in a subprocess; a thread reads its log so it never blocks on a full pipe."""

    def __init__(self, home: Path, config: Path) -> None:
        self.home = home
        self.connection = home / "connection.json"
        self.env = child_env(home)
        argv = [sys.executable, "-m", "main_process", "--log-level", "info", "main",
                "--connection", str(self.connection), "--config", str(config)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=self.env, cwd=ROOT)
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="main-log", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._changed:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, marker: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not any(marker in line for line in self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    tail = "\n".join(self.lines[-30:])
                    raise RuntimeError(f"main: {marker!r} did not appear within {timeout_s:.0f} s:\n{tail}")
                self._changed.wait(min(left, 0.5))

    def cli(self, *args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "main_process", *args], capture_output=True, text=True,
                              timeout=timeout_s, env=self.env, cwd=ROOT)

    def stop(self, timeout_s: float) -> int | None:
        """`elicitron stop`, then SIGTERM, then SIGKILL; main's exit code if it stopped by itself."""
        if self.proc.poll() is None:
            try:
                self.cli("stop", "--connection", str(self.connection), "--timeout", str(timeout_s),
                         timeout_s=timeout_s + 5)
            except subprocess.TimeoutExpired:
                pass
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        return None


def child_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
           "XDG_STATE_HOME": str(home / "state"), "XDG_RUNTIME_DIR": str(home / "run")}
    env.pop("ELICITRON_CONNECTION", None)
    return env


def write_config(home: Path, servers: int, elicitations: int, timeout_s: float) -> Path:
    entry = {"command": sys.executable, "args": [str(DEMO_SERVER)], "elicitationTimeoutSeconds": timeout_s,
             # All of a server's requests may come within one burst window: lift the limit above them.
             "elicitationBurst": max(1000, 2 * elicitations)}
    path = home / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {f"demo-{i}": entry for i in range(servers)}}))
    return path


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), int(round(q / 100 * len(ordered) + 0.5))))
    return ordered[rank - 1]


def summarize(args: argparse.Namespace, soak: Soak, verdict: Verdict, main: MainProcess,
              exit_code: int | None, audit_error: str | None) -> dict[str, Any]:
    elapsed = max(1e-9, soak.finished_at - soak.started_at)
    latencies = [c.replied_at - c.sent_at for c in soak.calls if c.replied_at is not None]
    answered = [c.replied_at - c.sent_at for c in soak.calls if c.replied_at is not None and c.elicitation
                and soak.elicitations[c.elicitation].executed_as != "none"]
    log_errors = [line for line in main.lines if " ERROR " in line or "Traceback" in line]
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
        "latencyMs": {"p50": round(percentile(latencies, 50) * 1000, 1),
                      "p99": round(percentile(latencies, 99) * 1000, 1),
                      "answeredP50": round(percentile(answered, 50) * 1000, 1),
                      "answeredP99": round(percentile(answered, 99) * 1000, 1)},
        "windows": {"attached": soak.stats.attached, "detachedBye": soak.stats.detached_bye,
                    "detachedSilent": soak.stats.detached_silent, "blackouts": soak.stats.blackouts,
                    "maxAttached": soak.stats.max_attached,
                    "deliveredInWelcome": soak.stats.welcomed_with_pending},
        "audit": {"rows": verdict.audit_rows, "outcomes": dict(verdict.audit_outcomes), "agrees": audit_ok},
        "mainLog": {"lines": len(main.lines), "errorLines": len(log_errors),
                    "refusedLines": sum(1 for line in main.lines if "refused" in line)},
        "mainExitCode": exit_code,
        "problems": problems,
    }


def print_table(summary: dict[str, Any]) -> None:
    rows: list[tuple[str, Any]] = [
        ("elicitations / servers / in flight", f"{summary['calls']} / {summary['servers']} / "
                                               f"{summary['concurrency']} (seed {summary['seed']})"),
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elicitations", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=50, help="calls in flight at most")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="elicitationTimeoutSeconds of every server")
    parser.add_argument("--churn-ms", type=float, default=250.0,
                        help="mean time between windows attaching or detaching")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=180.0, help="the whole run, start to cleanup")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (main's log, audit log)")
    args = parser.parse_args(argv)
    if args.elicitations < 1 or args.servers < 1 or args.concurrency < 1 or args.churn_ms <= 0:
        parser.error("--elicitations, --servers, --concurrency and --churn-ms must be positive")

    began = time.monotonic()
    home = Path(tempfile.mkdtemp(prefix="eli-soak-", dir="/tmp"))  # short: ipc paths are limited
    main_process: MainProcess | None = None
    soak: Soak | None = None
    try:
        config = write_config(home, args.servers, args.elicitations, args.timeout)
        main_process = MainProcess(home, config)
        try:
            main_process.wait_for("listening on", timeout_s=30)
            info = json.loads(main_process.connection.read_text())
            soak = Soak(endpoint=info["endpoint"], token=info["token"],
                        servers=[f"demo-{i}" for i in range(args.servers)], elicitations=args.elicitations,
                        concurrency=args.concurrency, seed=args.seed, churn_mean_s=args.churn_ms / 1000)
            soak.wait_ready(timeout_s=60)
        except (RuntimeError, OSError, ValueError) as exc:
            print(f"soak: could not start main: {exc}", file=sys.stderr)
            return 2
        # Leave time to stop main and read the audit log within --max-seconds.
        soak.run(deadline_s=max(10.0, args.max_seconds - (time.monotonic() - began) - 35))
        soak.close()
        exit_code = main_process.stop(timeout_s=20)
        audit_rows: list[dict[str, Any]] | None = None
        audit_error = None
        done = main_process.cli("audit", "--json", "--limit", str(10 * args.elicitations + 100), timeout_s=30)
        if done.returncode != 0:
            audit_error = f"elicitron audit exited {done.returncode}: {done.stderr.strip()[:300]}"
        else:
            audit_rows = json.loads(done.stdout)
        verdict = verify(soak, audit_rows)
        summary = summarize(args, soak, verdict, main_process, exit_code, audit_error)
        if args.json:
            print(json.dumps(summary, indent=2))
        else:
            print_table(summary)
        if args.keep:
            print(f"kept {home}", file=sys.stderr)
        return 1 if summary["problems"] else 0
    finally:
        if main_process is not None and main_process.proc.poll() is None:
            main_process.stop(timeout_s=10)
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
