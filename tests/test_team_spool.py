"""Nothing lost, even by a main that stops during an outage (issue 35, item 4): what a main decides
while its PostgreSQL store is away is kept in its spool on disk (main_process/store/spool.py)
before its server hears the answer, so a main stopped (SIGTERM) or killed (kill -9) before the
store is back makes those writes when it next starts: every decision is in the store's audit
exactly once. A quorum approval given while away is in the store's count once it is back, and the
audit names every approver. A spool of garbage is one log line naming it, and main serves.
Real mains, the demo server, mcp's `Client` through `elicitron serve`, contract-only windows, the
session's private PostgreSQL (tests/kit/postgres.py) stopped and started with `pg_ctl`."""

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from consent_kit import ConsentMain, invoke_of
from gateway_kit import Host, HostLoop, serve_params, text_of
from kit.main import start_main
from kit.peer import kept_attached
from kit.postgres import PostgresServer
from team_kit import Mains, Windows, ask, booked, dismiss_of, store_state
from test_quorum_team import APPROVERS, QUORUM_RULE, allow, cancel, recount

from main_process.store.spool import spool_path

KEPT_MADE = "kept by the last run of this main"  # main's line as it starts with a spool to make


@pytest.fixture
def windows() -> Iterator[Windows]:
    opened = Windows()
    yield opened
    opened.close()


@pytest.fixture
def mains(postgres: PostgresServer) -> Iterator[Mains]:
    """Mains on a new database of the session's server; stopped and the database dropped at the end."""
    database = postgres.new_database()
    team = Mains(postgres.url(database), rules=[QUORUM_RULE])
    try:
        yield team
    finally:
        team.close()
        postgres.drop_database(database)


def _again(mains: Mains, old: ConsentMain) -> ConsentMain:
    """`old`'s main started again: the same home, config, connection file and store."""
    assert old.home is not None
    main = ConsentMain(start_main(old.config, old.home, "--store", mains.url, home=old.home, wait=False), old.config,
                       old.home)
    mains.started.append(main)
    main.wait_up()
    main.wait_server_ready("demo")
    return main


def _spool(mains: Mains, main: ConsentMain) -> Path:
    assert main.home is not None
    return spool_path(main.home / "state" / "elicitron", main.connection, mains.url)


def _logged(main: ConsentMain, text: str, timeout_s: float = 15.0) -> list[str]:
    """main's log lines with `text`, once there is one (waits on what main writes)."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = main.stderr.size
        lines = [line for line in main.stderr.lines() if text in line]
        if lines:
            return lines
        left = deadline - time.monotonic()
        assert left > 0, f"main never logged {text!r}; its log:\n{main.stderr.tail()}"
        main.stderr.wait_change(seen, min(left, 0.5))


def _outcomes(url: str, channels: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """The store's audit rows of these channels: (outcome, window, machine), and how each inbox row ended."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT e.channel, e.outcome, e.answer_window, e.machine, o.state FROM elicitations e "
                            "LEFT JOIN open_requests o ON o.channel = e.channel WHERE e.channel = ANY(%s)",
                            (channels,)).fetchall()
    found: dict[str, list[tuple[Any, ...]]] = {}
    for channel, *rest in rows:
        found.setdefault(channel, []).append(tuple(rest))
    return found


