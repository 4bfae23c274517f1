"""Mains that share one PostgreSQL store (tests/kit/postgres.py's server): each in a home, config
and runtime dir of its own, on one machine, each under its own `"machine"` name."""

import json
import shutil
import time
from pathlib import Path
from typing import Any

from consent_kit import ConsentMain, demo
from kit.env import short_tmp_dir
from kit.main import start_main

BOOKING = {"name": "Ada", "party_size": 3}


class Mains:
    """Mains on one store URL, each in a home of its own; all stopped at the end. `rules`: the
    config rules every main gets (the config's `elicitron.rules`)."""

    def __init__(self, url: str, rules: list[dict[str, Any]] | None = None) -> None:
        self.url = url
        self.rules = rules
        self.started: list[ConsentMain] = []
        self.dirs: list[Path] = []

    def start(self, machine: str) -> ConsentMain:
        [main] = self.start_all(machine)
        return main

    def start_all(self, *machines: str) -> list[ConsentMain]:
        """One main per machine name, started together (each its demo server ready)."""
        started = []
        for machine in machines:
            home = short_tmp_dir("eli-pg-home-")
            self.dirs.append(home)
            config = home / "mcp.json"
            settings: dict[str, Any] = {"machine": machine}
            if self.rules is not None:
                settings["rules"] = self.rules
            config.write_text(json.dumps({"mcpServers": {"demo": demo()}, "elicitron": settings}))
            main = ConsentMain(start_main(config, home, "--store", self.url, home=home, wait=False), config, home)
            self.started.append(main)
            started.append(main)
        for main in started:
            main.wait_up()
            main.wait_server_ready("demo")
        return started

    def close(self) -> None:
        for main in self.started:
            main.stop()
        for home in self.dirs:
            shutil.rmtree(home, ignore_errors=True)


def booked(peer: Any, channel: str) -> dict[str, Any]:
    reply = peer.expect_topic(channel)
    assert "result" in reply, reply
    answer: dict[str, Any] = json.loads(reply["result"]["content"][0]["text"])
    return answer


def audit_rows(main: ConsentMain, url: str, count: int, timeout_s: float = 15.0) -> list[dict[str, Any]]:
    """`elicitron audit --json --store URL` until it shows `count` rows (a rule's row is written
    with the next batch)."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = main.cli_plain("audit", "--json", "--store", url)
        assert done.returncode == 0, done.stderr
        rows: list[dict[str, Any]] = json.loads(done.stdout)
        if len(rows) >= count:
            return rows
        assert time.monotonic() < deadline, f"the audit never showed {count} rows: {rows}"
