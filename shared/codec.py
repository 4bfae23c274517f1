"""Frames <-> messages. The only place bytes become typed messages, and messages bytes.

A DEALER sees every message as `[topic, body]`. Decoding never raises anything but
`ProtocolError`, whose `code` is the contract's error code, so a receive loop can report it and
go on. main splits a frame first (`split_from_peer`) and decodes the body only once it knows the
topic is worth it (`decode_peer_body`): a result for a channel that does not exist, or from a peer
it was not sent to, is refused without reading its body.
"""

from typing import Any

import msgspec

from shared import channels, messages
from shared.errors import ProtocolError, UndeliverableRequestError, WireCode

DEFAULT_MAX_BODY_BYTES = 1 << 20
MAX_TOPIC_CHARS = 200
MAIN_MAX_BODY_BYTES = 64 * DEFAULT_MAX_BODY_BYTES  # what peers accept from main

_encoder = msgspec.msgpack.Encoder()

_PEER_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {
    channels.HELLO: msgspec.msgpack.Decoder(messages.Hello),
    channels.HEARTBEAT: msgspec.msgpack.Decoder(messages.Heartbeat),
    channels.BYE: msgspec.msgpack.Decoder(messages.Bye),
    channels.CALL_TOOL: msgspec.msgpack.Decoder(messages.CallTool),
    channels.STATUS: msgspec.msgpack.Decoder(messages.StatusRequest),
    channels.SHUTDOWN: msgspec.msgpack.Decoder(messages.Shutdown),
    channels.SERVER_CONTROL: msgspec.msgpack.Decoder(messages.ServerControl),
    channels.RELOAD: msgspec.msgpack.Decoder(messages.Reload),
    channels.SERVER_POLICY: msgspec.msgpack.Decoder(messages.ServerPolicy),
    channels.MCP_REQUEST: msgspec.msgpack.Decoder(messages.McpRequest),
    channels.AUTH: msgspec.msgpack.Decoder(messages.AuthRequest),
    channels.SIGN_IN_REDIRECT: msgspec.msgpack.Decoder(messages.SignInRedirect),
    channels.RULES: msgspec.msgpack.Decoder(messages.RulesRequest),
    channels.REVOKE_RULES: msgspec.msgpack.Decoder(messages.RevokeRules),
    channels.ASK: msgspec.msgpack.Decoder(messages.Ask),
    channels.WITHDRAW: msgspec.msgpack.Decoder(messages.Withdraw),
    channels.HOST_INFO: msgspec.msgpack.Decoder(messages.HostInfo),
    channels.CANCEL_CALL: msgspec.msgpack.Decoder(messages.CancelCall),
    channels.MCP_RELAY: msgspec.msgpack.Decoder(messages.McpRelay),
    channels.MCP_CLOSE: msgspec.msgpack.Decoder(messages.McpClose),
}
_RESULT_DECODER = msgspec.msgpack.Decoder(messages.ElicitationResult)

_MAIN_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {
    channels.WELCOME: msgspec.msgpack.Decoder(messages.Welcome),
    channels.HEARTBEAT: msgspec.msgpack.Decoder(messages.Heartbeat),
    channels.INVOKE: msgspec.msgpack.Decoder(messages.ElicitationInvoke),
    channels.DISMISS: msgspec.msgpack.Decoder(messages.ElicitationDismiss),
    channels.COMPLETE: msgspec.msgpack.Decoder(messages.ElicitationComplete),
    channels.SERVERS: msgspec.msgpack.Decoder(messages.ServersUpdate),
    channels.ERROR: msgspec.msgpack.Decoder(messages.ErrorNotice),
    channels.PEERS: msgspec.msgpack.Decoder(messages.PeersUpdate),
    channels.NOTICE: msgspec.msgpack.Decoder(messages.Notice),
    channels.RULES_UPDATE: msgspec.msgpack.Decoder(messages.RulesUpdate),
    channels.PROGRESS: msgspec.msgpack.Decoder(messages.Progress),
    channels.LIST_CHANGED: msgspec.msgpack.Decoder(messages.ListChanged),
    channels.MCP_RELAY: msgspec.msgpack.Decoder(messages.McpRelay),
    channels.MCP_CLOSE: msgspec.msgpack.Decoder(messages.McpClose),
}
_REPLY_DECODER = msgspec.msgpack.Decoder(messages.ChannelReply)


def encode(topic: str, body: messages.Body) -> list[bytes]:
    """The two frames a DEALER sends or receives for one message (bodies main built itself)."""
    return [topic.encode("ascii"), _encoder.encode(body)]


def encode_request(topic: str, body: messages.Body, max_bytes: int) -> list[bytes]:
    """Encode a body that carries someone else's data (a server's request), or say why it can't go.

    Raises UndeliverableRequestError when a value has no msgpack form (an integer beyond 64 bits)
    or the body is over `max_bytes`: the caller refuses the request before anyone waits on it.
    """
    try:
        raw = _encoder.encode(body)
    except (OverflowError, TypeError, ValueError, msgspec.EncodeError) as exc:
        raise UndeliverableRequestError(f"it holds a value the wire cannot carry ({exc})") from None
    if len(raw) > max_bytes:
        raise UndeliverableRequestError(f"it is {len(raw):,} bytes, over the limit of {max_bytes:,} "
                                        "(maxRequestBytes)")
    return [topic.encode("ascii"), raw]


class _WelcomeFrames(messages.Body):
    """`welcome` with its pending invokes already encoded (same fields and order as Welcome)."""

    session: str
    window: str
    servers: list[messages.ServerInfo]
    pending: list[msgspec.Raw]
    pending_channels: list[str] | None = None
    max_message_bytes: int | None = None


def encode_welcome(welcome: messages.Welcome, encoded_pending: list[bytes]) -> list[bytes]:
    """`welcome` whose `pending` are invoke bodies encoded earlier (so this cannot fail on them)."""
    body = _WelcomeFrames(session=welcome.session, window=welcome.window, servers=welcome.servers,
                          pending=[msgspec.Raw(raw) for raw in encoded_pending],
                          pending_channels=welcome.pending_channels,
                          max_message_bytes=welcome.max_message_bytes)
    return [channels.WELCOME.encode("ascii"), _encoder.encode(body)]


def _decode_topic(raw: bytes) -> str:
    try:
        topic = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ProtocolError(WireCode.UNKNOWN_TOPIC, "topic is not ASCII") from None
    if not topic or len(topic) > MAX_TOPIC_CHARS:
        raise ProtocolError(WireCode.UNKNOWN_TOPIC, f"topic is empty or longer than {MAX_TOPIC_CHARS} characters")
    return topic


def _decode_body(decoder: msgspec.msgpack.Decoder[Any], topic: str, raw: bytes) -> Any:
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(WireCode.BAD_BODY, f"body of {topic!r} does not match the contract: {exc}",
                            topic) from None
    except RecursionError:
        # A few KB of nested msgpack can exhaust the stack; it is malformed, not fatal.
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
    return _decode_body(_PEER_DECODERS.get(topic, _RESULT_DECODER), topic, raw)


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
    return topic, _decode_body(decoder, topic, raw)
