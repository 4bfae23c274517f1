"""The HTTP child's peers of main, shared: the sessions of one host share one peer.

One peer per HTTP session let a host that never sends DELETE fill main's peer table (1,000
sessions, and no window, `status` or `stop` could attach). Here the sessions of one host (by its
`clientInfo` title or name, the name main gives the peer) share a peer: main relays each as its own
session on it (`msgMcpRelay` names the session), up to `PEER_SESSIONS` relayed sessions per peer,
main's own limit per peer; a session of `/mcp` holds one per server. A peer with no session left
says bye. Every event of the link goes to each session on it; each takes what names its sessions.
"""

from collections.abc import Callable
from pathlib import Path

from gateway_process.attachment import MainAttachment
from gateway_process.link import MainLink
from gateway_process.link_events import LinkEvents
from shared.messages import MainBody

PEER_SESSIONS = 32  # main_process/relay/relay.py MAX_SESSIONS_PER_PEER: relayed sessions main opens per peer


class _SharedPeer:
    """One peer of main and the sessions on it; its attachment's LinkEvents fan out to them."""

    def __init__(self, pool: "PeerPool", host: str) -> None:
        self.pool = pool
        self.host = host
        self.attachment = MainAttachment(pool.connection, "MCP host over HTTP", start_main_if_needed=False)
        self.attachment.adopt(_FanOut(self))
        self.tenants: dict[Share, None] = {}
        self.load = 0  # relayed sessions its tenants may open

    def release(self, share: "Share") -> None:
        if share in self.tenants:
            del self.tenants[share]
            self.load -= share.weight
            if not self.tenants:
                self.pool.forget(self)
                self.attachment.close()


class Share:
    """One HTTP session's share of a peer: the `Attachment` its relayed session is given."""

    def __init__(self, peer: _SharedPeer, weight: int) -> None:
        self._peer = peer
        self.weight = weight
        self.link: MainLink = peer.attachment.link
        self.events: LinkEvents | None = None

    def adopt(self, events: LinkEvents) -> None:
        self.events = events

    async def ready(self) -> None:
        await self._peer.attachment.ready()

    def close(self) -> None:
        self._peer.release(self)


class PeerPool:
    def __init__(self, connection: Path, merged_weight: Callable[[], int]) -> None:
        self.connection = connection
        self.merged_weight = merged_weight  # relayed sessions one `/mcp` session opens: the servers
        self._peers: dict[str, list[_SharedPeer]] = {}

    @property
    def peers(self) -> int:
        return sum(len(peers) for peers in self._peers.values())

    def share(self, host: str, server: str | None) -> Share:
        """A share for one session of `host` with `server` (None: every server, `/mcp`)."""
        weight = 1 if server is not None else max(1, min(self.merged_weight(), PEER_SESSIONS))
        peers = self._peers.setdefault(host, [])
        peer = next((peer for peer in peers if peer.load + weight <= PEER_SESSIONS), None)
        if peer is None:
            peer = _SharedPeer(self, host)
            peers.append(peer)
        share = Share(peer, weight)
        peer.tenants[share] = None
        peer.load += weight
        return share

    def forget(self, peer: _SharedPeer) -> None:
        peers = self._peers.get(peer.host, [])
        if peer in peers:
            peers.remove(peer)
        if not peers:
            self._peers.pop(peer.host, None)


class _FanOut:
    """The link's events, to every session on the peer (each ignores sessions not its own)."""

    def __init__(self, peer: _SharedPeer) -> None:
        self._peer = peer

    def _each(self) -> list[LinkEvents]:
        return [share.events for share in self._peer.tenants if share.events is not None]

    def on_pushed(self, body: MainBody) -> None:
        for events in self._each():
            events.on_pushed(body)

    def on_detached(self, why: str) -> None:
        for events in self._each():
            events.on_detached(why)
