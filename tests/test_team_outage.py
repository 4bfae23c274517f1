"""Nothing lost (issue 35, item 4): mains on one PostgreSQL store ride out a restart of the server
and a main killed mid-answer. No main hangs; `status` says the store is unreachable while it is;
a main decides its own requests from its own windows meanwhile ("store-away") and writes what it
decided once the store is back; every request is answered once, its audit row written once.
Real mains, the demo server, contract-only windows (kit.peer), the session's private PostgreSQL
(tests/kit/postgres.py), restarted here with `pg_ctl -m fast`."""

import json
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from consent_kit import ConsentMain, invoke_of
from kit.peer import WirePeer, kept_attached
from kit.postgres import PostgresServer
from team_kit import DISMISS, INVOKE, Mains, Windows, ask, booked, dismiss_of, store_state, team_on

Team = tuple[Mains, ConsentMain, ConsentMain]
REQUESTS_EACH = 25  # two mains: 50 open requests through the restart


@pytest.fixture(scope="module")
def team(postgres: PostgresServer) -> Iterator[Team]:
    """Main A ("laptop-a") and main B ("build-server") for the module; the test that kills B is last."""
    with team_on(postgres, "laptop-a", "build-server") as (mains, [a, b]):
        yield mains, a, b


@pytest.fixture
def windows() -> Iterator[Windows]:
    opened = Windows()
    yield opened
    opened.close()


def _booking(restaurant: str) -> dict[str, Any]:
    return {"name": f"guest of {restaurant}", "party_size": 2}


