"""Who is attached to main, and what one connection may cost it. No sockets in here.

`PeerTable` holds the welcomed peers by routing id, with slots per role: hosts (anyone holding an
HTTP token makes them) and askers filling theirs never take a window's or a controller's (the CLI:
status, stop, rules revoke, reload), so those always have room.
`RateLimiter` gives every connection (attached or not) two token buckets, one counting messages and
one counting body bytes, so neither a flood of tiny frames nor a stream of large bodies from one
peer can take the loop from the others. Buckets of connections that went quiet are forgotten.
"""

import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from shared.errors import ProtocolError, WireCode
from shared.messages import DeviceRef, PeerInfo, Role

# Slots by role: no role's peers can take another's. Controllers are the CLI's short-lived commands;
# a host is one MCP session.
PEER_SLOTS: Final[Mapping[Role, int]] = {"renderer": 1000, "controller": 256, "host": 1000, "asker": 500}
ROLE_NAMES: Final[Mapping[Role, str]] = {"renderer": "windows", "controller": "controllers", "host": "hosts",
                                          "asker": "askers"}
MESSAGES_PER_S: Final = 20_000  # sustained, per connection; far above any window or host
BURST_MESSAGES: Final = 20_000
BYTES_PER_S: Final = 16 << 20
BURST_BYTES: Final = 64 << 20
_MAX_BUCKETS: Final = 20_000  # connections tracked at once; beyond it idle ones are dropped


@dataclass(eq=False)
class Peer:
    routing_id: bytes
    window: str
    name: str
    role: Role
    last_seen: float
    calls: int = 0  # a host's: tools/call requests of its relayed sessions in flight
    device: DeviceRef | None = None  # a web window's page (hello extension): the paired device it serves
    user: str | None = None  # a desktop window's OS user (hello extension), for who answered

    def info(self) -> PeerInfo:
        return PeerInfo(window=self.window, name=self.name, role=self.role,
                        calls=self.calls if self.role == "host" else None, device=self.device)


class PeerTable:
    def __init__(self, slots: Mapping[Role, int] = PEER_SLOTS) -> None:
        self.slots = dict(slots)
        self._peers: dict[bytes, Peer] = {}
        self._by_window: dict[str, Peer] = {}
        self._by_role: Counter[Role] = Counter()

    def attach(self, peer: Peer) -> list[Peer]:
        """Add `peer`; returns the peers it replaces (same window on another connection).
        Raises ProtocolError(too-many-peers) when its role's slots are taken."""
        same_window = self._by_window.get(peer.window)
        replaced = [same_window] if same_window is not None and same_window.routing_id != peer.routing_id else []
        earlier = self._peers.get(peer.routing_id)  # a second hello on the same connection
        freed = sum(1 for old in [*replaced, earlier] if old is not None and old.role == peer.role)
        slots = self.slots.get(peer.role, 0)
        if self._by_role[peer.role] - freed >= slots:
            raise ProtocolError(WireCode.TOO_MANY_PEERS,
                                f"main has its limit of {slots:,} attached {ROLE_NAMES[peer.role]}")
        for old in replaced:
            del self._peers[old.routing_id]
            self._by_role[old.role] -= 1
        if earlier is not None:
            self._by_role[earlier.role] -= 1
            if self._by_window.get(earlier.window) is earlier:
                del self._by_window[earlier.window]
        self._peers[peer.routing_id] = peer
        self._by_window[peer.window] = peer
        self._by_role[peer.role] += 1
        return replaced

    def detach(self, routing_id: bytes) -> Peer | None:
        peer = self._peers.pop(routing_id, None)
        if peer is not None:
            self._by_role[peer.role] -= 1
            if self._by_window.get(peer.window) is peer:
                del self._by_window[peer.window]
        return peer

    def by_window(self, window: str) -> Peer | None:
        """The attached peer that said hello as `window` (ids are unique among attached peers)."""
        return self._by_window.get(window)

    def get(self, routing_id: bytes) -> Peer | None:
        return self._peers.get(routing_id)

    def __contains__(self, routing_id: bytes) -> bool:
        return routing_id in self._peers

    def __iter__(self) -> Iterator[Peer]:
        return iter(list(self._peers.values()))

    def __len__(self) -> int:
        return len(self._peers)

    def renderers(self) -> list[bytes]:
        return [p.routing_id for p in self._peers.values() if p.role == "renderer"]

    def infos(self) -> list[PeerInfo]:
        return [p.info() for p in self._peers.values()]


@dataclass
class _Bucket:
    messages: float
    body_bytes: float
    stamp: float
    warned_at: float = field(default=float("-inf"))


class RateLimiter:
    def __init__(self, messages_per_s: float = MESSAGES_PER_S, burst_messages: float = BURST_MESSAGES,
                 bytes_per_s: float = BYTES_PER_S, burst_bytes: float = BURST_BYTES) -> None:
        self._messages_per_s = messages_per_s
        self._burst_messages = burst_messages
        self._bytes_per_s = bytes_per_s
        self._burst_bytes = burst_bytes
        self._buckets: dict[bytes, _Bucket] = {}

    def allow(self, routing_id: bytes, body_bytes: int, now: float | None = None) -> bool:
        """Take one message and its bytes from its connection's buckets; False when either is short."""
        now = time.monotonic() if now is None else now
        bucket = self._buckets.get(routing_id)
        if bucket is None:
            if len(self._buckets) >= _MAX_BUCKETS:
                self._forget_idle(now)
            bucket = self._buckets[routing_id] = _Bucket(self._burst_messages, self._burst_bytes, now)
        else:
            elapsed = now - bucket.stamp
            bucket.messages = min(self._burst_messages, bucket.messages + elapsed * self._messages_per_s)
            bucket.body_bytes = min(self._burst_bytes, bucket.body_bytes + elapsed * self._bytes_per_s)
            bucket.stamp = now
        if bucket.messages < 1 or bucket.body_bytes < body_bytes:
            return False
        bucket.messages -= 1
        bucket.body_bytes -= body_bytes
        return True

    def should_warn(self, routing_id: bytes, now: float | None = None, every_s: float = 1.0) -> bool:
        """True at most once per `every_s` per connection: when to tell a flooding peer."""
        now = time.monotonic() if now is None else now
        bucket = self._buckets.get(routing_id)
        if bucket is None or now - bucket.warned_at < every_s:
            return False
        bucket.warned_at = now
        return True

    def forget(self, routing_id: bytes) -> None:
        self._buckets.pop(routing_id, None)

    def _forget_idle(self, now: float) -> None:
        # A full bucket says nothing a fresh one would not: drop those first, then everything.
        full = [rid for rid, b in self._buckets.items()
                if b.messages + (now - b.stamp) * self._messages_per_s >= self._burst_messages]
        for rid in full:
            del self._buckets[rid]
        if len(self._buckets) >= _MAX_BUCKETS:
            self._buckets.clear()
