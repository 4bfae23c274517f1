"""Frames <-> messages. The only place bytes become typed messages.

A DEALER sees every message as `[topic, body]`. Decoding never raises anything but
`ProtocolError`, whose `code` is the contract's error code, so a receive loop can report it
and go on.
"""

from typing import Any

import msgspec

from shared import channels, messages
from shared.errors import ProtocolError

DEFAULT_MAX_BODY_BYTES = 1 << 20

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
}
_REPLY_DECODER = msgspec.msgpack.Decoder(messages.ChannelReply)


def encode(topic: str, body: messages.Body) -> list[bytes]:
    """The two frames a DEALER sends or receives for one message."""
    return [topic.encode("ascii"), _encoder.encode(body)]


def _decode_topic(raw: bytes) -> str:
    try:
        topic = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ProtocolError("unknown-topic", "topic is not ASCII") from None
    if not topic or len(topic) > 200:
        raise ProtocolError("unknown-topic", "topic is empty or longer than 200 characters")
    return topic


def _decode_body(decoder: msgspec.msgpack.Decoder[Any], topic: str, raw: bytes) -> Any:
    try:
        return decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError("bad-body", f"body of {topic!r} does not match the contract: {exc}", topic) from None
    except RecursionError:
        # A few KB of nested msgpack can exhaust the stack; it is malformed, not fatal.
        raise ProtocolError("bad-body", f"body of {topic!r} is nested too deeply", topic) from None


def _split(frames: list[bytes], max_body_bytes: int) -> tuple[str, bytes]:
    if len(frames) != 2:
        raise ProtocolError("bad-body", f"expected 2 frames [topic, body], got {len(frames)}")
    topic = _decode_topic(frames[0])
    if len(frames[1]) > max_body_bytes:
        raise ProtocolError("too-large", f"body is {len(frames[1])} bytes, limit is {max_body_bytes}", topic)
    return topic, frames[1]


def decode_from_peer(
    frames: list[bytes], max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> tuple[str, messages.PeerBody]:
    """Decode what a peer sent main (frames after the routing id)."""
    topic, raw = _split(frames, max_body_bytes)
    decoder = _PEER_DECODERS.get(topic)
    if decoder is None:
        if not channels.is_result_channel(topic):
            raise ProtocolError("unknown-topic", f"no channel named {topic!r}", topic)
        decoder = _RESULT_DECODER
    return topic, _decode_body(decoder, topic, raw)


def decode_from_main(
    frames: list[bytes], max_body_bytes: int = 64 * DEFAULT_MAX_BODY_BYTES
) -> tuple[str, messages.MainBody]:
    """Decode what main sent a peer; any topic not fixed by the contract is a reply channel."""
    topic, raw = _split(frames, max_body_bytes)
    decoder = _MAIN_DECODERS.get(topic, _REPLY_DECODER)
    return topic, _decode_body(decoder, topic, raw)
