"""Malformed frames of every kind for fuzzing main, reproducible from a seed.

`FrameGen(rng, answered).frames()` gives (kind, frames): wrong frame counts, garbage bytes, valid
msgpack of the wrong shape, near-valid bodies, unknown topics, forged results (on random channels
and on already answered ones), mutated valid bodies, deep nesting and stale hellos; `oversized()`
gives a body just over the contract's limit. Some frames turn out valid for an acting topic: ask
`oracle.expectation` before sending each one.
"""

import random
import uuid
from collections.abc import Sequence
from typing import Any

from kit import contract, wire

VALID_BODIES: dict[str, Any] = {
    contract.HELLO: {"protocol": 1, "token": "ab" * 32, "window": "0190f0e4-7d4c-7c4e-9a38-6f1d2b9b1a01",
                     "name": "x", "role": "renderer"},
    contract.HEARTBEAT: {},
    contract.BYE: {},
    contract.CALL_TOOL: {"server": "nope", "tool": "echo", "arguments": {"text": "x"}, "responseChannel": "r"},
    contract.MCP_REQUEST: {"server": "nope", "method": "tools/list", "params": {}, "responseChannel": "r"},
    contract.STATUS: {"responseChannel": "r"},
    contract.SHUTDOWN: {},
    contract.SERVER_CONTROL: {"server": "demo", "action": "stop", "responseChannel": "r"},
    contract.RELOAD: {"responseChannel": "r"},
    contract.SERVER_POLICY: {"server": "demo", "declineAll": True},
    contract.ROTATE_HTTP_TOKEN: {"responseChannel": "r"},
    contract.AUTH: {"server": "demo", "action": "logout", "responseChannel": "r"},
    contract.SIGN_IN_REDIRECT: {"server": "demo", "elicitationId": "e", "url": "http://127.0.0.1:1/callback?code=x",
                                "responseChannel": "r"},
    contract.RULES: {"responseChannel": "r"},
    contract.REVOKE_RULES: {"responseChannel": "r", "revokeAll": True},
    contract.ASK: {"responseChannel": "r", "params": {"message": "?", "requestedSchema": {"type": "object",
                                                                                         "properties": {}}},
                   "asker": {"name": "fuzz"}, "timeoutSeconds": 5},
    contract.WITHDRAW: {"responseChannel": "r"},
    contract.CANCEL_CALL: {"responseChannel": "r"},
    contract.MCP_RELAY: {"session": "s", "message": b'{"jsonrpc": "2.0", "method": "ping", "id": 1}', "server": "demo"},
    contract.MCP_CLOSE: {"session": "s"},
    contract.AUDIT: {"responseChannel": "r", "limit": 5},
    "result": {"action": "accept", "content": {"name": "Eve", "party_size": 2}},
}
_VALID_RAW = {name: wire.encode(body) for name, body in VALID_BODIES.items()}
_KEYS = ["action", "content", "server", "tool", "method", "params", "responseChannel", "token", "window",
         "protocol", "role", "declineAll", "arguments", "k", 1, -2]
