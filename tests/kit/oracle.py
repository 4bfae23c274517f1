"""What main must answer to a frame, worked out from the wire contract alone.

`expectation(frames, attached=..., answered=...)` gives the error codes the contract allows, the
topic the error must name, and whether main may stay silent, for a peer with role "renderer" (what
the fuzzers say they are); None for a frame that is valid and
would act (stop main, run a tool, detach the peer...), which a fuzzer must not send. Where the
contract leaves the order of two checks open, every code either order gives is allowed:

- an unwelcomed peer's garbage: bad-body or not-attached;
- a result with a malformed body: bad-body, or what its channel says (main may look the channel up
  before it decodes the body): unknown-channel, already-answered or not-recipient;
- a `rate-limited` error may stand for any frames main dropped (see `is_rate_limited`).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from kit import contract

ANY_TOPIC: Any = object()  # the error may name the frame's topic or none (frame not split into a topic)
_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {topic: msgspec.msgpack.Decoder(shape) for topic, shape in contract.SHAPES.items()}
_RESULT_DECODER = msgspec.msgpack.Decoder(contract.Result)


@dataclass(frozen=True, slots=True)
class Expect:
    codes: frozenset[str]  # error codes the contract allows; empty with `silent` = no answer at all
    topic: Any  # the `topic` the error must carry, or ANY_TOPIC
    silent: bool = False  # main may send nothing back (valid heartbeat, throttled bad hello)
    kind: str = ""  # what kind of frame this answers, for reports

    def accepts(self, body: Any) -> bool:
        return (isinstance(body, dict) and body.get("code") in self.codes
                and (self.topic is ANY_TOPIC or body.get("topic") == self.topic))


def is_rate_limited(body: Any) -> bool:
    """main dropped messages of this peer for sending too fast: some frames get no answer at all."""
    return isinstance(body, dict) and body.get("code") == "rate-limited"


def _channel_codes(topic: str, answered: frozenset[str]) -> frozenset[str]:
    if topic in answered:
        return frozenset({"already-answered", "not-recipient"})
    return frozenset({"unknown-channel"})


def _too_deep(body: bytes) -> bool:
    """The body nests deeper than the contract allows (bad-body), counted on its decoded value;
    a body too deep for msgpack to decode at all is."""
    if len(body) <= contract.MAX_NESTING_DEPTH:
        return False  # every level takes a byte
    try:
        stack = [(msgspec.msgpack.decode(body), 1)]
    except (msgspec.DecodeError, RecursionError):
        return True
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            children = [*value, *value.values()]
        elif isinstance(value, list | tuple):
            children = list(value)
        else:
            continue
        if level > contract.MAX_NESTING_DEPTH:
            return True
        stack.extend((child, level + 1) for child in children)
    return False


def _decode(topic: str, body: bytes) -> Any:
    decoder = _RESULT_DECODER if contract.is_result_channel(topic) else _DECODERS[topic]
    try:
        return decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def expectation(frames: Sequence[bytes], *, attached: bool, answered: frozenset[str],
                kind: str = "") -> Expect | None:
    """Main's answer to `frames` from a welcomed (`attached`) or unwelcomed peer, per the contract;
    `answered` holds the result channels already answered."""
    unwelcome = frozenset() if attached else frozenset({"not-attached"})
    if len(frames) != 2:
        return Expect(frozenset({"bad-body"}) | unwelcome, ANY_TOPIC, kind=kind)
    raw_topic, body = frames
    try:
        topic = raw_topic.decode("ascii")
    except UnicodeDecodeError:
        return Expect(frozenset({"unknown-topic", "bad-body"}) | unwelcome, ANY_TOPIC, kind=kind)
    is_result = contract.is_result_channel(topic)
    known = topic in contract.PEER_TOPICS or is_result
    if not topic or len(topic) > 200:  # main's sanity limit on topic length; the contract names none
        lenient = frozenset({"unknown-topic", "unknown-channel", "bad-body", "too-large"})
        return Expect(lenient | unwelcome, ANY_TOPIC, kind=kind)
    if len(body) > contract.MAX_BODY:
        return Expect(frozenset({"too-large"} | (set() if known else {"unknown-topic"})) | unwelcome, topic,
                      kind=kind)
    if not known:
        return Expect(frozenset({"unknown-topic"}) | unwelcome, topic, kind=kind)
    decoded = _decode(topic, body)
    if decoded is None:
        looked_up = _channel_codes(topic, answered) if is_result else frozenset()
        return Expect(frozenset({"bad-body"}) | unwelcome | looked_up, topic, kind=kind)
    deep = frozenset({"bad-body"}) if _too_deep(body) else frozenset()
    if isinstance(decoded, contract.Hello):
        # Refused (the token is never main's); a welcomed peer stays attached; repeats are throttled.
        code = "bad-protocol" if decoded.protocol != 1 else "bad-token"
        if max(len(decoded.token), len(decoded.window), len(decoded.name)) > contract.MAX_ID_CHARS:
            deep = frozenset({"bad-body"})  # ids and names are at most 200 characters
        return Expect(frozenset({code}) | deep, topic, silent=True, kind=kind)
    if not attached:
        return Expect(frozenset({"not-attached"}) | deep, topic, kind=kind)
    if topic == contract.HEARTBEAT:
        return Expect(deep, topic, silent=True, kind=kind)
    if is_result:
        code = "already-answered" if topic in answered else "unknown-channel"
        return Expect(frozenset({code}) | deep, topic, kind=kind)
    if topic in contract.CONTROLLER_TOPICS:  # the oracle's peer is a window: refused whatever the body
        return Expect(frozenset({"bad-body"}), topic, kind=kind)
    if topic == contract.CANCEL_CALL:  # names none of the sender's calls in flight: ignored
        bad_name = frozenset() if contract.is_good_channel(decoded.response_channel) else frozenset({"bad-body"})
        return Expect(deep | bad_name, topic, silent=True, kind=kind)
    return None  # an acting topic with a valid body
