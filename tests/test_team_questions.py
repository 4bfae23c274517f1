"""Questions of `elicitron ask` outlive their main on a shared store (issue 35, item 4): `kill -9`
of the main an asker was attached to leaves its question open in the store, shown by the windows
of every other main; an answer given there waits for the asker, which re-attaches to another main
of the store (`elicitron ask --connection A --connection B`) and gets it exactly once. Real mains,
the real `elicitron ask` process, contract-only windows (kit.peer), the session's PostgreSQL."""

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consent_kit import invoke_of
from kit.env import child_env
from kit.paths import ROOT
from kit.postgres import PostgresServer
from team_kit import Windows, dismiss_of, store_state, team_on

from main_process.store.factory import open_store
from main_process.store.records import Approver
from shared import channels
from shared.codec import encode
from shared.messages import AskerInfo, ElicitationInvoke, ElicitationRequest, ElicitationResult

YES = {"answer": True}


@pytest.fixture
def windows() -> Iterator[Windows]:
    opened = Windows()
    yield opened
    opened.close()


def ask(message: str, *connections: Path) -> "subprocess.Popen[str]":
    """`elicitron ask MESSAGE --yes-no --connection FILE...` as its own process."""
    argv = [sys.executable, "-m", "cli_process", "--log-level", "info", "ask", message, "--yes-no", "--name", "deploy.sh"]
    for connection in connections:
        argv += ["--connection", str(connection)]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=child_env(), cwd=ROOT)