def _audit_rows(url: str, channels: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """The store's audit rows of these channels, straight from PostgreSQL: (outcome, window, machine)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT channel, outcome, answer_window, machine FROM elicitations "
                            "WHERE channel = ANY(%s)", (channels,)).fetchall()
    found: dict[str, list[tuple[Any, ...]]] = {}
    for channel, *rest in rows:
        found.setdefault(channel, []).append(tuple(rest))
    return found


def _unreachable(store: dict[str, Any]) -> bool:
    return store["reachable"] is False


def _back_with_both(store: dict[str, Any]) -> bool:
    return store["reachable"] is True and len(store.get("mains", [])) == 2 and not store.get("waiting")


def _cards(window: WirePeer, count: int) -> dict[str, dict[str, Any]]:
    """The next `count` requests the window shows: channel -> invoke."""
    shown = [window.expect_topic(INVOKE) for _ in range(count)]
    return {invoke["responseChannel"]: invoke for invoke in shown}


def test_a_restart_of_postgresql_with_50_requests_open_loses_none_and_answers_each_once(
        team: Team, windows: Windows, postgres: PostgresServer) -> None:
    mains, a, b = team
    on_a, on_b = windows.open(a, "ana"), windows.open(b, "ben")
    callers = {a: windows.open(a, "cli a", role="controller"), b: windows.open(b, "cli b", role="controller")}
    calls: dict[str, tuple[WirePeer, str]] = {}  # restaurant -> (caller, call)
    for main, prefix in ((a, "A"), (b, "B")):
        for n in range(REQUESTS_EACH):
            restaurant = f"{prefix}{n:02d}"
            calls[restaurant] = callers[main], callers[main].call_tool("demo", "book_table", {"restaurant": restaurant})
    seen_a, seen_b = _cards(on_a, 2 * REQUESTS_EACH), _cards(on_b, 2 * REQUESTS_EACH)
    assert seen_a.keys() == seen_b.keys() and len(seen_a) == 2 * REQUESTS_EACH  # every window shows all 50

    shown_while_down: list[str] = []
    sockets = threading.Lock()  # the peers' sockets: the heartbeat thread's, or the test's while it holds this

    def while_down() -> None:
        with sockets:
            for main in (a, b):  # each main notices (its LISTEN connection ends with the server) and says so
                store = store_state(callers[main], _unreachable, timeout_s=10.0)
                assert store["problem"] and postgres.password not in json.dumps(store)
        shown_while_down.extend(a.cli("status").stdout.splitlines())

    with kept_attached(*windows.all, sockets=sockets):
        postgres.restart(while_down)
    [line] = [line for line in shown_while_down if line.startswith("store:")]
    assert ": unreachable (" in line and postgres.password not in line, line

    for main in (a, b):  # back: reachable, both mains on it again (their leases renewed, LISTENing)
        store_state(callers[main], _back_with_both, timeout_s=15.0)
    for window in (on_a, on_b):  # no card left a window through the restart
        assert not [body for topic, body in window.received if topic == DISMISS]
    for main in (a, b):  # and a window that attaches again now is shown all 50
        again = main.peer(name="attached again", hello=False)
        assert {invoke["responseChannel"] for invoke in again.hello()["pending"]} == seen_a.keys()
        again.close()

    by_restaurant = {invoke["request"]["params"]["message"].removeprefix("Book a table at ").removesuffix("?"): channel
                     for channel, invoke in seen_a.items()}
    for n, (restaurant, channel) in enumerate(sorted(by_restaurant.items())):
        window = on_a if n % 2 else on_b  # half by a window of the main that asked, half by the other's
        window.send(channel, {"action": "accept", "content": _booking(restaurant)})
    for restaurant, (caller, call) in calls.items():
        assert booked(caller, call) == {"action": "accept", "content": _booking(restaurant)}
    for window in (on_a, on_b):
        for channel in by_restaurant.values():
            dismiss_of(window, channel)

    rows = _audit_rows(mains.url, list(by_restaurant.values()))
    assert sorted(len(found) for found in rows.values()) == [1] * 2 * REQUESTS_EACH, rows
    for n, (restaurant, channel) in enumerate(sorted(by_restaurant.items())):
        [(outcome, window_id, machine)] = rows[channel]
        assert (outcome, window_id) == ("accept", (on_a if n % 2 else on_b).window)
        assert machine == ("laptop-a" if restaurant.startswith("A") else "build-server")
    replies = {call for _caller, call in calls.values()}
    for caller in callers.values():  # each call answered once (a server answered twice would reply twice)
        caller.receive()
        answers = [topic for topic, body in caller.received if topic in replies and "result" in body]
        assert len(answers) == len(set(answers)) == REQUESTS_EACH
    for window in (on_a, on_b):  # and dismissed once in each window
        window.receive()
        dismissed = [body["responseChannel"] for topic, body in window.received if topic == DISMISS]
        assert sorted(dismissed) == sorted(by_restaurant.values())


def test_store_away_a_mains_own_window_answers_and_the_audit_row_is_written_once_it_is_back(
        team: Team, windows: Windows, postgres: PostgresServer) -> None:
    mains, a, b = team
    on_a, on_b = windows.open(a, "ana"), windows.open(b, "ben")
    caller, before = ask(windows, a, "Septime")
    published = invoke_of(on_a)["responseChannel"]
    assert invoke_of(on_b)["responseChannel"] == published  # B shows it: A published it
    answered: dict[str, Any] = {}
    sockets = threading.Lock()

    def while_down() -> None:
        with sockets:
            answer_while_down()

    def answer_while_down() -> None:
        store_state(caller, _unreachable, timeout_s=10.0)
        during = caller.call_tool("demo", "book_table", {"restaurant": "Frenchie"})
        opened = invoke_of(on_a)["responseChannel"]  # a request opened while away: A's windows only
        for channel, restaurant in ((published, "Septime"), (opened, "Frenchie")):
            on_a.send(channel, {"action": "accept", "content": _booking(restaurant)})
        answered["before"] = booked(caller, before)  # A's server has its answers while the store is down
        answered["during"] = booked(caller, during)
        answered["waiting"] = store_state(caller, lambda store: store.get("waiting", 0) > 0)["waiting"]
        answered["channels"] = [published, opened]
        answered["later"] = caller.call_tool("demo", "book_table", {"restaurant": "Le Cinq"})
        answered["left open"] = invoke_of(on_a)["responseChannel"]  # left open through the outage

    with kept_attached(*windows.all, sockets=sockets):
        postgres.restart(while_down)
    assert answered["before"] == {"action": "accept", "content": _booking("Septime")}
    assert answered["during"] == {"action": "accept", "content": _booking("Frenchie")}
    assert answered["waiting"] >= 2  # the two outcomes at least, kept

    store_state(caller, _back_with_both, timeout_s=15.0)  # written: nothing waits any more
    dismiss_of(on_b, published)  # B's copy leaves its window once A wrote how it ended
    left_open = invoke_of(on_b)  # the request opened while away and still open: B shows it now
    assert left_open["responseChannel"] == answered["left open"] and left_open["machine"] == "laptop-a"
    on_b.send(left_open["responseChannel"], {"action": "decline"})
    assert booked(caller, answered["later"]) == {"action": "decline", "content": None}
    rows = _audit_rows(mains.url, answered["channels"])
    assert {channel: [(outcome, window)] for channel, [(outcome, window, _machine)] in rows.items()} == \
        {channel: [("accept", on_a.window)] for channel in answered["channels"]}


def test_a_cut_connection_is_noticed_and_mended_and_the_answer_given_meanwhile_is_written_once(
        team: Team, windows: Windows, postgres: PostgresServer) -> None:
    mains, a, b = team
    on_a, on_b = windows.open(a, "ana"), windows.open(b, "ben")
    caller, call = ask(windows, a, "Mirazur")
    channel = invoke_of(on_a)["responseChannel"]
    assert invoke_of(on_b)["responseChannel"] == channel
    database = mains.url.rsplit("/", 1)[1]
    postgres.admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "  # every main's connections
                   f"WHERE datname = '{database}' AND application_name = 'elicitron'")
    on_a.send(channel, {"action": "accept", "content": _booking("Mirazur")})  # whether A noticed yet or not
    assert booked(caller, call) == {"action": "accept", "content": _booking("Mirazur")}
    dismiss_of(on_b, channel)  # B's copy leaves (A wrote how it ended, or B took A for gone meanwhile)

    for main in (a, b):
        store_state(caller if main is a else on_b, _back_with_both, timeout_s=15.0)
    assert _audit_rows(mains.url, [channel]) == {channel: [("accept", on_a.window, "laptop-a")]}
    caller, call = ask(windows, a, "Arpège")  # the pools work again: a claim from B's window decides it
    channel = invoke_of(on_b)["responseChannel"]
    on_b.send(channel, {"action": "decline"})
    assert booked(caller, call) == {"action": "decline", "content": None}


def test_a_main_killed_right_after_its_window_answered_another_mains_request_the_answer_still_arrives(
        team: Team, windows: Windows) -> None:
    """Last in the module: main B does not come back."""
    _mains, a, b = team
    on_a, on_b = windows.open(a, "ana"), windows.open(b, "ben")
    caller, call = ask(windows, a, "Le Chateaubriand")
    channel = invoke_of(on_b)["responseChannel"]
    assert invoke_of(on_a)["responseChannel"] == channel
    on_b.send(channel, {"action": "accept", "content": _booking("Le Chateaubriand")})
    assert dismiss_of(on_b, channel)["by"] == on_b.window  # B decided it in the store
    os.kill(b.pid, signal.SIGKILL)
    assert booked(caller, call) == {"action": "accept", "content": _booking("Le Chateaubriand")}
    assert dismiss_of(on_a, channel)["by"] == on_b.window
