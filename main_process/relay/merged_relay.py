"""Merged relayed sessions: a host's one session with every server at once, run in main (PROTOCOL.md
§14, `server` EVERY_SERVER; `elicitron serve` without --server, the HTTP child's `/mcp`).

The host's side is what a one-server session has: the broker (`msgMcpRelay` to the host peer) or the
host's own pipes, which a local serve handed main (host_pipes.py). Behind it a `MergedSession`
(merge/, sans-IO) makes every server one (`<server>__<name>`), and each of its servers is a
`_Member`: one ordinary relayed session in `Relay` (the host's own connection to that server,
consent decided on the way), reached in process, no socket between. A member's `RelayPump` does
what serve's pump did for it before: when the server's process ends, the requests open at it get
their error and the next message replays the handshake on a new connection.

    from the host ─► MergedSession.from_host ─► member pump ─► Relay (from_pipes) ─► the server
    the server ─► Relay ─► member (HostSide) ─► pump ─► MergedSession.from_server ─► the host side

main's servers and their lists come from the broker (`servers_changed`, `lists_changed`), as the host
peers hear them in `servers` and `msgListChanged`.
"""

import logging
from collections.abc import Callable
from functools import partial
from typing import Final, Protocol

from main_process.relay.merge import MergedSession, Upstream
from main_process.relay.merge.records import CallLater
from main_process.wire.peers import Peer
from shared import jsonrpc
from shared.errors import RpcCode
from shared.messages import ListName, McpClose, McpRelay, ServerInfo
from shared.relay_pump import REPLAY_PREFIX, RelayPump

logger = logging.getLogger(__name__)

MAX_MERGED_PER_PEER: Final = 32  # as one-server sessions (each member counts as one of those too)
MEMBER_SEPARATOR: Final = "\n"  # a member's session name: `<merged session>\n<server>` (gateways use uuids)
EVERY_LIST: Final[tuple[ListName, ...]] = ("tools", "prompts", "resources")
Headers = dict[str, str] | None


class HostSide(Protocol):
    """relay.HostSide: where the merged session's messages for its host go."""

    ends_with_peer: bool

    def message(self, raw: bytes) -> None: ...

    def closed(self, why: str) -> None: ...

    def hold_input(self, held: bool) -> None: ...


class MemberRelay(Protocol):
    """What the merged sessions need of `Relay`: its one-server sessions, opened with a host side."""

    def from_pipes(self, peer: Peer, session: str, server: str, raw: bytes, host: HostSide,
                   headers: Headers = None) -> None: ...

    def end_pipes(self, peer: Peer, session: str, why: str) -> None: ...

    def host_full(self, peer: Peer, session: str, full: bool) -> None: ...

    def broker_side(self, peer: Peer, session: str, full: Callable[[bool], None]) -> tuple[HostSide, Callable[[], None]]:
        """A host side over the broker (`msgMcpRelay` to the peer), and how to end it."""


class _Member:
    """One server of a merged session: its `Upstream` (what the merger sends it) and the `HostSide`
    of its relayed session (what the server sends back)."""

    ends_with_peer = False  # the merged session ends it

    def __init__(self, owner: "MergedHost", server: str) -> None:
        self._owner = owner
        self._relay = owner.relay
        self._peer = owner.peer
        self.server = server
        self.name = f"{owner.name}{MEMBER_SEPARATOR}{server}"
        self.pump = RelayPump(server=server, session=self.name, to_main=self._to_relay,
                              to_host=partial(owner.session.from_server, server), online=True)
        self.held = False

    # ---- Upstream ---------------------------------------------------------------------

    def from_host(self, raw: bytes, headers: Headers = None) -> None:
        self.pump.from_host(raw, headers)

    def close(self) -> None:
        if self._owner.members.get(self.server) is self:  # (a server opened afresh has a new member)
            del self._owner.members[self.server]
        self._relay.end_pipes(self._peer, self.name, "the host's merged session left this server")
        if self.held:  # a server gone holds nothing
            self.held = False
            self._owner.held_changed()

    def _to_relay(self, raw: bytes, headers: Headers) -> str | None:
        self._relay.from_pipes(self._peer, self.name, self.server, raw, self, headers)
        if self._owner.full:  # (a session opened afresh waits for the host too)
            self._relay.host_full(self._peer, self.name, True)
        return None

    # ---- HostSide ---------------------------------------------------------------------

    def message(self, raw: bytes) -> None:
        self.pump.from_main(raw)

    def closed(self, why: str) -> None:
        """The server's connection ended: what is open at it fails; the next message reopens."""
        self.pump.lost(why)

    def hold_input(self, held: bool) -> None:
        self.held = held
        self._owner.held_changed()


