"""Who is attached and how main reaches them: sends to one peer or many, liveness, the `peers` list.

- every send to a peer goes through here, which schedules the drain a send may need, so no new
  send can forget it; a peer found unreachable on a send is detached;
- every heartbeat_s a peer silent past its limit is detached, every other one hears `heartbeat`;
- `peers` changes reach peers coalesced (one list per PEERS_COALESCE_S, one shared buffer for all,
  only to peers whose last list differs), not one list per attach to everyone;
- `send` (the Outbox of pending.py) flushes a coalesced list first: windows must know who is
  attached before a request (origin affinity).
"""

import errno
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import zmq

from main_process.clock import Clock, Timer
from main_process.log_limiter import RateLimitedLog, cut
from main_process.wire.peers import PEER_SLOTS, Peer, PeerTable
from main_process.wire.router_sockets import FrameSockets
from shared import channels
from shared.codec import encode
from shared.messages import Body, DeviceRef, Heartbeat, PeerInfo, PeersUpdate, Role

logger = logging.getLogger(__name__)

PEERS_COALESCE_S: Final = 0.1
_SHARED_FRAME_BYTES: Final = 4096  # broadcast bodies at least this big are sent as one shared buffer
_HEARTBEAT_FRAMES: Final = encode(channels.HEARTBEAT, Heartbeat())


