"""The consent layer's pure parts and its store: what "the same question" is, which rule applies,
what the config accepts, which host calls are asked, and what the store keeps."""

import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from main_process.config import StdioServerConfig, parse_config
from main_process.consent.approvals import decision_of, policy_for
from main_process.consent.rules import Rule, RuleBook, question_key
from main_process.store.records import AuditEntry
from main_process.store.sqlite_rules import SqliteRuleStore
from shared import tool_hints
from shared.elicit_params import ElicitParams, read_params
from shared.errors import ConfigError, RuleStoreError, UndeliverableRequestError
from shared.messages import ElicitationResult

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string", "default": "Ada"},
                                                          "n": {"type": "integer", "minimum": 1}},
                          "required": ["name"]}


def form(message: str, schema: dict[str, Any] = SCHEMA, **extra: Any) -> ElicitParams:
    return read_params({"mode": "form", "message": message, "requestedSchema": schema, **extra})


def user_rule(rule_id: str, server: str = "demo", **what: Any) -> Rule:
    return Rule(id=rule_id, source="user", server=server, created_at=1, created_by="w", **what)


# ---- the same question -----------------------------------------------------------------


def test_the_same_question_ignores_key_order_whitespace_defaults_and_request_ids() -> None:
    key = question_key(form("Book a table?"))
    reordered = {"required": ["name"], "type": "object",
                 "properties": {"n": {"minimum": 1, "type": "integer"}, "name": {"type": "string", "default": "Bo"}}}
    assert question_key(form("  Book a\ttable?\n", reordered, _meta={"requestId": "42"})) == key
    assert question_key(read_params({"message": "Book a table?", "requestedSchema": SCHEMA})) == key  # mode defaults


@pytest.mark.parametrize("other", [
    form("Book a table!"),
    form("Book a table?", {**SCHEMA, "required": []}),
    form("Book a table?", {**SCHEMA, "properties": {**SCHEMA["properties"], "n": {"type": "integer", "minimum": 2}}}),
    form("Book a table?", {**SCHEMA, "properties": {"name": {"type": "string", "title": "Your name"},
                                                    "n": SCHEMA["properties"]["n"]}}),
])
def test_another_message_or_schema_is_another_question(other: ElicitParams) -> None:
    assert question_key(other) != question_key(form("Book a table?"))


def test_url_mode_and_sign_in_requests_have_no_question_key() -> None:
    assert question_key(read_params({"mode": "url", "message": "Sign in", "url": "https://x.test",
                                     "elicitationId": "e"})) is None
    with pytest.raises(UndeliverableRequestError, match="neither 'form' nor 'url'"):  # refused before any rule
        read_params({"mode": "something-new", "message": "?", "requestedSchema": SCHEMA})


# ---- which rule applies -------------------------------------------------------------------


def test_config_rules_come_first_in_file_order_then_the_remembered_one() -> None:
    config = parse_config({"mcpServers": {}, "elicitron": {"rules": [
        {"server": "demo", "message": "Book*", "answer": {"action": "decline"}},
        {"server": "demo", "answer": {"action": "accept", "content": {"name": "Cy"}}},
        {"server": "files", "tool": "read_*", "decision": "allow"},
        {"server": "files", "tool": "*", "decision": "deny"},
    ]}}, "test.json")
    book = RuleBook()
    book.set_config(config.rules)
    remembered = user_rule("r-1", question=question_key(form("Book a table?")),
                           answer=ElicitationResult(action="accept", content={"name": "Di"}))
    book.add(remembered)
    assert [r.id for r in book.answer_candidates("demo", form("Book a table?"))] == ["config-1", "config-2", "r-1"]
    assert [r.id for r in book.answer_candidates("demo", form("Other?"))] == ["config-2"]
    assert book.answer_candidates("other-server", form("Book a table?")) == []
    assert book.tool_rule("files", "read_file").id == "config-3"  # type: ignore[union-attr]
    assert book.tool_rule("files", "write_file").id == "config-4"  # type: ignore[union-attr]
    assert book.tool_rule("demo", "read_file") is None
    assert not book.has_tool_rules("demo") and book.has_answer_rules("demo")


def test_a_new_rule_for_the_same_question_replaces_the_old_one_and_revoking_forgets_it() -> None:
    book = RuleBook()
    key = question_key(form("Q?"))
    old = user_rule("r-old", question=key, answer=ElicitationResult(action="decline"))
    new = user_rule("r-new", question=key, answer=ElicitationResult(action="accept", content={"name": "A"}))
    assert book.add(old) is None
    assert book.add(new) is old
    assert [r.id for r in book.all()] == ["r-new"]
    assert book.remove("r-new") is new
    assert book.answer_candidates("demo", form("Q?")) == [] and not book.has_answer_rules("demo")
    assert book.remove("r-new") is None