def finished(proc: "subprocess.Popen[str]", timeout_s: float = 30.0) -> tuple[int, str, str]:
    """Its exit code, stdout and stderr; one still running after `timeout_s` is killed (-9)."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
    return proc.returncode, out, err


def question_on(window: Any, message: str) -> dict[str, Any]:
    body: dict[str, Any] = window.expect(
        lambda t, b: t == "msgElicitationTransferInvoke" and b["request"]["params"]["message"] == message)[1]
    return body


# ---- the store alone ------------------------------------------------------------------------------


def test_a_question_outlives_its_gone_main_and_its_answer_is_taken_once(pg_url: str) -> None:
    """Main A (gone: its LISTEN connection's server pid is none) held a question and a server's
    request; B's heartbeat ends the request, not the question; B's window answers the question;
    the asker asks again twice at once (two mains' connections): one gets the answer, the other
    hears it was taken. A question still open ends 'resumed' for the main it moves to."""
    yes = ElicitationResult(action="accept", content={"answer": True})

    async def scenario() -> None:
        laptop, server = open_store(pg_url, machine="laptop-a"), open_store(pg_url, machine="build-server")
        try:
            await asyncio.gather(laptop.open(), server.open())
            held, other = laptop.inbox, server.inbox
            assert held is not None and other is not None
            await held.join(f"main-a-{uuid.uuid4()}", 0, 1)  # backend pid 0: gone at B's first heartbeat
            await other.join(f"main-b-{uuid.uuid4()}", 0, 2)
            question, moving, elicitation = question_invoke(), question_invoke(), question_invoke(kind=None)
            for invoke, asked_on in ((question, "ask-1"), (moving, "ask-2"), (elicitation, None)):
                assert await held.publish(invoke, encode(channels.INVOKE, invoke)[1], asked_on)
            await other.heartbeat()
            rows = {row.channel: row.state for row in await other.changed([]) or []}
            assert question.response_channel in rows and moving.response_channel in rows  # still open
            assert elicitation.response_channel not in rows  # orphaned with its main

            assert await other.claim(question, yes, Approver(window="ben-w", machine="build-server", name="ben"),
                                     None) == "won"
            assert (await other.resume("ask-1", "someone else")).state == "unknown"  # another asker's name
            both = await asyncio.gather(held.resume("ask-1", "deploy.sh"), other.resume("ask-1", "deploy.sh"))
            assert sorted((r.state, r.action, r.content == yes.content) for r in both) == [
                ("answered", "accept", True), ("taken", None, False)]

            assert await laptop.audit.record_requests([moving])
            assert (await other.resume("ask-2", "deploy.sh")).state == "moved"
            [entry] = [e for e in await server.audit.entries() if e.channel == moving.response_channel]
            assert entry.outcome == "cancelled"  # asked again under a new channel: this row ends
            assert (await other.resume("ask-2", "deploy.sh")).state == "resumed"
            assert (await other.resume("ask-3", "deploy.sh")).state == "unknown"
        finally:
            await asyncio.gather(laptop.close(), server.close())

    asyncio.run(scenario())


def question_invoke(kind: str | None = "question") -> ElicitationInvoke:
    now_ms = time.time_ns() // 1_000_000
    return ElicitationInvoke(
        request=ElicitationRequest(server="deploy.sh", params={"mode": "form", "message": "Deploy?",
                                                               "requestedSchema": {"type": "object", "properties": {}}}),
        response_channel=channels.new_result_channel(), created_at=now_ms, expires_at=now_ms + 60_000, origin=None,
        kind=kind, asker=AskerInfo(name="deploy.sh") if kind else None)  # type: ignore[arg-type]


# ---- real mains, the real `elicitron ask` ------------------------------------------------------------


def only_main_left(store: dict[str, Any]) -> bool:
    return [m["machine"] for m in store.get("mains", [])] == ["build-server"]


def test_an_answer_given_while_the_askers_main_was_gone_reaches_the_asker_on_another_main_once(
        postgres: PostgresServer, windows: Windows) -> None:
    with team_on(postgres, "laptop-a", "build-server") as (_mains, [a, b]):
        on_b = windows.open(b, "ben's window", user="ben")
        proc = ask("Deploy 1.4 to prod?", a.connection, b.connection)  # attaches to A, the first that runs
        try:
            copy = invoke_of(on_b)
            channel = copy["responseChannel"]
            assert (copy["machine"], copy["request"]["server"]) == ("laptop-a", "deploy.sh")

            proc.send_signal(signal.SIGSTOP)  # the asker does not notice A is gone until it is answered
            os.kill(a.pid, signal.SIGKILL)
            store_state(on_b, only_main_left)  # B took A for gone: the question is still on B's window
            on_b.send(channel, {"action": "accept", "content": YES})
            dismissed = dismiss_of(on_b, channel)
            assert (dismissed["reason"], dismissed["by"]) == ("answered", on_b.window)
        finally:
            proc.send_signal(signal.SIGCONT)
        code, out, err = finished(proc)
        assert (code, out) == (0, "true\n"), err + b.stderr.tail()

        # Once: the answer went to the asker; B opened no question of its own for it.
        assert not [p for p in on_b.status()["pending"] if p["server"] == "deploy.sh"]

        rows = [row for row in b.audit() if row["channel"] == channel]
        assert [(r["outcome"], r["kind"], r["machine"], r["answerMachine"], r["answerUser"]) for r in rows] == \
            [("accept", "question", "laptop-a", "build-server", "ben")]


def test_a_question_still_open_moves_with_its_asker_to_another_main(postgres: PostgresServer,
                                                                    windows: Windows) -> None:
    with team_on(postgres, "laptop-a", "build-server") as (_mains, [a, b]):
        on_b = windows.open(b, "ben")
        proc = ask("Rotate the keys?", a.connection, b.connection)
        try:
            first = question_on(on_b, "Rotate the keys?")["responseChannel"]
            os.kill(a.pid, signal.SIGKILL)
            # The asker re-attached to B and asked again: A's copy leaves, B's own question shows.
            assert dismiss_of(on_b, first)["reason"] == "cancelled"
            moved = question_on(on_b, "Rotate the keys?")
            assert moved["responseChannel"] != first and moved.get("machine") is None
            on_b.send(moved["responseChannel"], {"action": "decline"})
        finally:
            code, out, err = finished(proc)
        assert (code, out) == (1, "false\n"), err
        outcomes = {row["channel"]: (row["outcome"], row["machine"]) for row in b.audit()}
        assert outcomes[moved["responseChannel"]] == ("decline", "build-server")
        # A's row of the first asking, if A wrote it before it was killed (rows are written in
        # batches), ended with it: never left pending.
        assert outcomes.get(first, ("cancelled", "laptop-a")) == ("cancelled", "laptop-a")