class Attachments:
    """The attached peers over main's sockets."""

    def __init__(self, sockets: FrameSockets, *, clock: Clock, heartbeat_s: float, peer_timeout_s: float,
                 peer_slots: Mapping[Role, int] = PEER_SLOTS) -> None:
        self._sockets = sockets
        self._detached: Callable[[Peer], None] = lambda peer: None  # none can attach before start
        self._clock = clock
        self._heartbeat_s = heartbeat_s
        self._peer_timeout_s = peer_timeout_s
        self.table = PeerTable(peer_slots)
        self._complaints = RateLimitedLog(logger)
        self._peers_publish: Timer | None = None  # on the clock, as liveness is
        self._heartbeat: Timer | None = None
        self._peers_sent: dict[bytes, bytes] = {}  # the last `peers` body each peer got

    def __iter__(self) -> Iterator[Peer]:
        return iter(self.table)

    def __contains__(self, routing_id: bytes) -> bool:
        return routing_id in self.table

    def start(self, detached: Callable[[Peer], None]) -> None:
        """Liveness from now on; `detached(peer)` is told of every peer that leaves (bye, silence,
        unreachable, replaced), after it left the table."""
        self._detached = detached
        self._heartbeat = self._clock.call_later(self._heartbeat_s, self._heartbeat_tick)

    def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._peers_publish is not None:
            self._peers_publish.cancel()

    # ---- who is attached ----------------------------------------------------------------

    def get(self, routing_id: bytes) -> Peer | None:
        return self.table.get(routing_id)

    def by_window(self, window: str) -> Peer | None:
        return self.table.by_window(window)

    def infos(self) -> list[PeerInfo]:
        return self.table.infos()

    def renderers(self) -> list[bytes]:
        return self.table.renderers()

    def window_name(self, window: str) -> str | None:
        peer = self.table.by_window(window)
        return peer.name if peer is not None else None

    def window_device(self, window: str) -> DeviceRef | None:
        peer = self.table.by_window(window)
        return peer.device if peer is not None else None

    def window_user(self, window: str) -> str | None:
        peer = self.table.by_window(window)
        return peer.user if peer is not None else None

    def attach(self, peer: Peer) -> None:
        """Raises ProtocolError when its role has no slot left; a peer it replaces is detached."""
        for old in self.table.attach(peer):
            self._after_detach(old, "replaced by a new connection of the same window")

    def detach(self, peer: Peer, why: str) -> None:
        if self.table.get(peer.routing_id) is peer:
            self.table.detach(peer.routing_id)
            self._after_detach(peer, why)

    def _after_detach(self, peer: Peer, why: str) -> None:
        logger.info("detached %s %r (%r): %s", peer.role, cut(peer.name), cut(peer.window), why)
        self._peers_sent.pop(peer.routing_id, None)
        self._detached(peer)
        self.peers_changed()

    # ---- sending -----------------------------------------------------------------------

    def send_frames(self, routing_id: bytes, frames: list[Any], *, held_when_full: bool = False) -> bool:
        """One message, the drain left to the caller (`flush`)."""
        try:
            self._sockets.send(routing_id, frames)
            return True
        except zmq.ZMQError as exc:
            peer = self.table.get(routing_id)
            if exc.errno == errno.EHOSTUNREACH:
                if peer is not None:
                    self.detach(peer, "unreachable")
            elif not (held_when_full and exc.errno == errno.EAGAIN):
                self._complaints.warning(("send", exc.strerror), "dropped a message to %r: %s",
                                         cut(peer.window) if peer else routing_id.hex(), exc)
            return False

    def flush(self) -> None:
        """After sends: the drain they may need."""
        self._sockets.schedule_drain()

    def send_to_peer(self, routing_id: bytes, frames: list[bytes], *, held_when_full: bool = False) -> bool:
        """One message to one attached peer (False: it is gone or its queue is full).
        `held_when_full`: the caller keeps it and sends it again, so a full queue is no drop to log."""
        if routing_id not in self.table:
            return False
        sent = self.send_frames(routing_id, frames, held_when_full=held_when_full)
        self.flush()
        return sent

    def send(self, routing_ids: Iterable[bytes], frames: list[bytes]) -> list[bytes]:
        """The Outbox (pending.py): a request to windows, the ids it reached."""
        if self._peers_publish is not None:
            # A request goes out: windows must know who is attached first (origin affinity), not a
            # coalescing window later.
            self._peers_publish.cancel()
            self._publish_peers()
        reached = [rid for rid in routing_ids if rid in self.table and self.send_frames(rid, frames)]
        self.flush()
        return reached

    def publish(self, topic: str, body: Body) -> None:
        """`topic` to every attached peer of the roles its row names (shared/channels.py)."""
        roles = channels.TO_PEER[topic].roles
        routing_ids = [peer.routing_id for peer in self.table if peer.role in roles]
        if routing_ids:
            self._broadcast(routing_ids, encode(topic, body))

    def _broadcast(self, routing_ids: list[bytes], frames: list[bytes]) -> None:
        if len(routing_ids) > 1 and len(frames[1]) >= _SHARED_FRAME_BYTES:
            # One buffer for every copy: a list to 500 windows costs one list, not 500.
            frames = [frames[0], zmq.Frame(frames[1])]  # type: ignore[list-item]
        for routing_id in routing_ids:
            self.send_frames(routing_id, frames)
        self.flush()

    # ---- the peers list ----------------------------------------------------------------

    def peers_changed(self) -> None:
        """Something `peers` shows changed: every peer hears of it, coalesced."""
        if self._peers_publish is None:
            self._peers_publish = self._clock.call_later(PEERS_COALESCE_S, self._publish_peers)

    def send_peers(self, routing_id: bytes, infos: list[PeerInfo]) -> None:
        """The list to one peer now (a newcomer), remembered as its last: the coalesced one that
        follows its attach skips it when nothing changed meanwhile."""
        frames = encode(channels.PEERS, PeersUpdate(peers=infos))
        if self.send_frames(routing_id, frames):
            self._peers_sent[routing_id] = frames[1]

    def _publish_peers(self) -> None:
        self._peers_publish = None
        frames = encode(channels.PEERS, PeersUpdate(peers=self.table.infos()))
        # Only to windows whose last list differs: one that attached meanwhile has it already, and a
        # host's call that began and ended within the coalescing window changed nothing.
        stale = [peer.routing_id for peer in self.table if self._peers_sent.get(peer.routing_id) != frames[1]]
        for rid in stale:
            self._peers_sent[rid] = frames[1]
        self._broadcast(stale, frames)

    def name_host(self, peer: Peer, name: str) -> None:
        """Who the MCP host behind a host peer is, from the `initialize` (or 2026-07-28 envelope)
        of its relayed session: `peers` and `msgStatus` show it, invokes name it in `via`."""
        if peer.name != name:
            peer.name = name
            logger.info("host %r (%r) names itself", cut(name), cut(peer.window))
            self.peers_changed()

    # ---- liveness ----------------------------------------------------------------------

    def _heartbeat_tick(self) -> None:
        """Every heartbeat_s: a peer silent past its limit is detached, every other one hears
        `heartbeat`."""
        self._heartbeat = self._clock.call_later(self._heartbeat_s, self._heartbeat_tick)
        if not self._sockets.draining:
            # Read what waits first: after a stall of main's own loop, a peer's heartbeat sitting
            # in the socket is no silence.
            self._sockets.drain()
        now = self._clock.now()
        for peer in self.table:
            if now - peer.last_seen > self._peer_timeout_s:
                self.detach(peer, f"silent for {now - peer.last_seen:.1f} s")
            else:
                self.send_frames(peer.routing_id, _HEARTBEAT_FRAMES)
        self.flush()
