"""Frames <-> messages. The only place bytes become typed messages, and messages bytes.

A DEALER sees every message as `[topic, body]`. Decoding never raises anything but
`ProtocolError`, whose `code` is the contract's error code, so a receive loop can report it and
go on. main splits a frame first (`split_from_peer`) and decodes the body only once it knows the
topic is worth it (`decode_peer_body`): a result for a channel that does not exist, or from a peer
it was not sent to, is refused without reading its body.

How deep a body nests is bounded here, before msgspec sees it, not left to msgspec: whether its
recursion runs out depends on the Python version (3.13 decodes 5,000 levels that 3.12 refuses), and
everything that later walks a body (validation, the window's tree) relies on the bound.
"""

import msgspec

from shared import channels, messages
from shared.errors import ProtocolError, UndeliverableRequestError, WireCode

DEFAULT_MAX_BODY_BYTES = 1 << 20
MAX_TOPIC_CHARS = 200
MAIN_MAX_BODY_BYTES = 64 * DEFAULT_MAX_BODY_BYTES  # what peers accept from main
# Levels of maps and arrays, the body's own map being level 1. Real MCP payloads (JSON Schemas,
# tool arguments, structuredContent) nest a few dozen levels at most; 128 leaves them room and stays
# far below where any recursion (msgspec's, json's, repr's, the window's tree) gets near a limit.
MAX_NESTING_DEPTH = 128
# What peers accept from main: main wraps data checked against MAX_NESTING_DEPTH in levels of its
# own (a welcome's pending invokes, a host's arguments inside an approval) and passes on servers'
# results, whose JSON the MCP SDK already refuses past 200 levels.
MAIN_MAX_NESTING_DEPTH = 256

_encoder = msgspec.msgpack.Encoder()

# One decoder per fixed topic, each way, as shared/channels.py's table says; any other topic is a
# result channel (to main) or a response channel (to a peer).
_PEER_DECODERS: dict[str, msgspec.msgpack.Decoder[messages.PeerBody]] = {
    name: msgspec.msgpack.Decoder(topic.body) for name, topic in channels.TO_MAIN.items()}
_RESULT_DECODER: msgspec.msgpack.Decoder[messages.PeerBody] = msgspec.msgpack.Decoder(channels.RESULT_BODY)
_MAIN_DECODERS: dict[str, msgspec.msgpack.Decoder[messages.MainBody]] = {
    name: msgspec.msgpack.Decoder(topic.body) for name, topic in channels.TO_PEER.items()}
_REPLY_DECODER: msgspec.msgpack.Decoder[messages.MainBody] = msgspec.msgpack.Decoder(channels.REPLY_BODY)


def encode(topic: str, body: messages.Body) -> list[bytes]:
    """The two frames a DEALER sends or receives for one message (bodies main built itself)."""
    return [topic.encode("ascii"), _encoder.encode(body)]


def encode_request(topic: str, body: messages.Body, max_bytes: int) -> list[bytes]:
    """Encode a body that carries someone else's data (a server's request), or say why it can't go.

    Raises UndeliverableRequestError when a value has no msgpack form (an integer beyond 64 bits),
    the body is over `max_bytes`, or it nests deeper than MAX_NESTING_DEPTH (main would refuse it
    from a peer; an invoke that deep would not fit a welcome's limit once wrapped): the caller
    refuses the request before anyone waits on it.
    """
    try:
        raw = _encoder.encode(body)
    except (OverflowError, TypeError, ValueError, msgspec.EncodeError, RecursionError) as exc:
        raise UndeliverableRequestError(f"it holds a value the wire cannot carry ({exc})") from None
    if len(raw) > max_bytes:
        raise UndeliverableRequestError(f"it is {len(raw):,} bytes, over the limit of {max_bytes:,} "
                                        "(maxRequestBytes)")
    if nested_deeper_than(raw, MAX_NESTING_DEPTH):
        raise UndeliverableRequestError(f"it is nested deeper than {MAX_NESTING_DEPTH} levels")
    return [topic.encode("ascii"), raw]


class _WelcomeFrames(messages.Body):
    """`welcome` with its pending invokes already encoded (same fields and order as Welcome)."""

    session: str
    window: str
    servers: list[messages.ServerInfo]
    pending: list[msgspec.Raw]
    pending_channels: list[str] | None = None
    max_message_bytes: int | None = None
    peers: list[messages.PeerInfo] | None = None