def test_expiry() -> None:
    book = RuleBook()
    book.add(user_rule("r-1", tool="echo", decision="allow", scope="until", expires_at=1_000))
    book.add(user_rule("r-2", tool="ping", decision="allow", scope="until", expires_at=5_000))
    assert book.next_expiry() == 1_000
    assert [r.id for r in book.expired(2_000)] == ["r-1"]


# ---- config ------------------------------------------------------------------------------


@pytest.mark.parametrize(("rule", "complaint"), [
    ({"tool": "x", "decision": "allow"}, 'needs "server"'),
    ({"server": "s", "tool": "x"}, 'needs "decision": "allow" or "deny"'),
    ({"server": "s", "tool": "x", "decision": "ask"}, '"decision": "allow" or "deny"'),
    ({"server": "s", "tool": "x", "decision": "allow", "answer": {"action": "decline"}}, "unknown key(s) answer"),
    ({"server": "s", "answer": {"action": "accept"}, "tools": "*"}, "unknown key(s) tools"),
    ({"server": "s", "answer": {"action": "decline", "content": {"a": 1}}}, "a decline carries no"),
    ({"server": "s", "answer": {"action": "cancel"}}, '"answer" must be'),
    ({"server": "s", "answer": {"action": "accept", "content": [1]}}, "answer.content"),
    ({"server": "s"}, 'needs "tool" + "decision"'),
])
def test_a_bad_config_rule_is_an_error_naming_the_entry(rule: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"mcpServers": {}, "elicitron": {"rules": [{"server": "ok", "tool": "*", "decision": "deny"},
                                                                 rule]}}, "mcp.json")
    assert str(raised.value).startswith("mcp.json: elicitron.rules[1]: ")
    assert complaint in str(raised.value)


@pytest.mark.parametrize(("entry", "complaint"), [
    ({"toolApproval": "sometimes"}, '"toolApproval" must be one of'),
    ({"toolApprovalOverrides": ["echo"]}, '"toolApprovalOverrides" must be an object'),
    ({"toolApprovalOverrides": {"echo": "ask-destructive"}}, "toolApprovalOverrides['echo'] must be one of"),
])
def test_bad_tool_approval_keys_are_errors(entry: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError, match="mcpServers.s") as raised:
        parse_config({"mcpServers": {"s": {"command": "x", **entry}}}, "mcp.json")
    assert complaint in str(raised.value)


# ---- which host calls are asked -------------------------------------------------------------


def server(policy: str, **overrides: str) -> StdioServerConfig:
    return StdioServerConfig(name="s", command="x", tool_approval=policy,  # type: ignore[arg-type]
                             tool_approval_overrides=tuple(overrides.items()))


@pytest.mark.parametrize(("annotations", "asked"), [
    ({"readOnlyHint": True}, False),
    ({"readOnlyHint": True, "openWorldHint": True}, False),  # read-only tools never
    ({"destructiveHint": True}, True),
    ({"destructiveHint": False}, True),  # open world by MCP's default
    ({"destructiveHint": False, "openWorldHint": False}, False),
    ({"destructiveHint": False, "openWorldHint": True}, True),
    (None, True),  # says nothing: MCP's defaults say destructive and open world
])
def test_ask_destructive_follows_the_annotations_with_mcps_defaults(annotations: dict[str, Any] | None,
                                                                     asked: bool) -> None:
    assert policy_for(server("ask-destructive"), "t", lambda: annotations) == ("ask" if asked else "allow")


def test_overrides_win_first_match_in_order() -> None:
    config = server("ask", **{"read_*": "allow", "*": "deny"})
    assert policy_for(config, "read_file", lambda: None) == "allow"
    assert policy_for(config, "write_file", lambda: None) == "deny"
    assert policy_for(server("deny", echo="ask"), "echo", lambda: None) == "ask"


def test_only_an_accepted_allow_allows() -> None:
    assert decision_of(ElicitationResult(action="accept", content={"decision": "allow-always"})) == "allow-always"
    for answer in (ElicitationResult(action="decline"), ElicitationResult(action="cancel"),
                   ElicitationResult(action="accept", content={"decision": "maybe"}),
                   ElicitationResult(action="accept", content={})):
        assert decision_of(answer) == "deny"