def _in_store(url: str, channel: str, timeout_s: float = 10.0) -> None:
    """Until main's publish of `channel` is committed (the inbox's trigger notifies every insert)."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("LISTEN elicitron_inbox")
        while conn.execute("SELECT 1 FROM open_requests WHERE channel = %s", (channel,)).fetchone() is None:
            left = deadline - time.monotonic()
            assert left > 0, f"{channel} never reached the store"
            for _note in conn.notifies(timeout=left, stop_after=1):
                pass


def _unreachable(store: dict[str, Any]) -> bool:
    return store["reachable"] is False


def _written(store: dict[str, Any]) -> bool:
    return store["reachable"] is True and not store.get("waiting")


@pytest.mark.parametrize("stop", ["SIGTERM", "kill -9"])
def test_what_a_main_decided_while_away_is_in_the_audit_once_after_it_stopped_and_started_again(
        stop: str, mains: Mains, windows: Windows, postgres: PostgresServer) -> None:
    [a] = mains.start_all("laptop-a")
    on_a = windows.open(a, "ana")
    caller, before = ask(windows, a, "Septime")
    published = invoke_of(on_a)["responseChannel"]
    _in_store(mains.url, published)  # in the store before the outage
    decided: dict[str, Any] = {}
    sockets = threading.Lock()

    def while_down() -> None:
        with sockets:
            store_state(caller, _unreachable, timeout_s=10.0)
            during = caller.call_tool("demo", "book_table", {"restaurant": "Frenchie"})
            opened = invoke_of(on_a)["responseChannel"]  # opened while away: this main's windows only
            on_a.send(published, {"action": "accept", "content": {"name": "Ada", "party_size": 2}})
            on_a.send(opened, {"action": "decline"})
            decided["before"], decided["during"] = booked(caller, before), booked(caller, during)
            decided["waiting"] = store_state(caller, lambda store: store.get("waiting", 0) >= 2)["waiting"]
            decided["channels"] = {published: "accept", opened: "decline"}
        # the server had its answers: the decisions are reported, and main goes before the store is back
        decided["spool"] = _spool(mains, a).exists()
        if stop == "kill -9":
            os.kill(a.pid, signal.SIGKILL)
            a.proc.wait(10)
        a.stop()

    with kept_attached(*windows.all, sockets=sockets):
        postgres.restart(while_down)
    assert decided["before"] == {"action": "accept", "content": {"name": "Ada", "party_size": 2}}
    assert decided["during"] == {"action": "decline", "content": None}
    assert decided["waiting"] >= 2 and decided["spool"]
    if stop == "SIGTERM":
        assert [line for line in a.stderr.lines() if "made when this main next starts on this store" in line]

    again = _again(mains, a)  # PostgreSQL is up: the writes kept by the last run are made
    [line] = _logged(again, KEPT_MADE)
    assert str(_spool(mains, again)) in line
    watcher = windows.open(again, "status", role="controller")
    store_state(watcher, _written)
    rows = _outcomes(mains.url, list(decided["channels"]))
    assert {channel: [outcome] for channel, [(outcome, _window, _machine, _state)] in rows.items()} == \
        {channel: [outcome] for channel, outcome in decided["channels"].items()}
    for [(_outcome, window, machine, _state)] in rows.values():
        assert (window, machine) == (on_a.window, "laptop-a")
    assert rows[published][0][3] == "accept"  # its row in the shared inbox ended as decided (not open, orphaned)
    again.stop()  # a clean stop with nothing kept: the spool file goes
    assert not _spool(mains, again).exists()
    assert len([line for line in again.stderr.lines() if KEPT_MADE in line]) == 1


def test_a_quorum_approval_given_while_away_is_counted_in_the_store_once_it_is_back(
        mains: Mains, windows: Windows, postgres: PostgresServer) -> None:
    a, b = mains.start_all("laptop-a", "build-server")
    loop = HostLoop()
    host = Host(loop, serve_params(a.connection, "--server", "demo"), "Claude Desktop").open()
    try:
        ana, ben = windows.open(a, "ana"), windows.open(b, "ben")
        watcher = windows.open(a, "status", role="controller")
        call = cancel(host, "Q")
        channel = invoke_of(ana)["responseChannel"]
        assert invoke_of(ben)["responseChannel"] == channel
        sockets = threading.Lock()

        def while_down() -> None:
            with sockets:
                store_state(watcher, _unreachable, timeout_s=10.0)
                allow(ana, channel)  # counted on A alone: "1 of 2" in A's windows
                ana.expect(recount(channel, ["ana"]))
                store_state(watcher, lambda store: store.get("waiting", 0) >= 1)

        with kept_attached(*windows.all, sockets=sockets):
            postgres.restart(while_down)
        store_state(watcher, _written)
        with psycopg.connect(mains.url) as conn:
            counted = conn.execute("SELECT person, machine FROM quorum_approvals WHERE channel = %s",
                                   (channel,)).fetchall()
        assert counted == [("ana", "laptop-a")]
        ben.expect(recount(channel, ["ana"]), 15.0)  # B's windows show the count the store now has
        assert not call.done()

        allow(ben, channel)  # the store counts ana (given while away) and ben: the call completes
        assert text_of(call.result(30)) == "cancelled the booking at Q"
        assert dismiss_of(ana, channel)["reason"] == "answered"
        with psycopg.connect(mains.url) as conn:
            [(approvers, window_name)] = conn.execute(
                "SELECT approvers, answer_window_name FROM elicitations WHERE channel = %s", (channel,)).fetchall()
        assert approvers == [{"person": "ana", "machine": "laptop-a"}, {"person": "ben", "machine": "build-server"}]
        assert window_name == "ana, ben" and set(APPROVERS) >= {"ana", "ben"}
    finally:
        host.close()
        loop.close()


def test_a_quorum_decided_while_away_names_every_approver_in_the_audit(
        mains: Mains, windows: Windows, postgres: PostgresServer) -> None:
    [a] = mains.start_all("laptop-a")
    loop = HostLoop()
    host = Host(loop, serve_params(a.connection, "--server", "demo"), "Claude Desktop").open()
    try:
        ana, chen = windows.open(a, "ana"), windows.open(a, "chen")
        watcher = windows.open(a, "status", role="controller")
        call = cancel(host, "R")
        channel = invoke_of(ana)["responseChannel"]
        _in_store(mains.url, channel)
        sockets = threading.Lock()
        result: list[Any] = []

        def while_down() -> None:
            with sockets:
                store_state(watcher, _unreachable, timeout_s=10.0)
                allow(ana, channel)
                chen.expect(recount(channel, ["ana"]))
                allow(chen, channel)  # the second approval decides it on A alone
                result.append(call.result(30))

        with kept_attached(*windows.all, sockets=sockets):
            postgres.restart(while_down)
        assert text_of(result[0]) == "cancelled the booking at R"
        store_state(watcher, _written)
        with psycopg.connect(mains.url) as conn:
            [(outcome, approvers)] = conn.execute("SELECT outcome, approvers FROM elicitations WHERE channel = %s",
                                                  (channel,)).fetchall()
            counted = conn.execute("SELECT person FROM quorum_approvals WHERE channel = %s ORDER BY seq",
                                   (channel,)).fetchall()
        assert outcome == "accept"
        assert approvers == [{"person": "ana", "machine": "laptop-a"}, {"person": "chen", "machine": "laptop-a"}]
        assert counted == [("ana",), ("chen",)]
    finally:
        host.close()
        loop.close()


def test_a_spool_of_garbage_is_one_log_line_naming_it_and_main_serves(mains: Mains, windows: Windows) -> None:
    [a] = mains.start_all("laptop-a")
    a.stop()
    spool = _spool(mains, a)
    spool.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    spool.write_bytes(b"\x00garbage, not a database\n" * 100)

    again = _again(mains, a)
    [line] = _logged(again, "is unreadable")
    assert str(spool) in line and "moved to" in line
    on_a = windows.open(again, "ana")
    caller, call = ask(windows, again, "Le Cinq")
    channel = invoke_of(on_a)["responseChannel"]
    on_a.send(channel, {"action": "decline"})
    assert booked(caller, call) == {"action": "decline", "content": None}
    assert store_state(caller, _written)["reachable"] is True
    assert spool.with_name(spool.name + ".unreadable").exists()
    again.stop()
    assert len([line for line in again.stderr.lines() if "is unreadable" in line]) == 1
