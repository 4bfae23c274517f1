"""The msgAsk / msgWithdraw extension as a third-party asker sees it: raw pyzmq + msgpack peers."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from ask_kit import module_main
from kit.main import RunningMain
from kit.peer import WirePeer

pytestmark = pytest.mark.slow  # real mains, real processes

ASKER = {"name": "deploy.sh", "pid": 4242, "machine": "build-7"}
FORM = {"mode": "form", "message": "Which tag?",
        "requestedSchema": {"type": "object", "properties": {"tag": {"type": "string", "minLength": 1}},
                            "required": ["tag"]}}


@pytest.fixture(scope="module")
def main() -> Iterator[RunningMain]:
    with module_main() as running:
        yield running


@pytest.fixture
def asker(main: RunningMain) -> Iterator[WirePeer]:
    peer = main.peer(name="deploy.sh", role="asker")
    yield peer
    peer.close()


@pytest.fixture
def window(main: RunningMain) -> Iterator[WirePeer]:
    peer = main.peer(name="window")
    yield peer
    peer.close()


def send_ask(asker: WirePeer, channel: str, params: dict[str, Any], **extra: Any) -> None:
    asker.send("msgAsk", {"responseChannel": channel, "params": params, "asker": ASKER, **extra})


def reply(asker: WirePeer, channel: str) -> dict[str, Any]:
    return asker.expect_topic(channel)


def test_a_question_reaches_every_window_and_its_answer_comes_back_typed(
    main: RunningMain, asker: WirePeer, window: WirePeer
) -> None:
    send_ask(asker, "ask-1", {**FORM, "message": "Typed answer?"}, timeoutSeconds=120)
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    assert invoke["kind"] == "question" and invoke["asker"] == ASKER and invoke["origin"] is None
    assert invoke["request"] == {"server": "deploy.sh", "params": {**FORM, "message": "Typed answer?"}}
    assert invoke["expiresAt"] - invoke["createdAt"] == 120_000
    late = main.peer(name="late-window", hello=False)  # replayed to a window that attaches later
    assert [p["responseChannel"] for p in late.hello()["pending"]] == [invoke["responseChannel"]]
    window.answer(invoke, "accept", {"tag": ""})  # breaks minLength: refused, the question stays open
    assert window.expect_error(invoke["responseChannel"])["code"] == "invalid-content"
    late.answer(invoke, "accept", {"tag": "v1.4"})
    assert reply(asker, "ask-1") == {"answer": {"action": "accept", "outcome": "accept",
                                                "content": {"tag": "v1.4"}}}
    for peer in (window, late):
        dismiss = peer.expect_topic("msgElicitationTransferDismiss")
        assert (dismiss["reason"], dismiss["by"]) == ("answered", late.window)
    window.answer(invoke, "decline")
    assert window.expect_error(invoke["responseChannel"])["code"] == "already-answered"
    late.close()


def test_withdraw_dismisses_cancelled_and_the_asker_hears_withdrawn(
    asker: WirePeer, window: WirePeer
) -> None:
    send_ask(asker, "ask-w", {**FORM, "message": "Withdraw me?"})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    asker.send("msgWithdraw", {"responseChannel": "ask-w"})
    dismiss = window.expect_topic("msgElicitationTransferDismiss")
    assert dismiss == {"responseChannel": invoke["responseChannel"], "reason": "cancelled"}
    assert reply(asker, "ask-w") == {"answer": {"action": "cancel", "outcome": "withdrawn"}}
    asker.send("msgWithdraw", {"responseChannel": "ask-w"})  # again: nothing happens, no error either
    asker.send("msgWithdraw", {"responseChannel": "never-asked"})
    send_ask(asker, "ask-after", {**FORM, "message": "Still fine?"})
    window.expect_topic("msgElicitationTransferInvoke")  # the asker is still served (expiry: test_questions_unit)
    asker.send("msgWithdraw", {"responseChannel": "ask-after"})
    assert reply(asker, "ask-after") == {"answer": {"action": "cancel", "outcome": "withdrawn"}}
    assert not [m for m in asker.received if m[0] == "error"]


def test_an_asker_that_says_bye_withdraws_everything_it_asked(main: RunningMain, window: WirePeer) -> None:
    leaving = main.peer(name="leaving", role="asker")
    for index in range(3):
        send_ask(leaving, f"ask-{index}", {**FORM, "message": f"Question {index}"})
    channels = {window.expect_topic("msgElicitationTransferInvoke")["responseChannel"] for _ in range(3)}
    leaving.close()
    dismissed = {window.expect_topic("msgElicitationTransferDismiss")["responseChannel"] for _ in range(3)}
    assert dismissed == channels


@pytest.mark.parametrize(("params", "extra", "named"), [
    ({**FORM, "requestedSchema": {"type": "object", "properties": {"deep": {"type": "object"}}}},
     {}, "'deep'"),
    ({**FORM, "requestedSchema": {"type": "object",
                                  "properties": {"n": {"type": "integer", "minimum": "1"}}}},
     {}, "'n': minimum"),
    ({"mode": "voice", "message": "?"}, {}, "params.mode"),
    ({"mode": "url", "message": "Open?"}, {}, "params.url"),
    (FORM, {"timeoutSeconds": 0}, "timeoutSeconds"),
    (FORM, {"timeoutSeconds": 8 * 24 * 3600}, "7 days"),
])
def test_a_question_main_will_not_show_is_refused_with_32602_and_no_window_sees_it(
    asker: WirePeer, window: WirePeer, params: dict[str, Any], extra: dict[str, Any], named: str
) -> None:
    send_ask(asker, "ask-bad", params, **extra)
    error = reply(asker, "ask-bad")["error"]
    assert error["code"] == -32602 and named in error["message"], error
    send_ask(asker, "ask-good", {**FORM, "message": "The first one shown"})
    first = window.expect_topic("msgElicitationTransferInvoke")
    assert first["request"]["params"]["message"] == "The first one shown"
    asker.send("msgWithdraw", {"responseChannel": "ask-good"})
    assert reply(asker, "ask-good")["answer"]["outcome"] == "withdrawn"


def test_a_channel_with_an_open_question_is_refused_without_touching_it(
    asker: WirePeer, window: WirePeer
) -> None:
    send_ask(asker, "ask-dup", {**FORM, "message": "First"})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    send_ask(asker, "ask-dup", {**FORM, "message": "Second"})
    assert asker.expect_error("msgAsk")["code"] == "bad-body"
    window.answer(invoke, "decline")
    assert reply(asker, "ask-dup")["answer"] == {"action": "decline", "outcome": "decline"}


def test_a_remembered_answer_answers_the_same_question_again_with_no_window(
    main: RunningMain, asker: WirePeer, window: WirePeer
) -> None:
    question = {**FORM, "message": "Remember this tag?"}
    send_ask(asker, "ask-r1", question)
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    window.send(invoke["responseChannel"], {"action": "accept", "content": {"tag": "v2"},
                                            "remember": {"scope": "session"}})
    assert reply(asker, "ask-r1")["answer"]["content"] == {"tag": "v2"}
    window.close()
    send_ask(asker, "ask-r2", question)  # no window attached: the rule answers at once
    assert reply(asker, "ask-r2") == {"answer": {"action": "accept", "outcome": "accept", "content": {"tag": "v2"}}}
    remembered = [r for r in json.loads(main.cli("rules", "--json").stdout) if r["server"] == "deploy.sh"]
    assert [(r["kind"], r["message"]) for r in remembered] == [("answer", "Remember this tag?")]
    link = {"mode": "url", "url": "https://example.com/x", "message": "Remember this tag?"}
    send_ask(asker, "ask-r3", link)  # a link is never answered by a rule: it waits for a window
    asker.send("msgAsk", {"responseChannel": "sync", "params": {**FORM, "requestedSchema": {}}, "asker": ASKER})
    assert "error" in reply(asker, "sync")  # main has handled ask-r3 by now
    watcher = main.peer(name="second-window", hello=False)
    assert [p["request"]["params"]["mode"] for p in watcher.hello()["pending"]] == ["url"]
    asker.send("msgWithdraw", {"responseChannel": "ask-r3"})
    assert reply(asker, "ask-r3")["answer"]["outcome"] == "withdrawn"
    watcher.close()
