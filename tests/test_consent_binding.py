"""Consent is bound to whom it was given to (issue 24, findings 4, 9, 10 and 11), across real
processes: a real main and demo server, `elicitron ask` as a process, real MCP hosts (mcp's own
`Client` on `elicitron serve`), contract-only windows, and the CLI as a user runs it.

- an asker is not a server: one named like a server gets none of its remembered answers, and a
  "Remember" on its card never answers the server (and the other way round);
- "Allow for this session" covers the host whose card it was given on, no other;
- rules are bound to the server's program (command and arguments, or URL): a replaced program is
  asked again, and its old rules show as not applying;
- `rules revoke` from a shell whose connection file is another reaches the main that holds the
  rule store, so a rule it says is revoked is never applied again.
"""

import concurrent.futures
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ask_kit import ask
from consent_kit import (
    ConsentMain,
    ConsentMains,
    WireHost,
    demo,
    invoke_of,
    started_mains,
    text_of,
    write_consent_config,
)
from gateway_kit import Host, HostLoop, open_beside, serve_params
from gateway_kit import text_of as host_text
from kit.paths import DEMO_SERVER
from kit.peer import WirePeer

pytestmark = pytest.mark.slow  # real mains, askers, gateways and hosts

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
QUESTION = "Share your contacts?"


@pytest.fixture
def consent_mains(tmp_path: Path) -> Iterator[ConsentMains]:
    yield from started_mains(tmp_path)



def answered_call(window: WirePeer, channel: str) -> dict[str, Any]:
    """The demo `ask` tool's result: the answer as the server received it."""
    reply = window.expect_topic(channel, 30)
    assert "result" in reply, reply
    answer: dict[str, Any] = json.loads(reply["result"]["content"][0]["text"])
    return answer


def remember(window: WirePeer, invoke: dict[str, Any], action: str, content: dict[str, Any] | None = None,
             scope: str = "always") -> None:
    body: dict[str, Any] = {"action": action, "remember": {"scope": scope}}
    if content is not None:
        body["content"] = content
    window.send(invoke["responseChannel"], body)


def finished(proc: "subprocess.Popen[str]", window: WirePeer, timeout_s: float = 30) -> tuple[int, str, str]:
    """A CLI process's exit code and output, while the contract-only window stays attached."""
    window.keep_alive_until(lambda: proc.poll() is not None, timeout_s)
    out, err = proc.communicate(timeout=10)
    return proc.returncode, out, err


def result_of[T](future: "concurrent.futures.Future[T]", window: WirePeer, timeout_s: float = 30) -> T:
    """A host's call result, while the window stays attached."""
    window.keep_alive_until(future.done, timeout_s)
    return future.result()


