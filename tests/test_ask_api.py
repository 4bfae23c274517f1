"""The Python API: an agent's own MCP clients get Elicitron's windows; ask(); no main; main restarts."""

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ask_kit import ended, finished, module_main, window
from kit.env import child_env
from kit.main import RunningMain
from kit.paths import DEMO_SERVER, ROOT
from kit.peer import WirePeer
from mcp.types import ElicitRequestFormParams, ElicitResult
from PySide6.QtWidgets import QLabel, QLineEdit
from pytestqt.qtbot import QtBot

from asker_process import ask, elicitation_callback
from shared.errors import MainNotRunningError, QuestionRefusedError

pytestmark = pytest.mark.slow  # real mains, real processes

AGENT = Path(__file__).with_name("ask_agent.py")
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.fixture(scope="module")
def main() -> Iterator[RunningMain]:
    with module_main() as running:
        yield running


def test_an_agents_own_mcp_clients_get_their_elicitations_answered_in_a_window(
    qtbot: QtBot, main: RunningMain
) -> None:
    agent = subprocess.Popen([sys.executable, str(AGENT), str(DEMO_SERVER), str(main.connection)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=child_env(), cwd=ROOT)
    try:
        with window(qtbot, main.connection, "laptop") as win:
            for restaurant, name in (("the Client's pick", "Grace"), ("the session's pick", "Ada")):
                card = win.card(timeout_ms=30_000)
                header = card.findChild(QLabel, "header")
                assert header is not None
                assert f"via agent (pid {agent.pid} on {socket.gethostname()})" in header.text()
                assert card.invoke.request.params["message"] == f"Book a table at {restaurant}?"
                field = card.findChild(QLineEdit, "field:name")
                assert field is not None
                field.clear()
                qtbot.keyClicks(field, name)
                win.click(card, "accept")
                win.no_card()
            code, out, err = finished(qtbot, agent, timeout_ms=30_000)
    finally:
        ended(agent)
    assert code == 0, err
    calls = [json.loads(line) for line in out.splitlines()]
    assert [(c["via"], c["server_got"]["action"], c["server_got"]["content"]["name"]) for c in calls] == [
        ("Client", "accept", "Grace"), ("ClientSession", "accept", "Ada")]
    assert calls[0]["server_got"]["content"]["party_size"] == 2  # the schema's default, as the window sent it


def answered_by(peer: WirePeer, action: str, content: dict[str, Any] | None = None) -> dict[str, Any]:
    """Block until `peer` gets an invoke, answer it; the invoke."""
    invoke = first_invoke(peer)
    peer.answer(invoke, action, content)
    return invoke


def first_invoke(peer: WirePeer) -> dict[str, Any]:
    """The first request shown to `peer`: in its welcome (asked before it attached) or after it."""
    welcome = next((body for topic, body in peer.received if topic == "welcome"), None)
    if welcome is not None and welcome["pending"]:
        return welcome["pending"][0]
    return peer.expect_topic("msgElicitationTransferInvoke")


def test_ask_returns_mcps_elicit_result_and_refuses_a_bad_schema_before_sending(main: RunningMain) -> None:
    peer = main.peer(name="window")

    async def scenario() -> tuple[ElicitResult, dict[str, Any]]:
        asking = asyncio.ensure_future(ask("Your name?", NAME_SCHEMA, connection=main.connection,
                                           name="notebook"))
        invoke = await asyncio.to_thread(answered_by, peer, "accept", {"name": "Lin"})
        return await asking, invoke

    result, invoke = asyncio.run(scenario())
    assert isinstance(result, ElicitResult) and (result.action, result.content) == ("accept", {"name": "Lin"})
    assert invoke["asker"]["name"] == "notebook" and invoke["kind"] == "question"
    with pytest.raises(QuestionRefusedError, match="'when'.*unsupported format"):
        when = {"type": "object", "properties": {"when": {"type": "string", "format": "time"}}}
        asyncio.run(ask("When?", when, connection=main.connection))
    peer.close()


def test_one_callback_carries_questions_of_several_clients_at_once(main: RunningMain) -> None:
    peer = main.peer(name="window")
    callback = elicitation_callback(name="busy agent", connection=main.connection)

    def question(name: str) -> ElicitRequestFormParams:
        return ElicitRequestFormParams(message=f"Question for {name}?", requested_schema=NAME_SCHEMA)

    def answer_both() -> list[str]:
        invokes = [peer.expect_topic("msgElicitationTransferInvoke") for _ in range(2)]
        for invoke in reversed(invokes):  # the later one first: the earlier must still get through
            name = invoke["request"]["params"]["message"].removeprefix("Question for ").removesuffix("?")
            peer.answer(invoke, "accept", {"name": name})
        return [invoke["asker"]["name"] for invoke in invokes]

    async def scenario() -> tuple[list[Any], list[str]]:
        first = asyncio.ensure_future(callback(None, question("one")))  # type: ignore[arg-type]
        second = asyncio.ensure_future(callback(None, question("two")))  # type: ignore[arg-type]
        askers = await asyncio.to_thread(answer_both)
        return [await first, await second], askers

    results, askers = asyncio.run(scenario())
    assert [(r.action, r.content) for r in results] == [("accept", {"name": "one"}),
                                                        ("accept", {"name": "two"})]
    assert askers == ["busy agent", "busy agent"]
    peer.close()


def test_without_a_main_both_fail_at_once_with_main_not_running(tmp_path: Path) -> None:
    missing = tmp_path / "connection.json"
    with pytest.raises(MainNotRunningError, match="no connection file"):
        asyncio.run(ask("Anyone?", connection=missing))
    callback = elicitation_callback(name="agent", connection=missing)
    params = ElicitRequestFormParams(message="Anyone?", requested_schema=NAME_SCHEMA)
    with pytest.raises(MainNotRunningError):
        asyncio.run(callback(None, params))  # type: ignore[arg-type]


def test_the_callback_finds_a_restarted_main_and_asks_an_open_question_again(
    main_factory: Callable[..., RunningMain],
) -> None:
    first = main_factory({})
    callback = elicitation_callback(name="survivor", connection=first.connection)
    params = ElicitRequestFormParams(message="Still there?", requested_schema=NAME_SCHEMA)

    def answer_on(running: RunningMain, name: str) -> dict[str, Any]:
        return answered_by(running.peer(name="window"), "accept", {"name": name})

    def restart(running: RunningMain) -> RunningMain:
        running.proc.kill()  # SIGKILL: no goodbye, a stale connection file left behind
        running.proc.wait(timeout=10)
        return main_factory({})

    async def scenario() -> list[Any]:
        results = [await _with(callback(None, params), asyncio.to_thread(answer_on, first, "one"))]  # type: ignore[arg-type]
        second = await asyncio.to_thread(restart, first)
        results.append(await _with(callback(None, params),  # type: ignore[arg-type]
                                   asyncio.to_thread(answer_on, second, "two")))
        # Asked while `second` runs; `second` dies with the question open; `third` shows it again.
        asking = asyncio.ensure_future(callback(None, params))  # type: ignore[arg-type]
        doomed = second.peer(name="doomed-window")
        await asyncio.to_thread(first_invoke, doomed)
        third = await asyncio.to_thread(restart, second)
        invoke = await asyncio.to_thread(answer_on, third, "three")
        results.append(await asking)
        results.append(invoke["request"]["params"]["message"])
        return results

    one, two, three, message = asyncio.run(scenario())
    assert [(r.action, r.content) for r in (one, two, three)] == [
        ("accept", {"name": "one"}), ("accept", {"name": "two"}), ("accept", {"name": "three"})]
    assert message == "Still there?"


async def _with(main_call: Any, side: Any) -> Any:
    """Run a question and what answers it together; the question's result."""
    result, _ = await asyncio.gather(main_call, side)
    return result
