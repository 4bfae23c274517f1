"""Test helpers for the consent layer (issue 11): a main whose rule store and audit log are its own,
and a host.

Every main here gets a private data dir: remembered rules outlive main on purpose, so they must not
leak into other tests (the suite's other mains share one data dir). Restarting keeps the dir.

`WireHost` is a host exactly as the `elicitron serve` gateway is one to main: a contract-only
peer that says `role: "host"` and relays its MCP sessions (`kit.relay_host`, PROTOCOL.md §14).
Tests use only `call` and `result`, so putting mcp's own `Client` through the gateway in its place
changes this class, not the tests.
"""

import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kit.demo import demo_stdio_entry
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main
from kit.peer import WirePeer
from kit.relay_host import RelayHost


class ConsentMain(RunningMain):
    """A kit RunningMain whose config, data (rules.sqlite3, audit.sqlite3) and logs live in `home`."""

    def __init__(self, running: RunningMain, config: Path, runtime: Path) -> None:
        super().__init__(running.proc, running.connection, running.home, running.stderr)
        self.config = config
        self.runtime_dir = runtime

    @property
    def rules_path(self) -> Path:
        assert self.home is not None
        return self.home / "data" / "elicitron" / "rules.sqlite3"

    def audit(self) -> list[dict[str, Any]]:
        done = self.cli("audit", "--json", "--limit", "1000")  # this main's: never one the locator names
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
    return demo_stdio_entry(**extra)


def write_consent_config(path: Path, servers: dict[str, Any], rules: list[dict[str, Any]] | None = None) -> Path:
    data: dict[str, Any] = {"mcpServers": servers}
    if rules is not None:
        data["elicitron"] = {"rules": rules}
    path.write_text(json.dumps(data))
    return path


def launch(config: Path, runtime: Path, home: Path, ready: list[str]) -> ConsentMain:
    """Start main (its dirs under `home`) and wait until each server in `ready` reports ready."""
    running = ConsentMain(start_main(config, runtime, home=home), config, runtime)
    for name in ready:
        running.wait_server_ready(name)
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
        assert old.home is not None
        running = launch(old.config, old.runtime_dir, old.home, list(ready))
        started.append(running)
        return running

    start.again = again  # type: ignore[attr-defined]
    yield start
    for running in started:
        running.stop()
    for runtime in runtimes:
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


class WireHost:
    """A host peer (what `elicitron serve` is to main): says role "host", calls in its relayed
    sessions (one per server, its `clientInfo.name` its hello name)."""

    def __init__(self, main: RunningMain, name: str = "Test Host") -> None:
        self.peer: WirePeer = main.peer(name=name, role="host")
        self.relay = RelayHost(self.peer)

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        """Start a call; its handle for `result`."""
        return self.relay.call_tool(server, tool, arguments)

    def result(self, handle: str, timeout_s: float = 20.0) -> dict[str, Any]:
        """The CallToolResult (MCP JSON) of a call; fails on an error reply."""
        reply = self.relay.reply(handle, timeout_s)
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