def test_warnings_name_what_the_server_declared_and_what_it_left_unsaid() -> None:
    assert tool_hints.warnings({"destructiveHint": True, "openWorldHint": False}) == ["May delete or overwrite things."]
    assert tool_hints.warnings({"destructiveHint": False, "openWorldHint": False}) == [
        "The server says this tool only adds things and stays on this computer."]
    assert len(tool_hints.warnings(None)) == 2


# ---- the store ---------------------------------------------------------------------------------


def stored(rule_id: str, **what: Any) -> Rule:
    base: dict[str, Any] = {"tool": "echo", "decision": "allow"}
    return user_rule(rule_id, **(what or base))


def test_the_store_keeps_each_rule_with_who_when_scope_and_expiry_private_and_in_wal(tmp_path: Path) -> None:
    path = tmp_path / "data" / "rules.sqlite3"
    answer = stored("r-2", question="k", message="Q?", fields=("name",), scope="until", expires_at=10_000,
                    answer=ElicitationResult(action="accept", content={"name": "Ada"}))
    with SqliteRuleStore(path) as store:
        assert store.add(stored("r-1")) and store.add(answer)
        assert store.add(stored("r-gone", scope="until", expires_at=10, tool="x", decision="allow"))
        assert [r.id for r in store.load(now_ms=5_000)] == ["r-1", "r-2"]  # r-gone expired: deleted
        with pytest.raises(ValueError):
            store.add(stored("r-s", scope="session", tool="x", decision="allow"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = conn.execute("SELECT id, scope, expires_at, created_by, created_at FROM rules ORDER BY id").fetchall()
    assert rows == [("r-1", "always", None, "w", 1), ("r-2", "until", 10_000, "w", 1)]
    with SqliteRuleStore(path) as again:
        loaded = {r.id: r for r in again.load(now_ms=5_000)}
        assert loaded["r-2"] == answer
        assert again.remove(["r-1"]) and [r.id for r in again.load(now_ms=5_000)] == ["r-2"]


def test_an_unreadable_row_is_skipped_and_a_newer_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rules.sqlite3"
    with SqliteRuleStore(path) as store:
        store.add(stored("r-1"))
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO rules (id, server, scope, created_at, created_by) VALUES ('bad', 's', 'always', 1, 'w')")
    with SqliteRuleStore(path) as store:
        assert [r.id for r in store.load(now_ms=0)] == ["r-1"]
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with SqliteRuleStore(path) as store, pytest.raises(RuleStoreError, match="newer"):
        store.load(now_ms=0)


def test_askers_and_servers_are_apart_and_a_servers_rule_applies_only_to_its_program() -> None:
    book = RuleBook()
    key = question_key(form("Q?"))
    book.add(user_rule("r-server", answer=ElicitationResult(action="decline"), question=key, identity="prog-1"))
    book.add(user_rule("r-asker", answer=ElicitationResult(action="decline"), question=key, party="asker"))
    assert [r.id for r in book.answer_candidates("demo", form("Q?"), identity="prog-1")] == ["r-server"]
    assert book.answer_candidates("demo", form("Q?"), identity="prog-2") == []  # another program: asked
    assert [r.id for r in book.answer_candidates("demo", form("Q?"), party="asker")] == ["r-asker"]
    assert book.has_answer_rules("demo", "asker") and book.remove("r-asker") is not None
    assert not book.has_answer_rules("demo", "asker") and book.has_answer_rules("demo")


def test_a_session_approval_covers_its_host_and_always_allow_every_host() -> None:
    book = RuleBook()
    book.add(user_rule("r-a", tool="echo", decision="allow", scope="session", host="host-a", identity="p"))
    assert book.tool_rule("demo", "echo", host="host-a", identity="p").id == "r-a"  # type: ignore[union-attr]
    assert book.tool_rule("demo", "echo", host="host-b", identity="p") is None
    book.add(user_rule("r-all", tool="echo", decision="allow", identity="p"))
    assert book.tool_rule("demo", "echo", host="host-a", identity="p").id == "r-a"  # type: ignore[union-attr]
    assert book.tool_rule("demo", "echo", host="host-b", identity="p").id == "r-all"  # type: ignore[union-attr]
    assert book.tool_rule("demo", "echo", host="host-b", identity="other") is None


def test_a_schema_1_store_is_upgraded_in_place_and_its_rules_come_unbound(tmp_path: Path) -> None:
    path = tmp_path / "rules.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE rules (id TEXT PRIMARY KEY, server TEXT NOT NULL, tool TEXT, decision TEXT, "
                     "question TEXT, message TEXT, fields TEXT, action TEXT, content TEXT, scope TEXT NOT NULL, "
                     "expires_at INTEGER, created_at INTEGER NOT NULL, created_by TEXT NOT NULL)")
        conn.execute("INSERT INTO rules VALUES ('r-1', 'demo', 'echo', 'allow', NULL, NULL, NULL, NULL, NULL, "
                     "'always', NULL, 1, 'w')")
        conn.execute("PRAGMA user_version = 1")
    path.chmod(0o600)
    with SqliteRuleStore(path) as store:
        [old] = store.load(now_ms=0)
        assert (old.party, old.identity, old.tool) == ("server", None, "echo")
        assert store.add(user_rule("r-2", answer=ElicitationResult(action="decline"), question="k", party="asker"))
        assert store.add(user_rule("r-1", tool="echo", decision="allow", identity="prog"))  # bound, written back
    with SqliteRuleStore(path) as again:
        loaded = {r.id: (r.party, r.identity) for r in again.load(now_ms=0)}
    assert loaded == {"r-1": ("server", "prog"), "r-2": ("asker", None)}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3


def test_a_store_that_cannot_be_written_says_so_and_does_not_raise(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the directory should be")
    store = SqliteRuleStore(blocked / "rules.sqlite3")
    assert store.add(stored("r-1")) is False
    assert store.remove(["r-1"]) is False
    with pytest.raises(RuleStoreError):
        store.load(now_ms=0)


# ---- audit rows of rule decisions ----------------------------------------------------------------


@pytest.mark.parametrize("record_values", [False, True])
def test_rows_decided_by_a_rule_are_written_with_the_next_batch(tmp_path: Path, record_values: bool) -> None:
    import asyncio

    from main_process.consent.audit_writer import AuditWriter
    from main_process.store.factory import open_store
    from shared import channels
    from shared.messages import ApprovalInfo, ElicitationInvoke, ElicitationRequest, RequestKind

    def invoke(kind: RequestKind | None) -> ElicitationInvoke:
        approval = ApprovalInfo(server="demo", tool="echo", arguments={"text": "x"}) if kind else None
        return ElicitationInvoke(request=ElicitationRequest(server="demo", params={
                                     "mode": "form", "message": "Q?", "requestedSchema": SCHEMA}),
                                 response_channel=channels.new_result_channel(), created_at=1, expires_at=2,
                                 origin="host", kind=kind, via="Host" if kind else None, approval=approval)

    async def write() -> tuple[str, str, list[AuditEntry]]:
        store = open_store(None, audit_path=tmp_path / "audit.sqlite3", record_values=record_values)
        writer = AuditWriter(store.audit, asyncio.get_running_loop())
        waiting, allowed = invoke(None), invoke("approval")
        writer.request(waiting)
        writer.decided(allowed, "accept", content={"decision": "allow-always"}, rule_id="r-1",
                       decision="allow-always")
        assert await store.audit.entries() == [], "nothing is written before the batch"
        writer.flush()
        await writer.close()
        entries = await store.audit.entries()
        await store.close()
        return waiting.response_channel, allowed.response_channel, entries

    waiting, allowed, entries = asyncio.run(write())
    rows = {entry.channel: entry for entry in entries}
    assert rows[waiting].outcome is None
    row = rows[allowed]
    assert (row.outcome, row.rule_id, row.decision, row.kind, row.via, row.tool, row.window) == (
        "accept", "r-1", "allow-always", "approval", "Host", "echo", None)
    assert row.decided_at is not None
    assert (row.content, row.arguments) == (({"decision": "allow-always"}, {"text": "x"}) if record_values
                                            else (None, None))


def test_the_store_lock_names_the_main_that_owns_it_and_a_cli_takes_it_only_when_free(tmp_path: Path) -> None:
    import asyncio
    import os

    from main_process.store.owner import Owner, StoreLock, hold_or_owner

    store = tmp_path / "rules.sqlite3"
    main_lock = StoreLock(store)
    assert asyncio.run(main_lock.claim(tmp_path / "connection.json"))
    assert stat.S_IMODE(main_lock.path.stat().st_mode) == 0o600
    cli = StoreLock(store)
    assert hold_or_owner(cli) == Owner(os.getpid(), tmp_path / "connection.json")
    assert not asyncio.run(StoreLock(store).claim(tmp_path / "other.json"))  # a second main: not the owner
    main_lock.release()
    assert hold_or_owner(cli) is None  # free: the CLI holds it for its change
    assert StoreLock(store).try_hold() == Owner(0, Path("?"))  # held, by no main: a CLI's change
    cli.release()