# Near-valid: the contract's keys of a topic, each maybe present, holding right or wrong values.
_NEAR: dict[str, dict[str, list[Any]]] = {
    contract.HELLO: {"protocol": [1, 0, 2, -1, 2**64 - 1, "1"], "token": ["00" * 32, "", 5, None],
                     "window": [str(uuid.UUID(int=7)), 3, None], "name": ["x", 1, [1]],
                     "role": ["renderer", "x", 2]},
    contract.CALL_TOOL: {"server": ["demo", "nope", 1], "tool": ["book_table", None],
                         "responseChannel": ["reply", "error", "heartbeat", "", 7], "arguments": [{}, [], "x"]},
    contract.MCP_REQUEST: {"server": ["demo", "nope", 1], "method": ["tools/list", "tools/call", "", None],
                           "responseChannel": ["reply", 7], "params": [{}, [], "x"]},
    contract.SERVER_CONTROL: {"server": ["demo", 0], "action": ["stop", "x", None], "responseChannel": ["r", 1]},
    contract.SERVER_POLICY: {"server": ["demo", None], "declineAll": [True, "yes", 1]},
    contract.STATUS: {"responseChannel": ["r", 1, None, []]},
    contract.RELOAD: {"responseChannel": ["r", 1, None, {}]},
    contract.AUTH: {"server": ["demo", 2], "action": ["login", "status", "nope", None], "responseChannel": ["r", 0]},
    contract.SIGN_IN_REDIRECT: {"server": ["demo", []], "elicitationId": ["e", 3], "url": ["http://x/", 1],
                                "responseChannel": ["r", None]},
    contract.REVOKE_RULES: {"responseChannel": ["r", 5], "ids": [["a"], "a", [1]], "revokeAll": [True, "all"],
                            "server": ["demo", 1], "asker": ["me", {}]},
    contract.ASK: {"responseChannel": ["r", None], "params": [{"message": "?"}, [], "x"],
                   "asker": [{"name": "fuzz"}, {"pid": 1}, "fuzz"], "timeoutSeconds": [5, "soon", None]},
    contract.CANCEL_CALL: {"responseChannel": ["r", 9, None]},
    contract.MCP_RELAY: {"session": ["s", 1], "message": [b"{}", "{}", 3], "server": ["demo", 4]},
    contract.MCP_CLOSE: {"session": ["s", None, []]},
    "result": {"action": ["accept", "decline", "cancel", "maybe", "", 1],
               "content": [{"name": "Eve"}, [], "x", 3, {"party_size": "two"}]},
}
_DEPTHS = [5] * 40 + [600] * 30 + [5000] * 25 + [100_000] * 5


def deep_body(depth: int, form: str) -> bytes:
    """msgpack nested `depth` deep: "arrays", "maps", or "content" (a well-shaped result whose
    content nests: {"action": "accept", "content": {"k": [[...]]}})."""
    if form == "arrays":
        return b"\x91" * depth + b"\xc0"
    if form == "maps":
        return b"\x81\xa1k" * depth + b"\xc0"
    head = b"\x82" + wire.encode("action") + wire.encode("accept") + wire.encode("content")
    return head + b"\x81\xa1k" + b"\x91" * depth + b"\xc0"


