"""`elicitron main --store postgresql://…` as a user runs it: a real main, the demo server, a
contract-only window, the CLI, and the session's private PostgreSQL server (tests/kit/postgres.py).
What main remembers and audits is in the database, not in its home: a main started afresh, in
another home, under another machine name, answers from the rule the first one stored."""

import json
from collections.abc import Iterator

import pytest
from consent_kit import invoke_of
from kit.postgres import PostgresServer
from team_kit import BOOKING, Mains, audit_rows, booked

from main_process.store.url import redact


@pytest.fixture
def mains(pg_url: str) -> Iterator[Mains]:
    started = Mains(pg_url)
    yield started
    started.close()


def test_a_rule_remembered_on_postgresql_outlives_main_and_the_audit_names_each_machine(
        mains: Mains, postgres: PostgresServer) -> None:
    first = mains.start("laptop-a")
    status = first.cli("status")
    assert status.returncode == 0, status.stderr
    assert f"store: PostgreSQL {redact(mains.url)} (machine laptop-a): reachable" in status.stdout.splitlines()
    assert postgres.password not in status.stdout + first.stderr.tail()
    assert json.loads(first.cli("status", "--json").stdout)["store"]["reachable"] is True

    window = first.peer(name="remembering window")
    caller = first.peer(name="cli", role="controller")
    call = caller.call_tool("demo", "book_table", {"restaurant": "Noma"})
    invoke = invoke_of(window)
    window.send(invoke["responseChannel"], {"action": "accept", "content": BOOKING, "remember": {"scope": "always"}})
    assert booked(caller, call) == {"action": "accept", "content": BOOKING}
    [rule] = window.expect_topic("rules")["rules"]
    first.stop()

    # No main now: the shared store's rules are listed, but revoked only through a main (others
    # may share the store and hold the rule in memory).
    offline = first.cli("rules", "--json", "--store", mains.url)
    assert offline.returncode == 0, offline.stderr
    assert [r["id"] for r in json.loads(offline.stdout)] == [rule["id"]]
    refused = first.cli("rules", "revoke", rule["id"], "--store", mains.url)
    assert refused.returncode == 1 and "revoke through a running main" in refused.stderr
    assert postgres.password not in offline.stderr + refused.stderr

    second = mains.start("build-server")  # another home: nothing of the first main's on its disk
    caller = second.peer(name="cli", role="controller")  # and no window attached
    again = caller.call_tool("demo", "book_table", {"restaurant": "Noma"})
    assert booked(caller, again) == {"action": "accept", "content": BOOKING}

    rows = audit_rows(second, mains.url, 2)
    by_machine = {row["machine"]: row for row in rows}
    assert by_machine["laptop-a"]["windowName"] == "remembering window"
    assert (by_machine["build-server"]["ruleId"], by_machine["build-server"]["outcome"]) == (rule["id"], "accept")
    table = second.cli_plain("audit", "--store", mains.url)
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split()[:3] == ["CREATED", "MACHINE", "SERVER"]
    assert [line.split()[2] for line in lines] == ["build-server", "laptop-a"]  # newest first
    assert f"rule {rule['id']}" in lines[0] and "remembering window" in lines[1]
