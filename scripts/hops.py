"""Hops and files of one `tools/call` through Elicitron, in each way a host reaches a server.

    scripts/hops [ROOT] [--calls N]

A real main (ROOT's, default this checkout) with the demo server, and a host (mcp.Client over stdio)
on `elicitron serve --server demo` and on `elicitron serve` (every server at once, `demo__echo`).
Every Elicitron process on the path runs with hopslib/sitecustomize.py, which keeps each call of a
product function with its time. For each of N echo calls after a warm-up, what ran between the
host's send and its result is read back:
- files: the product files (shared/, *_process/) whose code ran;
- hops: hand-offs between files, each process and thread on its own: consecutive product calls in
  different files (code outside the product, the SDK or the event loop, in between is not a file);
- processes: the Elicitron processes whose code ran, with the product calls of each.
The median over the calls is printed. ROOT may be an older checkout (a `git worktree` or `git
archive`) for a before/after comparison; this checkout's .venv runs it. The closing notes of
structural work quote it, with scripts/anatomy.
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGES = ("shared", "main_process", "cli_process", "gateway_process", "renderer_process", "web_process",
            "asker_process")
MODES: tuple[tuple[str, list[str], str], ...] = (("serve --server demo", ["--server", "demo"], "echo"), ("serve (every server)", [], "demo__echo"))
WARM_UP_CALLS = 5
START_TIMEOUT_S = 60.0


def _env(root: Path, home: Path, out: Path) -> dict[str, str]:
    """What a host gives a stdio server (HOME, LOGNAME, PATH, SHELL, TERM, USER), this run's dirs, the tracer."""
    return {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "LOGNAME": os.environ.get("LOGNAME", "user"),
            "USER": os.environ.get("USER", "user"), "SHELL": "/bin/sh", "TERM": "dumb",
            "XDG_RUNTIME_DIR": str(home / "run"), "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_DATA_HOME": str(home / "data"), "XDG_STATE_HOME": str(home / "state"),
            "PYTHONPATH": f"{root}{os.pathsep}{HERE / 'hopslib'}", "HOPS_OUT": str(out), "HOPS_ROOT": str(root),
            "HOPS_PACKAGES": ",".join(PACKAGES)}


async def _host(root: Path, env: dict[str, str], serve_args: list[str], tool: str, calls: int) -> list[tuple[int, int]]:
    """A host on `elicitron serve`: warm-up, then `calls` echo calls, each's (sent, result) times."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "cli_process", "serve", *serve_args],
                                   env=env, cwd=str(root))
    windows = []
    async with Client(stdio_client(params)) as client:
        deadline = time.monotonic() + START_TIMEOUT_S
        while tool not in [t.name for t in (await client.list_tools()).tools]:  # the server is starting
            if time.monotonic() > deadline:
                raise SystemExit(f"hops: {tool} was not listed within {START_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.2)  # (a poll of what the host sees, in a measuring script)
        for index in range(WARM_UP_CALLS + calls):
            text = f"hop {index}"
            sent = time.monotonic_ns()
            result = await client.call_tool(tool, {"text": text})
            done = time.monotonic_ns()
            if text not in json.dumps(result.model_dump()):
                raise SystemExit(f"hops: {tool} did not echo: {result}")
            if index >= WARM_UP_CALLS:
                windows.append((sent, done))
    return windows


def _wait_up(root: Path, env: dict[str, str], connection: Path, main_proc: "subprocess.Popen[bytes]") -> None:
    """main answers `status` (before it does, serve would start a main of its own)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while subprocess.run([sys.executable, "-m", "cli_process", "status", "--connection", str(connection)],
                         check=False, env=env, cwd=root, capture_output=True).returncode != 0:
        if main_proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"hops: main did not come up (exit {main_proc.poll()})")


def _read(out: Path) -> dict[str, tuple[str, list[tuple[int, str, str]]]]:
    """Each traced process: its command line and its (time, file, thread) calls."""
    traced = {}
    for tsv in out.glob("*.tsv"):
        lines = tsv.read_text(encoding="utf-8").splitlines()
        calls = []
        for line in lines[1:]:
            t, path, _name, thread = line.split("\t")
            calls.append((int(t), path, thread))
        traced[tsv.stem] = (lines[0], calls)
    return traced


def _role(command: str) -> str:
    words = command.split()
    return next((word for word in ("main", "serve") if word in words), " ".join(words[:3]))


def _one_call(traced: dict[str, tuple[str, list[tuple[int, str, str]]]], sent: int, done: int) -> dict[str, Any]:
    files: set[str] = set()
    hops = 0
    processes: Counter[str] = Counter()
    for command, calls in traced.values():
        last: dict[str, str] = {}
        for t, path, thread in calls:
            if sent <= t <= done:
                files.add(path)
                processes[_role(command)] += 1
                if last.get(thread) != path:
                    hops += 1
                    last[thread] = path
    return {"hops": hops, "files": sorted(files), "processes": dict(processes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=str(HERE.parent))
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args()
    root = Path(args.root).resolve()
    home = Path(tempfile.mkdtemp(prefix="eli-hops-"))
    try:
        out = home / "out"
        out.mkdir()
        (home / "run").mkdir(mode=0o700)
        config = home / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"demo": {
            "command": sys.executable, "args": [str(root / "main_process" / "demo_server.py")]}}}))
        connection = home / "run" / "connection.json"
        env = _env(root, home, out)
        with open(home / "main.log", "wb") as log:
            main_proc = subprocess.Popen([sys.executable, "-m", "cli_process", "main", "--config", str(config),
                                          "--connection", str(connection)], env=env, cwd=root,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            _wait_up(root, env, connection, main_proc)
            windows = {name: asyncio.run(_host(root, env, ["--connection", str(connection), *serve_args],
                                               tool, args.calls))
                       for name, serve_args, tool in MODES}
            if main_proc.poll() is not None:
                raise SystemExit(f"hops: main exited during the calls ({main_proc.returncode})")
        finally:
            main_proc.terminate()  # main writes its calls on the way out (SIGTERM: a clean stop)
            main_proc.wait(30)
        traced = _read(out)
        print(f"{root}: {args.calls} echo calls a mode, median per call")
        for name, spans in windows.items():
            calls = [_one_call(traced, sent, done) for sent, done in spans]
            hops = statistics.median(c["hops"] for c in calls)
            counts = statistics.median(len(c["files"]) for c in calls)
            typical = min(calls, key=lambda c: (abs(len(c["files"]) - counts), abs(c["hops"] - hops)))
            print(f"\n{name}: {hops:g} hops, {counts:g} files; processes (product calls): "
                  + ", ".join(f"{role} {n}" for role, n in typical["processes"].items()))
            for path in typical["files"]:
                print(f"  {path}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
