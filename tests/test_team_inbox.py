"""Many mains, one inbox (issue 35, item 2): mains on one PostgreSQL store, each in a home, config
and runtime dir of its own, show every main's open requests in all their windows; the first valid
answer anywhere wins, the server of the main that holds the request gets it, every other window
gets its dismiss, and the audit row names the approver and both machines. Real mains, the demo
server, contract-only windows (kit.peer), the session's private PostgreSQL (tests/kit/postgres.py)."""

import json
import os
import signal
import time
from collections.abc import Iterator

import psycopg
import pytest
from consent_kit import ConsentMain, invoke_of
from kit.postgres import PostgresServer
from team_kit import BOOKING, Mains, Windows, ask, audit_rows, booked, dismiss_of, team_on

Team = tuple[Mains, ConsentMain, ConsentMain]


@pytest.fixture(scope="module")
def team(postgres: PostgresServer) -> Iterator[Team]:
    """Two mains on one store for the whole module (starting two mains is most of a test's time):
    main A on machine "laptop-a", main B on "build-server". Each test leaves nothing open; the
    test that kills A comes last."""
    with team_on(postgres, "laptop-a", "build-server") as (mains, [a, b]):
        yield mains, a, b


@pytest.fixture
def windows() -> Iterator[Windows]:
    opened = Windows()
    yield opened
    opened.close()


def test_a_window_on_another_main_answers_and_the_server_of_the_main_that_asked_gets_it(team: Team, windows: Windows) -> None:
    mains, a, b = team
    on_a, on_b = windows.open(a, "window on a"), windows.open(b, "ana's window", user="ana")
    caller, call = ask(windows, a, "Noma")

    mine, theirs = invoke_of(on_a), invoke_of(on_b)
    assert theirs["responseChannel"] == mine["responseChannel"]
    assert theirs["request"] == mine["request"]  # the same v1 invoke, a machine label more
    assert (theirs.get("machine"), mine.get("machine")) == ("laptop-a", None)

    channel = theirs["responseChannel"]
    on_b.send(channel, {"action": "accept", "content": BOOKING})
    assert booked(caller, call) == {"action": "accept", "content": BOOKING}
    for window in (on_a, on_b):
        dismissed = dismiss_of(window, channel)
        assert (dismissed["reason"], dismissed["by"]) == ("answered", on_b.window)

    [row] = [row for row in audit_rows(b, mains.url, 1) if row["channel"] == channel]
    assert (row["outcome"], row["windowName"], row["answerUser"], row["machine"], row["answerMachine"]) == \
        ("accept", "ana's window", "ana", "laptop-a", "build-server")
    table = a.cli("audit").stdout.splitlines()
    assert [line for line in table if "ana's window on build-server" in line and line.split()[2] == "laptop-a"]


def test_a_request_answered_on_its_own_main_leaves_the_windows_of_the_other_main(team: Team,
                                                                                 windows: Windows) -> None:
    """B learns how A's request ended from the notification itself (no read): its window's card goes,
    answered by A's window."""
    _mains, a, b = team
    on_a, on_b = windows.open(a, "ana"), windows.open(b, "ben")
    caller, call = ask(windows, a, "Noma")
    channel = invoke_of(on_b)["responseChannel"]
    assert invoke_of(on_a)["responseChannel"] == channel

    on_a.send(channel, {"action": "accept", "content": BOOKING})
    assert booked(caller, call) == {"action": "accept", "content": BOOKING}
    dismissed = dismiss_of(on_b, channel)
    assert (dismissed["reason"], dismissed["by"]) == ("answered", on_a.window)


def test_an_answers_values_leave_the_shared_table_once_the_main_that_asked_handed_them_on(
        team: Team, windows: Windows) -> None:
    """The values a window on B typed for A's request are in the store only until A's server has
    them: A clears them with its next heartbeat (one statement a beat for all it handed on)."""
    mains, a, b = team
    on_b = windows.open(b, "ben")
    caller, call = ask(windows, a, "Noma")
    channel = invoke_of(on_b)["responseChannel"]
    on_b.send(channel, {"action": "accept", "content": BOOKING})
    assert booked(caller, call) == {"action": "accept", "content": BOOKING}

    deadline = time.monotonic() + 10.0
    with psycopg.connect(mains.url, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT state, action, answer FROM open_requests WHERE channel = %s",
                               (channel,)).fetchone()
            if row == ("answered", "accept", None):
                break
            left = deadline - time.monotonic()
            assert left > 0, f"the answer's values stayed in the store: {row}"
            a.stderr.wait_change(a.stderr.size, min(left, 0.1))  # main logs as it works; look again at least every 0.1 s


def test_an_answer_too_large_for_a_notification_still_reaches_the_server_of_the_main_that_asked(
        team: Team, windows: Windows) -> None:
    """The winning claim tells A the values in its notification, but NOTIFY takes under 8,000 bytes:
    an answer larger than that is told without them, and A reads them from its row."""
    _mains, a, b = team
    on_b = windows.open(b, "ben")
    caller = windows.open(a, "cli", role="controller")
    schema = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
    call = caller.call_tool("demo", "ask", {"message": "Leave a long note", "schema": schema})
    channel = invoke_of(on_b)["responseChannel"]
    note = "n" * 20_000
    on_b.send(channel, {"action": "accept", "content": {"note": note}})
    assert booked(caller, call) == {"action": "accept", "content": {"note": note}}
    assert dismiss_of(on_b, channel)["reason"] == "answered"


