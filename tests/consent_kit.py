"""Test helpers for the consent layer (issue 11): a main whose rule store and audit log are its own,
and a host.

Every main here gets a private data dir: remembered rules outlive main on purpose, so they must not
leak into other tests (the suite's other mains share one data dir). Restarting keeps the dir.

`WireHost` is a host exactly as the `elicitron serve` gateway is one to main: a contract-only
peer that says `role: "host"` and sends `msgMcpCallTool`. Tests use only `call` and `result`, so
putting mcp's own `Client` through the gateway in its place changes this class, not the tests.
"""

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import DEMO_SERVER, ROOT, RunningMain, StderrReader, child_env, short_tmp_dir
from wire_peer import WirePeer


def consent_env(home: Path) -> dict[str, str]:
    return child_env(XDG_DATA_HOME=str(home / "data"), XDG_STATE_HOME=str(home / "state"),
                     XDG_CONFIG_HOME=str(home / "config"))


@dataclass
class ConsentMain(RunningMain):
    home: Path | None = None  # XDG base of this main's data (rules.sqlite3, audit.sqlite3) and logs
    config: Path | None = None
    runtime: Path | None = None

    def env(self) -> dict[str, str]:
        assert self.home is not None
        return consent_env(self.home)

    @property
    def rules_path(self) -> Path:
        assert self.home is not None
        return self.home / "data" / "elicitron" / "rules.sqlite3"

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "main_process", *args, "--connection", str(self.connection)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env(), cwd=ROOT,
                              check=False)

    def cli_plain(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "main_process", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env(), cwd=ROOT,
                              check=False)

    def audit(self) -> list[dict[str, Any]]:
        done = self.cli_plain("audit", "--json", "--limit", "1000")
        assert done.returncode == 0, done.stderr
        rows: list[dict[str, Any]] = json.loads(done.stdout)
        return rows

    def audit_until(self, wanted: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 15.0) -> list[dict[str, Any]]:
        """The audit log as `elicitron audit` shows it, read again until `wanted(rows)` (rows of calls a
        rule allowed reach the disk with the next batch, within 20 ms)."""
        deadline = time.monotonic() + timeout_s
        while not wanted(rows := self.audit()):
            assert time.monotonic() < deadline, f"the audit log never showed what was wanted: {rows[:5]}"
        return rows

    def rules(self) -> list[dict[str, Any]]:
        done = self.cli("rules", "--json")
        assert done.returncode == 0, done.stderr
        rules: list[dict[str, Any]] = json.loads(done.stdout)
        return rules


def demo(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(DEMO_SERVER)], **extra}


def write_consent_config(path: Path, servers: dict[str, Any], rules: list[dict[str, Any]] | None = None) -> Path:
    data: dict[str, Any] = {"mcpServers": servers}
    if rules is not None:
        data["elicitron"] = {"rules": rules}
    path.write_text(json.dumps(data))
    return path


def launch(config: Path, runtime: Path, home: Path, ready: list[str]) -> ConsentMain:
    """Start main (info logging, stderr piped) and wait until each server in `ready` is ready."""
    connection = runtime / "connection.json"
    env = consent_env(home)
    argv = [sys.executable, "-m", "main_process", "--log-level", "info", "main", "--connection", str(connection),
            "--config", str(config)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, cwd=ROOT)
    running = ConsentMain(proc=proc, connection=connection, stderr=StderrReader(proc), home=home, config=config,
                          runtime=runtime)
    running.stderr.until("listening on", timeout_s=30)
    for name in ready:
        running.stderr.until(f"server {name} ready", timeout_s=60)
    return running


ConsentMains = Callable[..., ConsentMain]


def started_mains(tmp_path: Path) -> Iterator[ConsentMains]:
    """Body of a test module's `consent_mains` fixture. `start(servers, rules=None, ready=("demo",))`
    starts a main with a fresh private data dir; `start.again(main)` stops it (SIGTERM) and starts a
    new main on the same config and data. Every main is stopped at the end."""
    started: list[ConsentMain] = []
    runtimes: list[Path] = []

    def start(servers: dict[str, Any], rules: list[dict[str, Any]] | None = None,
              ready: tuple[str, ...] = ("demo",)) -> ConsentMain:
        runtime = short_tmp_dir()
        runtimes.append(runtime)
        home = Path(tempfile.mkdtemp(prefix="consent-", dir=tmp_path))
        config = write_consent_config(home / "mcp.json", servers, rules)
        running = launch(config, runtime, home, list(ready))
        started.append(running)
        return running

    def again(old: ConsentMain, ready: tuple[str, ...] = ("demo",)) -> ConsentMain:
        old.stop()
        assert old.config is not None and old.runtime is not None and old.home is not None
        running = launch(old.config, old.runtime, old.home, list(ready))
        started.append(running)
        return running

    start.again = again  # type: ignore[attr-defined]
    yield start
    for running in started:
        running.stop()
    for runtime in runtimes:
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


class WireHost:
    """A host peer (what `elicitron serve` is to main): says role "host", sends msgMcpCallTool."""

    def __init__(self, main: RunningMain, name: str = "Test Host") -> None:
        self.peer: WirePeer = main.peer(name=name, role="host")

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        """Start a call; its handle for `result`."""
        return self.peer.call_tool(server, tool, arguments)

    def result(self, handle: str, timeout_s: float = 20.0) -> dict[str, Any]:
        """The CallToolResult (MCP JSON) of a call; fails on an error reply."""
        reply = self.peer.expect_topic(handle, timeout_s)
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    def close(self) -> None:
        self.peer.close()


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(item.get("text", "") for item in result.get("content", []))


def invoke_of(window: WirePeer, timeout_s: float = 15.0) -> dict[str, Any]:
    body: dict[str, Any] = window.expect_topic("msgElicitationTransferInvoke", timeout_s)
    return body
