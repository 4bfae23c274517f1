"""Mains that share one PostgreSQL store (tests/kit/postgres.py's server): each in a home, config
and runtime dir of its own, on one machine, each under its own `"machine"` name."""

import json
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from consent_kit import ConsentMain, demo
from kit import wire
from kit.env import short_tmp_dir
from kit.main import start_main
from kit.peer import WirePeer
from kit.postgres import PostgresServer

BOOKING = {"name": "Ada", "party_size": 3}
DISMISS = "msgElicitationTransferDismiss"
INVOKE = "msgElicitationTransferInvoke"
REQUESTS_AT_ONCE = 100  # the demo server's elicitationBurst: the outage tests open 50 at once (default 20 a minute)


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
            config.write_text(json.dumps({"mcpServers": {"demo": demo(elicitationBurst=REQUESTS_AT_ONCE)}, "elicitron": settings}))
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


@contextmanager
def team_on(postgres: PostgresServer, *machines: str) -> Iterator[tuple[Mains, list[ConsentMain]]]:
    """Mains on a new database of the session's server, one per machine name, started together;
    stopped and the database dropped at the end."""
    database = postgres.new_database()
    mains = Mains(postgres.url(database))
    try:
        yield mains, mains.start_all(*machines)
    finally:
        mains.close()
        postgres.drop_database(database)


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


class Windows:
    """Contract-only windows on several mains that keep each other attached while any one waits
    (main lets a window silent for 5 s go)."""

    def __init__(self) -> None:
        self.all: list[WirePeer] = []

    def open(self, main: ConsentMain, name: str, role: str = "renderer", user: str | None = None) -> WirePeer:
        """A welcomed peer; `user`: the OS user a desktop window says in its hello."""
        peer = main.peer(name=name, role=role, hello=user is None)
        if user is not None:
            peer.send("hello", {**wire.hello_body(peer.token, peer.window, name, role), "user": user})
            assert peer.expect_topic("welcome")
        self.all.append(peer)
        for each in self.all:
            each.companions = self.all
        return peer

    def close(self) -> None:
        for peer in self.all:
            peer.close()


def dismiss_of(window: WirePeer, channel: str, timeout_s: float = 10.0) -> dict[str, Any]:
    body: dict[str, Any] = window.expect(lambda t, b: t == DISMISS and b["responseChannel"] == channel, timeout_s)[1]
    return body


def ask(windows: Windows, main: ConsentMain, restaurant: str) -> tuple[WirePeer, str]:
    """A caller on `main` calls the demo's book_table (its server elicits); the caller and its call."""
    caller = windows.open(main, "cli", role="controller")
    return caller, caller.call_tool("demo", "book_table", {"restaurant": restaurant})


def store_state(peer: WirePeer, wanted: Callable[[dict[str, Any]], bool], timeout_s: float = 15.0) -> dict[str, Any]:
    """main's store as its msgStatus reply says it (what `elicitron status` shows), once `wanted`
    holds; the store changes with main's heartbeat (every second), each reply is one round trip."""
    deadline = time.monotonic() + timeout_s
    while True:
        store: dict[str, Any] = peer.status()["store"]
        if wanted(store):
            return store
        assert time.monotonic() < deadline, f"{peer.name}: the store never became as wanted: {store}"
        peer.sock.poll(100)  # a message from main (it stays unread here) or 100 ms, before asking again
