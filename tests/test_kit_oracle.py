"""The kit's contract oracle: what it expects main to answer, including where it allows either of
two orders of main's checks (so main may reorder them without the fuzzers changing)."""

import random
import re
from pathlib import Path

import pytest
from kit import wire
from kit.contract import ACTING_TOPICS, CONTRACT_CODES, PEER_TOPICS, RESULT_PREFIX, SHAPES
from kit.frames import VALID_BODIES, FrameGen
from kit.oracle import ANY_TOPIC, Expect, expectation, is_rate_limited

UNKNOWN = RESULT_PREFIX + "0190f0e4-7d4c-7c4e-9a38-6f1d2b9b1a01"
ANSWERED = RESULT_PREFIX + "0190f0e4-7d4c-7c4e-9a38-6f1d2b9b1a02"


def expect(topic: str, body: object, *, attached: bool = True) -> Expect | None:
    return expectation([topic.encode(), wire.encode(body)], attached=attached, answered=frozenset({ANSWERED}))


@pytest.mark.parametrize("topic", ACTING_TOPICS)
def test_a_valid_body_of_an_acting_topic_is_never_fuzzed(topic: str) -> None:
    assert expect(topic, VALID_BODIES[topic]) is None


def test_an_unwelcomed_peer_gets_not_attached() -> None:
    answer = expect("msgMcpCallTool", VALID_BODIES["msgMcpCallTool"], attached=False)
    assert answer is not None and answer.codes == {"not-attached"} and answer.topic == "msgMcpCallTool"


def test_a_malformed_result_may_get_its_channels_code_or_bad_body() -> None:
    unknown = expect(UNKNOWN, {"action": "maybe"})
    answered = expect(ANSWERED, {"action": "maybe"})
    assert unknown is not None and unknown.codes == {"bad-body", "unknown-channel"}
    assert answered is not None and answered.codes == {"bad-body", "already-answered", "not-recipient"}


def test_a_well_formed_result_gets_its_channels_code_only() -> None:
    unknown = expect(UNKNOWN, {"action": "decline"})
    answered = expect(ANSWERED, {"action": "decline"})
    assert unknown is not None and unknown.codes == {"unknown-channel"}
    assert answered is not None and answered.codes == {"already-answered"}


def test_msg_mcp_request_with_a_method_outside_the_read_only_set_is_bad_body() -> None:
    answer = expect("msgMcpRequest", {"server": "demo", "method": "tools/call", "responseChannel": "r"})
    assert answer is not None and answer.codes == {"bad-body"}


def test_a_wrong_token_is_refused_and_may_be_throttled() -> None:
    answer = expect("hello", {**VALID_BODIES["hello"], "token": "00" * 32})
    assert answer is not None and answer.codes == {"bad-token"} and answer.silent


def test_a_message_of_other_than_two_frames_is_bad_body_naming_no_topic() -> None:
    answer = expectation([b"hello"], attached=True, answered=frozenset())
    assert answer is not None and answer.topic is ANY_TOPIC and answer.codes == {"bad-body"}


def test_main_may_say_it_dropped_messages_or_is_full() -> None:
    assert {"rate-limited", "too-many-peers"} <= CONTRACT_CODES
    assert is_rate_limited({"code": "rate-limited", "message": "slow down"})


def test_frames_are_reproducible_from_a_seed() -> None:
    one, two = FrameGen(random.Random(7), [ANSWERED]), FrameGen(random.Random(7), [ANSWERED])
    assert [one.frames() for _ in range(200)] == [two.frames() for _ in range(200)]


def test_the_kit_knows_every_topic_protocol_md_lists_for_peers() -> None:
    """Section 5's table (peer -> main) names exactly the topics the kit's shapes, oracle and fuzz know."""
    text = (Path(__file__).resolve().parent.parent / "shared" / "PROTOCOL.md").read_text()
    section = text.split("## 5. Topics, peer → main", 1)[1].split("\n## ", 1)[0]
    listed = {match for match in re.findall(r"^\| `([A-Za-z]+)`", section, re.MULTILINE)}
    assert len(listed) > 15, listed  # the table was found
    assert listed == set(PEER_TOPICS) == set(SHAPES), listed ^ set(PEER_TOPICS)
    generated = FrameGen(random.Random(3), [ANSWERED])
    sent = {topic for topic in (generated.frames()[1][0] for _ in range(20_000)) if topic.isascii()}
    assert {topic.encode() for topic in PEER_TOPICS} <= sent  # the fuzz reaches each of them


def test_a_topic_main_no_longer_takes_is_unknown_and_a_cancel_naming_no_call_is_ignored() -> None:
    host_info = expect("msgHostInfo", {"name": "Claude Desktop", "formElicitation": True})  # §13's, removed
    assert host_info is not None and host_info.codes == {"unknown-topic"} and not host_info.silent
    cancel = expect("msgCancelCall", {"responseChannel": "call-1"})
    assert cancel is not None and cancel.silent and not cancel.codes
    misnamed = expect("msgCancelCall", {"responseChannel": "heartbeat"})
    assert misnamed is not None and misnamed.silent and misnamed.codes == {"bad-body"}


def test_a_controller_topic_from_a_window_is_bad_body_even_with_a_valid_body() -> None:
    answer = expect("msgAudit", VALID_BODIES["msgAudit"])
    assert answer is not None and answer.codes == {"bad-body"} and answer.topic == "msgAudit"
