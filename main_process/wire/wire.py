"""main's side of the ZeroMQ wire below the topics: its ROUTER sockets, who is attached, and what
every peer hears. Made first (it needs nothing of the rest of main but the servers' list); the
broker (broker.py) starts reading it once everything a message may reach exists."""

from collections.abc import Callable, Mapping

from main_process.clock import MONOTONIC, Clock
from main_process.wire.attachments import Attachments
from main_process.wire.broker_ports import ConsentSide, Publisher, ServerWatch
from main_process.wire.peers import PEER_SLOTS, Peer
from main_process.wire.router_sockets import FrameSockets, Listener, RouterSockets
from shared.codec import DEFAULT_MAX_BODY_BYTES
from shared.messages import PeerInfo, Role, ServerInfo


class Wire:
    def __init__(
        self,
        *,
        endpoint: str,
        server_infos: Callable[[], list[ServerInfo]],
        remote: Listener | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        heartbeat_s: float = 1.0,
        peer_timeout_s: float = 5.0,
        peer_slots: Mapping[Role, int] = PEER_SLOTS,
        clock: Clock = MONOTONIC,
        sockets: FrameSockets | None = None,
    ) -> None:
        """Made on main's running loop. `server_infos`: the configured servers as peers see them;
        `sockets`: frames in and out (default: ROUTER sockets bound to the listeners)."""
        self.endpoint = endpoint
        self.server_infos = server_infos
        self.max_body_bytes = max_body_bytes
        self.clock = clock  # liveness and expiry run on it (tests move a SettableClock)
        self.listeners = [Listener(endpoint)] + ([remote] if remote is not None else [])
        self.sockets: FrameSockets = sockets or RouterSockets(
            self.listeners, max_body_bytes=max_body_bytes, heartbeat_s=heartbeat_s, peer_timeout_s=peer_timeout_s)
        self.attachments = Attachments(self.sockets, clock=clock, heartbeat_s=heartbeat_s,
                                       peer_timeout_s=peer_timeout_s, peer_slots=peer_slots)
        self.server_watch = ServerWatch()  # main's merged sessions, given at the broker's start
        self.publisher = Publisher(self.attachments, server_infos, self.server_watch)
        self.consent_ports = ConsentSide(self.attachments, server_infos, self.server_watch)

    def bind(self) -> None:
        self.sockets.bind()

    def close(self) -> None:
        """Timers first, then the sockets (and the ipc endpoint's file)."""
        self.attachments.close()
        self.sockets.close()

    def peers(self) -> list[PeerInfo]:
        return self.attachments.infos()

    def host_peer(self, window: str) -> Peer | None:
        """The attached peer with that hello window, if it is a host."""
        peer = self.attachments.by_window(window)
        return peer if peer is not None and peer.role == "host" else None
