"""The store interface's contract (main_process/store/interface.py), for every backend: what main
relies on when it remembers a rule or audits a decision. In-process, plain values; a new backend
adds itself to BACKENDS and passes these unchanged. PostgreSQL runs on the session's private
server (tests/kit/postgres.py), a fresh database per test; it is `slow` (it starts that server)."""

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from main_process.config import parse_config
from main_process.consent import grants
from main_process.consent.rules import Rule
from main_process.store.factory import check_store_url, open_store
from main_process.store.interface import Store
from main_process.store.records import Decided, OutcomeRecord
from shared import channels
from shared.errors import ConfigError
from shared.messages import DeviceRef, ElicitationInvoke, ElicitationRequest, ElicitationResult

FORM: dict[str, Any] = {"mode": "form", "message": "Who are you?",
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}

StoreMaker = Callable[..., Store]  # (record_values=False) -> a store at this test's one location


def sqlite_store(place: Path) -> StoreMaker:
    return lambda record_values=False: open_store(None, audit_path=place / "audit.sqlite3",
                                                  record_values=record_values)


def postgres_store(request: pytest.FixtureRequest) -> StoreMaker:
    url = request.getfixturevalue("pg_url")
    return lambda record_values=False: open_store(url, record_values=record_values, machine="contract-machine")


BACKENDS: dict[str, Callable[[pytest.FixtureRequest], StoreMaker]] = {
    "sqlite": lambda request: sqlite_store(request.getfixturevalue("tmp_path")),
    "postgresql": postgres_store,
}


@pytest.fixture(params=[pytest.param(name, marks=[pytest.mark.slow] if name != "sqlite" else [])
                        for name in sorted(BACKENDS)])
def make_store(request: pytest.FixtureRequest) -> StoreMaker:
    return BACKENDS[request.param](request)


def run[T](make: StoreMaker, use: Callable[[Store], Awaitable[T]], **options: Any) -> T:
    async def scenario() -> T:
        store = make(**options)
        try:
            return await use(store)
        finally:
            await store.close()

    return asyncio.run(scenario())


def rule(rule_id: str, created_at: int = 1, **what: Any) -> Rule:
    decides = what or {"tool": "echo", "decision": "allow"}
    return Rule(id=rule_id, source="user", server="demo", created_at=created_at, created_by="window w", **decides)


def invoke(server: str = "demo", created_at: int = 1_700_000_000_000, **extra: Any) -> ElicitationInvoke:
    return ElicitationInvoke(request=ElicitationRequest(server=server, params=FORM),
                             response_channel=channels.new_result_channel(), created_at=created_at,
                             expires_at=created_at + 600_000, origin="window-origin", **extra)


# ---- remembered rules and approvals ----------------------------------------------------------


def test_a_rule_added_is_loaded_again_by_the_next_store_and_a_removed_one_is_not(make_store: StoreMaker) -> None:
    answer = rule("r-answer", created_at=2, question="k", message="Who?", fields=("name",), scope="until",
                  expires_at=50_000, answer=ElicitationResult(action="accept", content={"name": "Ada"}))

    async def write(store: Store) -> None:
        assert await store.rules.add(rule("r-tool")) is True
        assert await store.rules.add(answer) is True
        assert await store.rules.add(rule("r-gone", created_at=3, tool="x", decision="deny", scope="until",
                                          expires_at=10)) is True

    run(make_store, write)
    assert run(make_store, lambda store: store.rules.load(now_ms=5_000)) == [rule("r-tool"), answer]  # r-gone expired

    async def remove(store: Store) -> list[Rule]:
        assert await store.rules.remove(["r-tool", "never-was"]) is True
        assert await store.rules.add(rule("r-answer", created_at=2, tool="echo", decision="deny")) is True  # replaced
        return await store.rules.load(now_ms=5_000)

    assert run(make_store, remove) == [rule("r-answer", created_at=2, tool="echo", decision="deny")]


def test_grants_are_loaded_again_with_what_they_cover(make_store: StoreMaker) -> None:
    grants_made = [rule("r-exact", coverage=grants.exact({"path": "/a", "n": 1}), tool="read", decision="allow"),
                   rule("r-like", coverage=grants.pattern_of({"path": "/tmp/*"}, {"path": "/tmp/x"}), tool="read",
                        decision="allow", single_use=True, scope="until", expires_at=9_000)]

    async def write_and_load(store: Store) -> list[Rule]:
        for made in grants_made:
            assert await store.rules.add(made) is True
        return await store.rules.load(now_ms=5_000)

    run(make_store, write_and_load)
    assert run(make_store, lambda store: store.rules.load(now_ms=5_000)) == grants_made