class FrameGen:
    KINDS = (("count", 12), ("garbage", 13), ("shape", 18), ("near", 15), ("unknown", 12), ("forged", 18),
             ("mutated", 9), ("deep", 2.5), ("stale-hello", 0.5))

    def __init__(self, rng: random.Random, answered: Sequence[str]) -> None:
        """`answered`: result channels already answered, so forged results on them are sent too."""
        self.rng = rng
        self.answered = list(answered)
        self._kinds = [kind for kind, _ in self.KINDS]
        self._cumulative: list[float] = []
        total = 0.0
        for _, weight in self.KINDS:
            total += weight
            self._cumulative.append(total)

    def _uuid_channel(self) -> str:
        bits = self.rng.getrandbits(128)
        bits = (bits & ~(0xF << 76) & ~(0xC << 60)) | (0x7 << 76) | (0x8 << 60)  # uuid7's version and variant
        return contract.RESULT_PREFIX + str(uuid.UUID(int=bits))

    def _result_topic(self) -> str:
        if self.answered and self.rng.random() < 0.25:
            return self.rng.choice(self.answered)
        return self._uuid_channel()

    def _known_topic(self) -> str:
        roll = self.rng.randrange(len(contract.PEER_TOPICS) + 2)
        return contract.PEER_TOPICS[roll] if roll < len(contract.PEER_TOPICS) else self._result_topic()

    def value(self, depth: int = 0) -> Any:
        """A random msgpack-able value: scalars of every type, lists and maps a few levels deep."""
        rng = self.rng
        pick = rng.randrange(9 if depth < 3 else 7)
        if pick == 0:
            return None
        if pick == 1:
            return rng.random() < 0.5
        if pick == 2:
            return rng.randint(-(2**63), 2**64 - 1)
        if pick == 3:
            return rng.choice([0.0, -1.5, float("inf"), float("nan"), rng.random() * 1e300])
        if pick == 4:
            return "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(rng.randrange(12)))
        if pick == 5:
            return rng.randbytes(rng.randrange(12))
        if pick == 6:
            return rng.choice(["accept", "decline", "cancel", "demo", "book_table", "heartbeat", "error", ""])
        if pick == 7:
            return [self.value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(_KEYS): self.value(depth + 1) for _ in range(rng.randrange(4))}

    def _mutate(self, raw: bytes) -> bytes:
        rng = self.rng
        data = bytearray(raw)
        for _ in range(rng.randrange(1, 4)):
            op = rng.randrange(4)
            if op == 0 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif op == 1 and data:
                del data[rng.randrange(len(data)):]
            elif op == 2:
                data[rng.randrange(len(data) + 1):0] = rng.randbytes(rng.randrange(1, 6))
            elif data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)

    def oversized(self) -> tuple[str, list[bytes]]:
        """A body just over the contract's 1 MiB limit, on a known, result or unknown topic."""
        topic = self.rng.choice(["heartbeat", "hello", self._uuid_channel(), "no-such-topic"])
        return "oversized", [topic.encode(), b"\x80" + b"\xc0" * (contract.MAX_BODY + self.rng.randrange(1, 4096))]

    def frames(self) -> tuple[str, list[bytes]]:
        rng = self.rng
        roll = rng.random() * self._cumulative[-1]
        kind = self._kinds[next(i for i, c in enumerate(self._cumulative) if roll < c)]
        if kind == "count":
            return kind, [rng.randbytes(rng.randrange(0, 20)) for _ in range(rng.choice((1, 1, 3, 4, 5)))]
        if kind == "garbage":
            raw_topic = rng.randbytes(rng.randrange(1, 30)) if rng.random() < 0.4 else self._known_topic().encode()
            return kind, [raw_topic, rng.randbytes(rng.randrange(0, 200))]
        if kind == "shape":
            return kind, [self._known_topic().encode(), wire.encode(self.value())]
        if kind == "near":
            name = rng.choice(list(_NEAR))
            near = {key: rng.choice(values) for key, values in _NEAR[name].items() if rng.random() < 0.7}
            if rng.random() < 0.3:
                near["extra"] = self.value()
            topic = self._result_topic() if name == "result" else name
            return kind, [topic.encode(), wire.encode(near)]
        if kind == "unknown":
            topic = "".join(chr(rng.randrange(32, 127)) for _ in range(rng.randrange(1, 60)))
            return kind, [topic.encode(), wire.encode(self.value())]
        if kind == "forged":
            forged: dict[str, Any] = {"action": rng.choice(["accept", "decline", "cancel"])}
            if rng.random() < 0.7:
                forged["content"] = {"name": "Mallory", "party_size": rng.randrange(1, 13)}
            return kind, [self._result_topic().encode(), wire.encode(forged)]
        if kind == "mutated":
            name = rng.choice(list(_VALID_RAW))
            topic = self._result_topic() if name == "result" else name
            return kind, [topic.encode(), self._mutate(_VALID_RAW[name])]
        if kind == "deep":
            topic = rng.choice(["heartbeat", "hello", "msgMcpCallTool", self._result_topic()])
            return kind, [topic.encode(), deep_body(rng.choice(_DEPTHS), rng.choice(["arrays", "maps", "content"]))]
        # stale-hello: well-shaped, wrong token or protocol (never main's token: it is random hex)
        body = {"protocol": rng.choice([1, 1, 2]), "token": rng.randbytes(32).hex(),
                "window": str(uuid.UUID(int=rng.getrandbits(128))),
                "name": "stale", "role": "renderer"}
        return kind, [b"hello", wire.encode(body)]