def beside[T](window: WirePeer, run: Callable[[], T], timeout_s: float = 90) -> T:
    """`run()` (a CLI command, a wait on main) while the window stays attached: a contract-only
    peer heartbeats only while it is read, and main lets a silent one go after 3 s."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(run)
        window.keep_alive_until(future.done, timeout_s)
        return future.result()


def rules_of(main: ConsentMain, window: WirePeer) -> list[dict[str, Any]]:
    return beside(window, main.rules)


def cli(main: ConsentMain, window: WirePeer, *args: str, plain: bool = False) -> "subprocess.CompletedProcess[str]":
    return beside(window, lambda: (main.cli_plain if plain else main.cli)(*args))


def reload(main: ConsentMain, window: WirePeer) -> None:
    done = cli(main, window, "reload")
    assert done.returncode == 0, done.stderr
    beside(window, lambda: main.wait_server_ready("demo"))


# ---- finding 4: askers and servers are separate namespaces ----------------------------------


def test_an_asker_named_like_a_server_gets_none_of_its_remembered_answers(consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo()})
    window = main.peer(name="window")
    call = window.call_tool("demo", "ask", {"message": QUESTION, "schema": SCHEMA})
    remember(window, invoke_of(window), "accept", {"ok": True})
    assert answered_call(window, call) == {"action": "accept", "content": {"ok": True}}
    [rule] = rules_of(main, window)
    assert (rule["server"], rule.get("party", "server")) == ("demo", "server")

    # The same question from a program that calls itself "demo": asked in the window, not answered.
    asker = ask(main.connection, QUESTION, "--schema", json.dumps(SCHEMA), "--name", "demo")
    invoke = invoke_of(window, 30)
    assert (invoke["kind"], invoke["asker"]["name"]) == ("question", "demo")
    window.answer(invoke, "decline")
    code, out, err = finished(asker, window)
    assert (code, out.strip()) == (1, ""), err

    # The server itself still gets its remembered answer with no window.
    again = window.call_tool("demo", "ask", {"message": QUESTION, "schema": SCHEMA})
    assert answered_call(window, again) == {"action": "accept", "content": {"ok": True}}


def test_remember_on_an_askers_card_answers_that_asker_and_never_the_server_of_that_name(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo()})
    window = main.peer(name="window")
    asker = ask(main.connection, QUESTION, "--schema", json.dumps(SCHEMA), "--name", "demo")
    invoke = invoke_of(window, 30)
    assert invoke["kind"] == "question"
    remember(window, invoke, "accept", {"ok": True})
    code, out, err = finished(asker, window)
    assert (code, json.loads(out)) == (0, {"ok": True}), err
    [rule] = rules_of(main, window)
    assert (rule["server"], rule.get("party", "server")) == ("demo", "asker")
    listed = cli(main, window, "rules")
    assert listed.returncode == 0 and "program demo" in listed.stdout, listed.stdout

    # The server "demo" asks the same: a card, not the asker's remembered answer.
    call = window.call_tool("demo", "ask", {"message": QUESTION, "schema": SCHEMA})
    server_invoke = invoke_of(window)
    assert server_invoke.get("kind") is None and server_invoke["request"]["server"] == "demo"
    window.answer(server_invoke, "decline")
    assert answered_call(window, call)["action"] == "decline"

    # The asker asking again gets its own remembered answer with no window.
    again = ask(main.connection, QUESTION, "--schema", json.dumps(SCHEMA), "--name", "demo")
    code, out, err = finished(again, window)
    assert (code, json.loads(out)) == (0, {"ok": True}), err

    # Revoking the server's rules leaves the asker's; `--asker` takes them.
    kept = cli(main, window, "rules", "revoke", "--all", "--server", "demo")
    assert (kept.returncode, kept.stdout.strip()) == (0, "no rules to revoke"), kept.stderr
    gone = cli(main, window, "rules", "revoke", "--all", "--asker", "demo")
    assert (gone.returncode, gone.stdout.strip()) == (0, f"revoked {rule['id']}"), gone.stderr


# ---- finding 9: a host's session approval covers that host only -----------------------------


def test_allow_for_this_session_covers_the_host_it_was_given_to_and_no_other(
        consent_mains: ConsentMains, hosts: HostLoop) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window = main.peer(name="approver")
    first = open_beside(Host(hosts, serve_params(main.connection, "--server", "demo"), "Host A"), main)
    second = open_beside(Host(hosts, serve_params(main.connection, "--server", "demo"), "Host B"), main)
    try:
        call = first.start(lambda c: c.call_tool("echo", {"text": "a1"}))
        invoke = invoke_of(window, 30)
        assert (invoke["kind"], invoke["via"]) == ("approval", "Host A")
        window.answer(invoke, "accept", {"decision": "allow-session"})
        assert host_text(result_of(call, window)) == "a1"
        [rule] = rules_of(main, window)
        assert (rule["tool"], rule["scope"], rule["host"]) == ("echo", "session", "Host A")

        again = first.start(lambda c: c.call_tool("echo", {"text": "a2"}))  # Host A: no card
        assert host_text(result_of(again, window)) == "a2"

        other = second.start(lambda c: c.call_tool("echo", {"text": "b1"}))  # Host B: asked
        asked = invoke_of(window, 30)
        assert (asked["kind"], asked["via"]) == ("approval", "Host B")
        window.answer(asked, "accept", {"decision": "deny"})
        denied = result_of(other, window)
        assert denied.is_error is True and "denied" in host_text(denied).lower()
    finally:
        first.close()
        second.close()


# ---- finding 10: rules are bound to the server's program ------------------------------------


def test_a_replaced_program_under_the_same_name_is_asked_again_and_its_old_rules_show_as_not_applying(
        consent_mains: ConsentMains) -> None:
    main = consent_mains({"demo": demo(toolApproval="ask")})
    window = main.peer(name="window")
    host = WireHost(main, name="Host")
    call = host.call("demo", "echo", {"text": "1"})
    window.answer(invoke_of(window), "accept", {"decision": "allow-always"})
    assert text_of(host.result(call)) == "1"
    asked = window.call_tool("demo", "ask", {"message": QUESTION, "schema": SCHEMA})
    remember(window, invoke_of(window), "accept", {"ok": True})
    assert answered_call(window, asked)["action"] == "accept"
    assert all(rule.get("applies", True) for rule in rules_of(main, window))

    # Another program takes the name "demo" (here a shell that runs the demo: it behaves alike).
    assert main.config is not None
    other = {"command": "/bin/sh", "args": ["-c", f'exec "{sys.executable}" "{DEMO_SERVER}"'], "toolApproval": "ask"}
    write_consent_config(main.config, {"demo": other})
    reload(main, window)
    host.close()  # it heard nothing while main reloaded: a host attaching now, like a new session
    host = WireHost(main, name="Host")
    call = host.call("demo", "echo", {"text": "2"})
    approval = invoke_of(window, 30)  # asked again: "Always allow" was given to the other program
    assert (approval["kind"], approval["approval"]["tool"]) == ("approval", "echo")
    window.answer(approval, "accept", {"decision": "deny"})
    assert host.result(call)["isError"] is True
    asked = window.call_tool("demo", "ask", {"message": QUESTION, "schema": SCHEMA})
    question = invoke_of(window)  # and the remembered answer is not given to it
    window.answer(question, "decline")
    assert answered_call(window, asked)["action"] == "decline"
    rules = rules_of(main, window)
    assert len(rules) == 2 and not any(rule.get("applies", True) for rule in rules)
    listed = cli(main, window, "rules")
    assert listed.stdout.count("not applying") == 2, listed.stdout

    # The old program back under its name: its rules apply again.
    write_consent_config(main.config, {"demo": demo(toolApproval="ask")})
    reload(main, window)
    host.close()
    host = WireHost(main, name="Host")
    assert text_of(host.result(host.call("demo", "echo", {"text": "3"}))) == "3"
    assert all(rule.get("applies", True) for rule in rules_of(main, window))


# ---- finding 11: `rules revoke` acts through the running main -------------------------------


def test_rules_revoke_from_a_shell_with_another_connection_file_reaches_the_running_main(
        consent_mains: ConsentMains, tmp_path: Path) -> None:
    main = consent_mains({"demo": demo()})
    window = main.peer(name="window")
    call = window.call_tool("demo", "ask", {"message": QUESTION, "schema": SCHEMA})
    remember(window, invoke_of(window), "accept", {"ok": True})
    answered_call(window, call)
    session = window.call_tool("demo", "ask", {"message": "Just now?", "schema": SCHEMA})
    remember(window, invoke_of(window), "accept", {"ok": True}, scope="session")
    answered_call(window, session)
    ids = {rule["message"]: rule["id"] for rule in rules_of(main, window)}

    elsewhere = tmp_path / "elsewhere" / "connection.json"  # this shell's connection file: no main
    listed = cli(main, window, "rules", "--json", "--connection", str(elsewhere), plain=True)
    assert listed.returncode == 0, listed.stderr
    assert {rule["id"] for rule in json.loads(listed.stdout)} == set(ids.values())  # main's, session rule too
    assert str(main.connection) in listed.stderr

    done = cli(main, window, "rules", "revoke", ids[QUESTION], "--connection", str(elsewhere), plain=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"revoked {ids[QUESTION]}"
    assert str(main.connection) in done.stderr  # it says which main it went through
    window.expect(lambda t, b: t == "rules" and [r["id"] for r in b["rules"]] == [ids["Just now?"]])
    asked = window.call_tool("demo", "ask", {"message": QUESTION, "schema": SCHEMA})
    invoke = invoke_of(window)  # the running main applies it no more
    window.answer(invoke, "decline")
    assert answered_call(window, asked)["action"] == "decline"

    # A main that holds the store but does not answer (stopped): nothing is changed, exit 1.
    main.proc.send_signal(signal.SIGSTOP)
    try:
        stuck = main.cli_plain("rules", "revoke", ids["Just now?"], "--connection", str(elsewhere))
    finally:
        main.proc.send_signal(signal.SIGCONT)
    assert stuck.returncode == 1 and stuck.stdout == "", stuck
    assert "nothing revoked" in stuck.stderr and f"--connection {main.connection}" in stuck.stderr
    assert [rule["id"] for rule in main.rules()] == [ids["Just now?"]]


# ---- finding 10, continued: rules stored before they were bound keep working ----------------

_SCHEMA_1 = """CREATE TABLE rules (id TEXT PRIMARY KEY, server TEXT NOT NULL, tool TEXT, decision TEXT,
    question TEXT, message TEXT, fields TEXT, action TEXT, content TEXT, scope TEXT NOT NULL, expires_at INTEGER,
    created_at INTEGER NOT NULL, created_by TEXT NOT NULL)"""


def write_schema_1_store(path: Path, rows: list[tuple[Any, ...]]) -> None:
    """A rule store as the elicitron before this change wrote it (schema version 1)."""
    import sqlite3

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute(_SCHEMA_1)
    conn.executemany("INSERT INTO rules VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    path.chmod(0o600)


def test_rules_stored_before_binding_bind_to_the_program_configured_now_and_askers_keep_theirs(
        tmp_path: Path) -> None:
    from consent_kit import launch
    from kit.env import short_tmp_dir

    from main_process.consent.rules import question_key
    from shared.elicit_params import read_params

    key = question_key(read_params({"mode": "form", "message": QUESTION, "requestedSchema": SCHEMA}))
    ok = json.dumps({"ok": True})
    home = tmp_path / "home"
    write_schema_1_store(home / "data" / "elicitron" / "rules.sqlite3", [
        ("r-old-demo", "demo", None, None, key, QUESTION, '["ok"]', "accept", ok, "always", None, 1, "w"),
        ("r-old-tool", "demo", "echo", "allow", None, None, None, None, None, "always", None, 2, "w"),
        ("r-old-asker", "deploy.sh", None, None, key, QUESTION, '["ok"]', "accept", ok, "always", None, 3, "w"),
    ])
    runtime = short_tmp_dir()
    config = write_consent_config(home / "mcp.json", {"demo": demo(toolApproval="ask")})
    main = launch(config, runtime, home, ["demo"])
    try:
        window = main.peer(name="window")
        rules = {rule["id"]: rule for rule in rules_of(main, window)}
        assert {i: (r.get("party", "server"), r.get("applies", True)) for i, r in rules.items()} == {
            "r-old-demo": ("server", True), "r-old-tool": ("server", True), "r-old-asker": ("asker", True)}
        # They answer as before, with no window: the server, its host's call, the asker.
        call = window.call_tool("demo", "ask", {"message": QUESTION, "schema": SCHEMA})
        assert answered_call(window, call) == {"action": "accept", "content": {"ok": True}}
        host = WireHost(main, name="Host")
        assert text_of(host.result(host.call("demo", "echo", {"text": "still allowed"}))) == "still allowed"
        asker = ask(main.connection, QUESTION, "--schema", json.dumps(SCHEMA), "--name", "deploy.sh")
        code, out, err = finished(asker, window)
        assert (code, json.loads(out)) == (0, {"ok": True}), err

        # Bound to the program configured when they were first loaded: another one is asked again.
        other = {"command": "/bin/sh", "args": ["-c", f'exec "{sys.executable}" "{DEMO_SERVER}"']}
        write_consent_config(config, {"demo": other})
        reload(main, window)
        rules = {rule["id"]: rule for rule in rules_of(main, window)}
        assert [i for i, r in rules.items() if not r.get("applies", True)] == ["r-old-demo", "r-old-tool"]
    finally:
        main.stop()
        subprocess.run(["rm", "-rf", str(runtime)], check=False)