class MergedHost:
    """One host's merged session: a MergedSession whose servers are relayed sessions in `Relay`."""

    def __init__(self, relay: MemberRelay, peer: Peer, name: str, host: HostSide,
                 on_end: Callable[[], None] = lambda: None, call_later: CallLater | None = None) -> None:
        self.relay = relay
        self.peer = peer
        self.name = name
        self.host = host
        self._on_end = on_end
        self.members: dict[str, _Member] = {}
        self._held = False
        self.full = False  # the host reads slower than the servers write
        self._first = True
        self._replay_id: jsonrpc.Id | None = None  # a handshake replayed to this new session
        self.session = MergedSession(self._to_host, self._open_server, call_later=call_later)

    def _open_server(self, server: str) -> Upstream:
        member = self.members[server] = _Member(self, server)
        return member

    def from_host(self, raw: bytes, headers: Headers = None) -> None:
        if self._first:  # a gateway replaying its host's handshake to a new session?
            self._first = False
            envelope = jsonrpc.peek(raw)
            if envelope.method == "initialize" and isinstance(envelope.id, str) \
                    and envelope.id.startswith(REPLAY_PREFIX):
                self._replay_id = envelope.id
        self.session.from_host(raw, headers)

    def _to_host(self, raw: bytes) -> None:
        self.host.message(raw)
        if self._replay_id is not None and jsonrpc.peek(raw).id == self._replay_id:
            # The host's session went on from another main (or this one before it restarted):
            # what it listed may have changed meanwhile, so it hears that every list did.
            self._replay_id = None
            self.session.lists_changed(None, EVERY_LIST)

    def held_changed(self) -> None:
        """A server reads slower than the host writes: read nothing more of the host until every
        server caught up."""
        held = any(member.held for member in self.members.values())
        if held != self._held:
            self._held = held
            self.host.hold_input(held)

    def flow(self, full: bool) -> None:
        """The host reads slower than the servers write (True): their output waits, or goes on."""
        self.full = full
        for member in list(self.members.values()):
            self.relay.host_full(self.peer, member.name, full)

    def close(self) -> None:
        self.session.close()  # each member's relayed session ends with it
        self.members.clear()
        self._on_end()


class MergedRelays:
    """Every merged session in main, by (peer routing id, session name)."""

    def __init__(self, relay: MemberRelay, server_infos: Callable[[], list[ServerInfo]], *,
                 call_later: CallLater | None = None) -> None:
        """`call_later`: the merged sessions' timer (None: the running loop's; tests pass a clock)."""
        self._relay = relay
        self._server_infos = server_infos
        self._call_later = call_later
        self._sessions: dict[tuple[bytes, str], MergedHost] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, key: tuple[bytes, str]) -> bool:
        return key in self._sessions

    # ---- the host's messages ----------------------------------------------------------

    def from_peer(self, peer: Peer, body: McpRelay) -> None:
        merged = self._sessions.get((peer.routing_id, body.session))
        if merged is None:
            session = body.session
            side, end = self._relay.broker_side(peer, session, lambda full: self.host_full(peer, session, full))
            merged = self._open(peer, session, body.message, side, end)
            if merged is None:
                end()
                return
        merged.from_host(body.message, body.headers)

    def from_pipes(self, peer: Peer, session: str, raw: bytes, host: HostSide) -> None:
        """One message from a host whose pipes main holds (host_pipes.py)."""
        merged = self._sessions.get((peer.routing_id, session))
        if merged is None:
            merged = self._open(peer, session, raw, host)
            if merged is None:
                return
        merged.from_host(raw)

    def _open(self, peer: Peer, name: str, first: bytes, host: HostSide,
              on_end: Callable[[], None] = lambda: None) -> MergedHost | None:
        why = self._refusal(peer)
        if why is not None:
            envelope = jsonrpc.peek(first)
            if envelope.kind == "request" and isinstance(envelope.id, (int, str)):
                host.message(jsonrpc.error_response(envelope.id, RpcCode.SERVER_ERROR, why))
            host.closed(why)
            logger.info("refused a merged session of %r: %s", peer.name, why)
            return None
        merged = self._sessions[(peer.routing_id, name)] = MergedHost(self._relay, peer, name, host, on_end, self._call_later)
        merged.session.set_servers(self._server_infos())
        logger.info("relaying %r's session %r with every server, merged", peer.name, name)
        return merged

    def _refusal(self, peer: Peer) -> str | None:
        if peer.role != "host":
            return "relayed sessions are for peers with role \"host\""
        if sum(1 for key in self._sessions if key[0] == peer.routing_id) >= MAX_MERGED_PER_PEER:
            return f"this host already has {MAX_MERGED_PER_PEER} merged sessions open through Elicitron"
        return None

    def host_full(self, peer: Peer, session: str, full: bool) -> None:
        merged = self._sessions.get((peer.routing_id, session))
        if merged is not None:
            merged.flow(full)

    # ---- main's servers ---------------------------------------------------------------

    def servers_changed(self, servers: list[ServerInfo]) -> None:
        """A server was added, removed, started, stopped or failed (main's `servers` push)."""
        for merged in list(self._sessions.values()):
            merged.session.set_servers(servers)

    def lists_changed(self, server: str, lists: list[ListName]) -> None:
        """main's `msgListChanged`: the server's lists may have changed."""
        for merged in list(self._sessions.values()):
            merged.session.lists_changed(server, lists)

    # ---- ending -----------------------------------------------------------------------

    def end(self, peer: Peer, session: str, why: str) -> None:
        """The host closed it (`msgMcpClose`, its pipes), or serve went away: nothing to tell it."""
        merged = self._sessions.pop((peer.routing_id, session), None)
        if merged is not None:
            merged.close()
            logger.info("merged session %r of %r ended: %s", session, peer.name, why)

    def close_from_peer(self, peer: Peer, body: McpClose) -> None:
        self.end(peer, body.session, "the host closed it")

    def peer_gone(self, routing_id: bytes) -> None:
        for (owner, session), merged in list(self._sessions.items()):
            if owner == routing_id and merged.host.ends_with_peer:
                self.end(merged.peer, session, "the host went away")

    def close(self, why: str) -> None:
        """main stops: each host is told (its gateway answers what is open and relays on elsewhere)."""
        for key, merged in list(self._sessions.items()):
            del self._sessions[key]
            merged.close()
            merged.host.closed(why)