def encode_welcome(welcome: messages.Welcome, encoded_pending: list[bytes]) -> list[bytes]:
    """`welcome` whose `pending` are invoke bodies encoded earlier (so this cannot fail on them)."""
    body = _WelcomeFrames(session=welcome.session, window=welcome.window, servers=welcome.servers,
                          pending=[msgspec.Raw(raw) for raw in encoded_pending],
                          pending_channels=welcome.pending_channels,
                          max_message_bytes=welcome.max_message_bytes, peers=welcome.peers)
    return [channels.WELCOME.encode("ascii"), _encoder.encode(body)]


def _decode_topic(raw: bytes) -> str:
    try:
        topic = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ProtocolError(WireCode.UNKNOWN_TOPIC, "topic is not ASCII") from None
    if not topic or len(topic) > MAX_TOPIC_CHARS:
        raise ProtocolError(WireCode.UNKNOWN_TOPIC, f"topic is empty or longer than {MAX_TOPIC_CHARS} characters")
    return topic


# ---- nesting depth ------------------------------------------------------------------------------

# Every map or array header byte: fixmap, fixarray, array 16/32, map 16/32. A body nested D deep
# holds at least D of them, so counting them (one C call) clears almost every body at once.
_CONTAINER_BYTES = bytes([*range(0x80, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])
# First bytes 0xc0-0xdf: (bytes that follow whatever the value, width of a big-endian length or
# count after those, kind: 0 a scalar whose length is skipped, 1 an array, 2 a map, -1 never used).
_C0_FORMATS: tuple[tuple[int, int, int], ...] = (
    (0, 0, 0), (0, 0, -1), (0, 0, 0), (0, 0, 0),  # nil, (never used), false, true
    (0, 1, 0), (0, 2, 0), (0, 4, 0),  # bin 8/16/32
    (1, 1, 0), (1, 2, 0), (1, 4, 0),  # ext 8/16/32: the length, a type byte, the data
    (4, 0, 0), (8, 0, 0),  # float 32/64
    (1, 0, 0), (2, 0, 0), (4, 0, 0), (8, 0, 0),  # uint 8/16/32/64
    (1, 0, 0), (2, 0, 0), (4, 0, 0), (8, 0, 0),  # int 8/16/32/64
    (2, 0, 0), (3, 0, 0), (5, 0, 0), (9, 0, 0), (17, 0, 0),  # fixext 1/2/4/8/16
    (0, 1, 0), (0, 2, 0), (0, 4, 0),  # str 8/16/32
    (0, 2, 1), (0, 4, 1),  # array 16/32
    (0, 2, 2), (0, 4, 2),  # map 16/32
)
_ONE_BYTE_SCALARS = bytes([*range(0x80), 0xC0, 0xC2, 0xC3, *range(0xE0, 0x100)])
# Size of a value its first byte alone fixes (floats, ints of one width, one-byte scalars), else 0.
_FIXED_SIZES = bytes(1 if b in _ONE_BYTE_SCALARS else 5 if b in (0xCA, 0xCE, 0xD2)
                     else 9 if b in (0xCB, 0xCF, 0xD3) else 2 if b in (0xCC, 0xD0)
                     else 3 if b in (0xCD, 0xD1) else 0 for b in range(256))
_WALK_FIRST_BYTES = 4096
_UNBOUNDED = 1 << 62  # more values than any body of up to 64 MiB can announce


def nested_deeper_than(raw: bytes, limit: int) -> bool:
    """Whether the msgpack value `raw` has maps or arrays nested more than `limit` levels deep.

    Never recursive, never raises: a truncated or malformed value is left to the decoder to report
    (what was read of it up to there still counts)."""
    size = len(raw)
    if size <= limit:
        return False  # every level takes a byte
    if size >= _WALK_FIRST_BYTES:
        # A big body is mostly a few long strings (a file, an image): reading their headers takes
        # microseconds where counting container bytes reads every byte. Tried on a budget a
        # fraction of that count's cost, so a body of many small values loses little.
        verdict = _walk(raw, limit, size >> 8)
        if verdict is not None:
            return verdict
    # Deleting the 36 container values sets up faster than deleting the other 220.
    if size - len(raw.translate(None, _CONTAINER_BYTES)) <= limit:
        return False
    return _walk(raw, limit, _UNBOUNDED) is True


def _walk(raw: bytes, limit: int, max_values: int) -> bool | None:
    """Read one msgpack value header by header (str, bin and ext payloads skipped by their lengths)
    and say whether it nests deeper than `limit`; None once its containers announce more than
    `max_values` values."""
    parents: list[int] = []  # `left` of each enclosing container
    depth = 0
    left = 1  # values still to read in the innermost open container (at first: the body itself)
    pos = 0
    end = len(raw)
    while pos < end:
        b = raw[pos]
        pos += 1
        left -= 1
        if b < 0x80 or b >= 0xE0:  # fixints
            pass
        elif b < 0xA0:  # fixmap, fixarray
            if depth >= limit:
                return True
            n = b & 0x0F
            if n:
                if b < 0x90:
                    n *= 2  # a map's keys and values
                max_values -= n
                if max_values < 0:
                    return None
                parents.append(left)
                left = n
                depth += 1
                continue
        elif b < 0xC0:  # fixstr
            pos += b & 0x1F
        else:
            fixed, width, kind = _C0_FORMATS[b - 0xC0]
            if kind < 0:
                return False
            length = int.from_bytes(raw[pos:pos + width]) if width else 0
            pos += width
            if kind:
                if depth >= limit:
                    return True
                length *= kind
                if kind == 1 and length:
                    skip = _scalar_run(raw, pos, length)
                    if skip:
                        pos += skip
                        length = 0
                if length:
                    max_values -= length
                    if max_values < 0:
                        return None
                    parents.append(left)
                    left = length
                    depth += 1
                    continue
            else:
                pos += fixed + length
        while not left:  # that value completed its container, and maybe that one its own
            if not depth:
                return False
            left = parents.pop()
            depth -= 1
    return False


def _scalar_run(raw: bytes, pos: int, count: int) -> int:
    """The bytes `count` values from `pos` take when they are all one-byte scalars, or all of one
    fixed-size format (an array of floats, of ints of one width), in a C call or two; else 0."""
    size = _FIXED_SIZES[raw[pos]] if pos < len(raw) else 0
    if not size or pos + size * count > len(raw):
        return 0
    if size == 1:
        return 0 if raw[pos:pos + count].translate(None, _ONE_BYTE_SCALARS) else count
    return size * count if raw[pos:pos + size * count:size].count(raw[pos]) == count else 0


def _decode_body[T](decoder: msgspec.msgpack.Decoder[T], topic: str, raw: bytes, max_depth: int) -> T:
    if len(raw) > max_depth and nested_deeper_than(raw, max_depth):  # (the length spares small bodies a call)
        raise ProtocolError(WireCode.BAD_BODY, f"body of {topic!r} is nested deeper than {max_depth} levels",
                            topic)
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(WireCode.BAD_BODY, f"body of {topic!r} does not match the contract: {exc}",
                            topic) from None
    except RecursionError:
        # Not reachable past the depth check on today's Pythons; should msgspec ever recurse
        # deeper per level, a body that exhausts it is still malformed, not fatal.
        raise ProtocolError(WireCode.BAD_BODY, f"body of {topic!r} is nested too deeply", topic) from None


def _split(frames: list[bytes], max_body_bytes: int) -> tuple[str, bytes]:
    if len(frames) != 2:
        raise ProtocolError(WireCode.BAD_BODY, f"expected 2 frames [topic, body], got {len(frames)}")
    topic = _decode_topic(frames[0])
    if len(frames[1]) > max_body_bytes:
        raise ProtocolError(WireCode.TOO_LARGE, f"body is {len(frames[1])} bytes, limit is {max_body_bytes}",
                            topic)
    return topic, frames[1]


def split_from_peer(frames: list[bytes], max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> tuple[str, bytes]:
    """The topic of what a peer sent main (frames after the routing id) and its undecoded body.

    Raises ProtocolError for a wrong frame count, a bad topic, an oversized body, or a topic that is
    neither a fixed channel nor a result channel."""
    topic, raw = _split(frames, max_body_bytes)
    if topic not in _PEER_DECODERS and not channels.is_result_channel(topic):
        raise ProtocolError(WireCode.UNKNOWN_TOPIC, f"no channel named {topic!r}", topic)
    return topic, raw


def decode_peer_body(topic: str, raw: bytes) -> messages.PeerBody:
    """The typed body of a topic `split_from_peer` returned."""
    return _decode_body(_PEER_DECODERS.get(topic, _RESULT_DECODER), topic, raw, MAX_NESTING_DEPTH)


def decode_from_peer(
    frames: list[bytes], max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> tuple[str, messages.PeerBody]:
    """Split and decode in one step (for peers and tests; main splits first)."""
    topic, raw = split_from_peer(frames, max_body_bytes)
    return topic, decode_peer_body(topic, raw)


def decode_from_main(
    frames: list[bytes], max_body_bytes: int = MAIN_MAX_BODY_BYTES
) -> tuple[str, messages.MainBody]:
    """Decode what main sent a peer; any topic not fixed by the contract is a reply channel."""
    topic, raw = _split(frames, max_body_bytes)
    decoder = _MAIN_DECODERS.get(topic, _REPLY_DECODER)
    return topic, _decode_body(decoder, topic, raw, MAIN_MAX_NESTING_DEPTH)
