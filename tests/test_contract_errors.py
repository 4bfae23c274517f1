"""Everything main refuses, with the contract's error codes, and what stays intact afterwards."""

import json
import uuid

from kit.main import RunningMain


def echo_works(main: RunningMain, peer_name: str = "checker") -> None:
    peer = main.peer(name=peer_name)
    reply = peer.expect_topic(peer.call_tool("demo", "echo", {"text": "still here"}))
    assert reply["result"]["content"][0]["text"] == "still here"


def test_bad_token_and_bad_protocol_are_refused_and_the_peer_stays_unattached(demo_main: RunningMain) -> None:
    intruder = demo_main.peer(name="intruder", hello=False)
    assert intruder.hello(token="00" * 32)["code"] == "bad-token"
    assert intruder.received[-1] == ("error", {"code": "bad-token", "message": intruder.received[-1][1]["message"],
                                               "topic": "hello"})
    intruder.hello(protocol=2)
    assert intruder.received[-1][1]["code"] == "bad-protocol"
    intruder.call_tool("demo", "echo", {"text": "sneaky"})
    assert intruder.expect_error("msgMcpCallTool")["code"] == "not-attached"


def test_repeated_bad_hellos_are_throttled(demo_main: RunningMain) -> None:
    intruder = demo_main.peer(name="guesser", hello=False)
    for _ in range(3):
        assert intruder.hello(token="11" * 32)["code"] == "bad-token"
    intruder.send_hello(token="22" * 32)
    intruder.send("heartbeat", {})  # answered (not-attached) only if main still talks to this peer
    error = intruder.expect_error()
    assert error["topic"] == "heartbeat", "the fourth bad hello should have been ignored"


def test_malformed_frames_get_errors_and_never_detach_a_welcomed_peer(demo_main: RunningMain) -> None:
    peer = demo_main.peer()
    peer.send("noSuchTopic", {})
    assert peer.expect_error("noSuchTopic")["code"] == "unknown-topic"
    peer.send_raw([b"msgMcpCallTool", b"\xc1\xff garbage"])
    assert peer.expect_error("msgMcpCallTool")["code"] == "bad-body"
    peer.send("msgMcpCallTool", {"server": 1, "tool": ["x"]})  # valid msgpack, wrong shape
    assert peer.expect_error("msgMcpCallTool")["code"] == "bad-body"
    peer.send_raw([b"heartbeat", b"\x80", b"extra frame"])
    assert peer.expect_error()["code"] == "bad-body"
    peer.send_raw([b"heartbeat", b"\x80" + b"\x00" * (2 << 20)])
    assert peer.expect_error("heartbeat")["code"] == "too-large"
    # Still attached: a normal call from the same peer works.
    reply = peer.expect_topic(peer.call_tool("demo", "echo", {"text": "ok"}))
    assert reply["result"]["content"][0]["text"] == "ok"


def test_results_are_checked_for_channel_sender_content_and_once_only(demo_main: RunningMain) -> None:
    window = demo_main.peer(name="window-a")
    other = demo_main.peer(name="window-b")
    controller = demo_main.peer(name="ctl", role="controller")
    call = window.call_tool("demo", "book_table", {})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    assert other.expect_topic("msgElicitationTransferInvoke") == invoke

    window.send(f"msgElicitationTransferResult-{uuid.uuid4()}", {"action": "accept", "content": {}})
    assert window.expect_error()["code"] == "unknown-channel"

    controller.answer(invoke, "accept", {"name": "Mallory", "party_size": 1})
    assert controller.expect_error(invoke["responseChannel"])["code"] == "not-recipient"

    window.answer(invoke, "accept", {"name": "Eve", "party_size": "four"})
    error = window.expect_error(invoke["responseChannel"])
    assert error["code"] == "invalid-content" and "party_size" in error["message"]
    window.answer(invoke, "accept", {"name": "Eve", "party_size": 2, "extra": True})
    assert window.expect_error(invoke["responseChannel"])["code"] == "invalid-content"
    window.answer(invoke, "accept", {"party_size": 2})
    assert window.expect_error(invoke["responseChannel"])["code"] == "invalid-content"

    # The refused answers left it pending; the first valid answer wins, in either window.
    other.answer(invoke, "accept", {"name": "Bob", "party_size": 3})
    expected_dismiss = {"responseChannel": invoke["responseChannel"], "reason": "answered", "by": other.window}
    assert window.expect_topic("msgElicitationTransferDismiss") == expected_dismiss
    assert other.expect_topic("msgElicitationTransferDismiss") == expected_dismiss
    window.answer(invoke, "accept", {"name": "Late", "party_size": 5})
    assert window.expect_error(invoke["responseChannel"])["code"] == "already-answered"

    result = window.expect_topic(call)["result"]
    assert json.loads(result["content"][0]["text"]) == {"action": "accept",
                                                        "content": {"name": "Bob", "party_size": 3}}


def test_a_flood_of_garbage_does_not_stop_main_serving_others(demo_main: RunningMain) -> None:
    attacker = demo_main.peer(name="attacker")
    for i in range(2000):
        attacker.send_raw([bytes([i % 256]) * (i % 7 + 1), bytes(range(i % 50))])
    echo_works(demo_main)
    assert demo_main.proc.poll() is None