def test_a_request_too_large_to_tell_in_a_notification_still_shows_on_the_other_main(
        team: Team, windows: Windows) -> None:
    """Another main's new request is told with its invoke body, unless that is over 5,000 bytes:
    then B reads it from the table, and shows it all the same."""
    _mains, a, b = team
    on_b = windows.open(b, "ben")
    caller = windows.open(a, "cli", role="controller")
    call = caller.call_tool("demo", "ask", {"message": "Read this. ", "repeat": 1_000, "schema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}}})
    shown = invoke_of(on_b)
    assert shown["request"]["params"]["message"] == "Read this. " * 1_000
    on_b.send(shown["responseChannel"], {"action": "accept", "content": {"ok": True}})
    assert booked(caller, call) == {"action": "accept", "content": {"ok": True}}


def test_a_requests_audit_row_is_in_the_store_by_the_time_another_main_shows_it(team: Team,
                                                                                windows: Windows) -> None:
    """A's publish writes the request's audit row in the same statement (one round trip, and the
    audit writer writes no second one): once B's window has the request, `elicitron audit` on any
    machine shows it pending; the answer then decides that same row."""
    mains, a, b = team
    on_b = windows.open(b, "ben")
    caller, call = ask(windows, a, "Septime")
    channel = invoke_of(on_b)["responseChannel"]
    with psycopg.connect(mains.url, autocommit=True) as conn:
        row = conn.execute("SELECT server, message, machine, outcome FROM elicitations WHERE channel = %s",
                           (channel,)).fetchone()
        assert row == ("demo", "Book a table at Septime?", "laptop-a", None)
        on_b.send(channel, {"action": "accept", "content": BOOKING})
        assert booked(caller, call) == {"action": "accept", "content": BOOKING}
        row = conn.execute("SELECT server, machine, outcome, answer_machine FROM elicitations WHERE channel = %s",
                           (channel,)).fetchone()
        assert row == ("demo", "laptop-a", "accept", "build-server")


def test_two_windows_on_two_mains_answer_at_once_and_exactly_one_wins(team: Team, windows: Windows) -> None:
    mains, a, b = team
    on_a, on_b = windows.open(a, "ana"), windows.open(b, "ben")
    caller, call = ask(windows, a, "Noma")
    channel = invoke_of(on_a)["responseChannel"]
    assert invoke_of(on_b)["responseChannel"] == channel

    answers = {on_a.window: {**BOOKING, "name": "Ana"}, on_b.window: {**BOOKING, "name": "Ben"}}
    on_a.send(channel, {"action": "accept", "content": answers[on_a.window]})
    on_b.send(channel, {"action": "accept", "content": answers[on_b.window]})

    got = booked(caller, call)
    [winner] = [window for window, content in answers.items() if got == {"action": "accept", "content": content}]
    loser = on_b if winner == on_a.window else on_a
    for window in (on_a, on_b):
        assert dismiss_of(window, channel)["by"] == winner
    refused = loser.expect_error(channel)
    assert refused["code"] == "already-answered"
    [row] = [row for row in audit_rows(a, mains.url, 1) if row["channel"] == channel]
    assert row["window"] == winner


def test_a_rule_remembered_on_one_main_applies_on_another_and_a_revoke_anywhere_asks_again(team: Team,
                                                                                            windows: Windows) -> None:
    _mains, a, b = team
    on_a, on_b = windows.open(a, "ana"), windows.open(b, "ben")
    caller_b, call = ask(windows, b, "Noma")
    invoke = invoke_of(on_b)
    assert invoke_of(on_a)["responseChannel"] == invoke["responseChannel"]  # shown on A too
    on_b.send(invoke["responseChannel"], {"action": "accept", "content": BOOKING, "remember": {"scope": "always"}})
    assert booked(caller_b, call) == {"action": "accept", "content": BOOKING}
    dismiss_of(on_a, invoke["responseChannel"])
    # A's windows list the rule once A has it: what a person on A sees before A's next request.
    rule = on_a.expect(lambda t, body: t == "rules" and len(body["rules"]) == 1)[1]["rules"][0]

    caller_a, call = ask(windows, a, "Noma")
    assert booked(caller_a, call) == {"action": "accept", "content": BOOKING}  # no window asked

    revoked = a.cli("rules", "revoke", rule["id"])
    assert revoked.returncode == 0, revoked.stderr
    on_b.expect(lambda t, body: t == "rules" and not [r for r in body["rules"] if r["id"] == rule["id"]])
    caller_b, call = ask(windows, b, "Noma")
    again = invoke_of(on_b)
    assert again["request"]["params"]["message"] == invoke["request"]["params"]["message"]
    on_b.send(again["responseChannel"], {"action": "decline"})
    assert booked(caller_b, call) == {"action": "decline", "content": None}
    assert json.loads(b.cli("rules", "--json").stdout) == []


def test_a_main_killed_while_another_mains_window_shows_its_request_is_dismissed_there(team: Team,
                                                                                      windows: Windows) -> None:
    """Last in the module: main A does not come back."""
    _mains, a, b = team
    on_b = windows.open(b, "ben")
    ask(windows, a, "Noma")
    channel = invoke_of(on_b)["responseChannel"]

    os.kill(a.pid, signal.SIGKILL)
    assert dismiss_of(on_b, channel)["reason"] == "server-closed"

    # B and its windows carry on: its own server's request reaches its window and is answered.
    caller, call = ask(windows, b, "Septime")
    invoke = invoke_of(on_b)
    assert invoke.get("machine") is None
    on_b.send(invoke["responseChannel"], {"action": "decline"})
    assert booked(caller, call) == {"action": "decline", "content": None}