def test_a_single_use_grant_is_taken_from_the_store_once_whichever_store_takes_it(make_store: StoreMaker) -> None:
    once = rule("r-once", tool="read", decision="allow", single_use=True)

    async def take_twice(store: Store) -> list[bool | None]:
        assert await store.rules.add(once) is True
        other = make_store()  # another main's connection to the same store
        try:
            return [await other.rules.take("r-once"), await store.rules.take("r-once")]
        finally:
            await other.close()

    assert run(make_store, take_twice) == [True, False]
    assert run(make_store, lambda store: store.rules.load(now_ms=5_000)) == []


def test_only_rules_that_outlive_main_are_stored(make_store: StoreMaker) -> None:
    async def add_session_rule(store: Store) -> None:
        with pytest.raises(ValueError):
            await store.rules.add(rule("r-s", scope="session"))

    run(make_store, add_session_rule)


# ---- the audit log ----------------------------------------------------------------------------


def test_the_first_outcome_wins_and_is_committed_once_record_outcome_returns(make_store: StoreMaker) -> None:
    asked = invoke()
    channel = asked.response_channel

    async def decide(store: Store) -> None:
        assert await store.audit.record_requests([asked]) is True
        first = OutcomeRecord(channel, "accept", window="w-1", content={"name": "Ada"}, window_name="Laptop",
                              device=DeviceRef(id="d1", name="phone"))
        assert await store.audit.record_outcome(first) is True
        reader = make_store()  # another process's view: what is committed, and only that
        try:
            [entry] = await reader.audit.entries()
        finally:
            await reader.close()
        assert (entry.outcome, entry.window, entry.window_name, entry.device, entry.device_id) == (
            "accept", "w-1", "Laptop", "phone", "d1")
        assert entry.content is None  # values only with record_values
        assert await store.audit.record_outcome(OutcomeRecord(channel, "decline", window="w-2")) is False
        assert await store.audit.record_requests([asked]) is True  # a repeated request keeps its outcome

    run(make_store, decide)
    [entry] = run(make_store, lambda store: store.audit.entries())
    assert (entry.outcome, entry.window, entry.message, entry.fields) == ("accept", "w-1", "Who are you?", ["name"])
    assert run(make_store, lambda store: store.audit.counts()) == {"accept": 1}


def test_an_outcome_with_its_request_is_one_row_and_an_outcome_alone_is_still_kept(make_store: StoreMaker) -> None:
    quick = invoke(server="quick")

    async def decide(store: Store) -> None:
        assert await store.audit.record_outcome(OutcomeRecord(quick.response_channel, "decline", window="w"),
                                                request=quick) is True
        assert await store.audit.record_outcome(OutcomeRecord("no-request-row", "expired")) is True

    run(make_store, decide)
    rows = {entry.channel: entry for entry in run(make_store, lambda store: store.audit.entries())}
    assert (rows[quick.response_channel].server, rows[quick.response_channel].outcome) == ("quick", "decline")
    assert (rows["no-request-row"].server, rows["no-request-row"].outcome) == ("", "expired")


def test_rows_decided_by_a_rule_and_values_only_when_recorded(make_store: StoreMaker) -> None:
    waiting, allowed = invoke(created_at=1), invoke(created_at=2)
    decided = Decided(allowed, "accept", 3, content={"name": "Bo"}, rule_id="r-1", decision="allow-always")

    async def write(store: Store) -> None:
        assert store.audit.record_values
        assert await store.audit.record_requests([waiting], [decided]) is True
        assert await store.audit.record_outcome(OutcomeRecord(waiting.response_channel, "accept",
                                                              content={"name": "Ada"})) is True

    run(make_store, write, record_values=True)
    rows = {entry.channel: entry for entry in run(make_store, lambda store: store.audit.entries())}
    assert (rows[allowed.response_channel].rule_id, rows[allowed.response_channel].decision,
            rows[allowed.response_channel].content) == ("r-1", "allow-always", {"name": "Bo"})
    assert rows[waiting.response_channel].content == {"name": "Ada"}


def test_entries_are_newest_first_with_a_limit_and_a_server(make_store: StoreMaker) -> None:
    rows = [invoke(server="a", created_at=1), invoke(server="b", created_at=2), invoke(server="a", created_at=3)]

    async def read(store: Store) -> list[list[int]]:
        assert await store.audit.record_requests(rows) is True
        return [[e.created_at for e in await store.audit.entries(**query)]
                for query in ({}, {"limit": 2}, {"server": "a"})]

    assert run(make_store, read) == [[3, 2, 1], [3, 2], [3, 1]]
    assert run(make_store, lambda store: store.audit.counts()) == {"pending": 3}
    assert run(make_store, lambda store: store.audit.checkpoint()) is True


