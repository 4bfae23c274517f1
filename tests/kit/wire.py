"""Frames as the contract spells them: `[topic (ASCII), body (msgpack map)]`, and the hello."""

from typing import Any

import msgspec

from kit import contract

encode = msgspec.msgpack.Encoder().encode
decode = msgspec.msgpack.Decoder().decode
PROTOCOL = 1


def frames(topic: str, body: Any) -> list[bytes]:
    return [topic.encode("ascii"), encode(body)]


def hello_body(token: str, window: str, name: str, role: str = "renderer", protocol: int = PROTOCOL) -> dict[str, Any]:
    """The first message every peer sends: protocol, main's token, and who it is."""
    return {"protocol": protocol, "token": token, "window": window, "name": name, "role": role}


def hello_frames(token: str, window: str, name: str, role: str = "renderer",
                 protocol: int = PROTOCOL) -> list[bytes]:
    return frames(contract.HELLO, hello_body(token, window, name, role, protocol))


def decode_frames(raw: list[bytes]) -> tuple[str, Any]:
    """(topic, body) of a message from main; ("<bad-frames>", {"count": n}) if it is not two frames."""
    if len(raw) != 2:
        return "<bad-frames>", {"count": len(raw)}
    return raw[0].decode("ascii", errors="replace"), decode(raw[1])