# ---- the files of releases before the interface -----------------------------------------------


def test_an_existing_sqlite_store_of_todays_schema_is_read_through_the_interface(tmp_path: Path) -> None:
    """Files as every release before the store interface wrote them (rules schema 2, audit schema
    5), made here with their own SQL: a user's rules and audit rows load unchanged."""
    with sqlite3.connect(tmp_path / "rules.sqlite3") as conn:
        conn.execute("CREATE TABLE rules (id TEXT PRIMARY KEY, server TEXT NOT NULL, tool TEXT, decision TEXT, "
                     "question TEXT, message TEXT, fields TEXT, action TEXT, content TEXT, scope TEXT NOT NULL, "
                     "expires_at INTEGER, created_at INTEGER NOT NULL, created_by TEXT NOT NULL, party TEXT, "
                     "identity TEXT)")
        conn.execute("INSERT INTO rules VALUES ('r-1', 'demo', NULL, NULL, 'k', 'Who?', '[\"name\"]', 'accept', "
                     "'{\"name\":\"Ada\"}', 'always', NULL, 7, 'Laptop (w-1)', 'server', 'prog')")
        conn.execute("PRAGMA user_version = 2")
    with sqlite3.connect(tmp_path / "audit.sqlite3") as conn:
        conn.execute("CREATE TABLE elicitations (channel TEXT PRIMARY KEY, server TEXT NOT NULL, mode TEXT NOT NULL, "
                     "message TEXT NOT NULL, fields TEXT, url TEXT, origin_window TEXT, created_at INTEGER NOT NULL, "
                     "expires_at INTEGER, outcome TEXT, answer_window TEXT, decided_at INTEGER, content TEXT, "
                     "kind TEXT, via TEXT, tool TEXT, rule_id TEXT, arguments TEXT, decision TEXT, "
                     "answer_window_name TEXT, answer_device TEXT, answer_device_id TEXT)")
        conn.execute("INSERT INTO elicitations (channel, server, mode, message, fields, created_at, outcome, "
                     "answer_window, decided_at, answer_window_name) VALUES ('c-old', 'demo', 'form', 'Who?', "
                     "'[\"name\"]', 5, 'accept', 'w-1', 6, 'Laptop')")
        conn.execute("PRAGMA user_version = 5")

    async def read(store: Store) -> None:
        [remembered] = await store.rules.load(now_ms=10)
        assert (remembered.id, remembered.question, remembered.identity, remembered.created_by) == (
            "r-1", "k", "prog", "Laptop (w-1)")
        assert remembered.answer == ElicitationResult(action="accept", content={"name": "Ada"})
        [old] = await store.audit.entries()
        assert (old.channel, old.outcome, old.window_name, old.fields) == ("c-old", "accept", "Laptop", ["name"])
        new = invoke(created_at=9)
        assert await store.audit.record_outcome(OutcomeRecord(new.response_channel, "decline"), request=new)
        assert await store.audit.counts() == {"accept": 1, "decline": 1}

    run(sqlite_store(tmp_path), read)


# ---- choosing the backend ---------------------------------------------------------------------


def test_the_config_names_the_store_and_an_unknown_one_is_refused_saying_what_is_supported() -> None:
    servers: dict[str, Any] = {"mcpServers": {}}
    assert parse_config(servers, "mcp.json").store is None
    assert parse_config({**servers, "elicitron": {"store": "sqlite:"}}, "mcp.json").store == "sqlite:"
    shared = parse_config({**servers, "elicitron": {"store": "postgresql://ana@db/elicitron", "machine": "ci-7"}},
                          "mcp.json")
    assert (shared.store, shared.machine) == ("postgresql://ana@db/elicitron", "ci-7")
    with pytest.raises(ConfigError) as unknown:
        parse_config({**servers, "elicitron": {"store": "mysql://ana:hunter2@db/elicitron"}}, "mcp.json")
    message = str(unknown.value)
    assert message.startswith("mcp.json: elicitron.store: unsupported URL scheme 'mysql'")
    assert '"sqlite:"' in message and "postgresql://" in message and "hunter2" not in message
    with pytest.raises(ConfigError, match="elicitron.machine must be a name"):
        parse_config({**servers, "elicitron": {"machine": "two\nlines"}}, "mcp.json")
    with pytest.raises(ConfigError, match="default place only"):
        check_store_url("sqlite:///elsewhere")
    with pytest.raises(ConfigError, match="must be a URL"):
        parse_config({**servers, "elicitron": {"store": 5}}, "mcp.json")
