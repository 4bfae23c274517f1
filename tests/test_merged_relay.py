"""main's merged sessions (main_process/relay/merged_relay.py) in process: a host's session with every
server at once, each server an ordinary relayed session of main's relay (here a fake that records
what reaches each server's session and lets the test answer as the server). Plain values in and
out; no sockets, no processes, a fake clock."""

import json
from dataclasses import dataclass, field
from typing import Any

from test_merge import Clock

from main_process.relay.merged_relay import MEMBER_SEPARATOR, HostSide, MergedRelays
from main_process.wire.peers import Peer
from shared.messages import EVERY_SERVER, McpClose, McpRelay, ServerInfo
from shared.relay_pump import REPLAY_PREFIX

PEER = Peer(routing_id=b"host-1", window="w-host", name="Host", role="host", last_seen=0.0)


def raw(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


@dataclass(eq=False)
class Side:
    """A host side: what the host got, and whether its input is held."""

    ends_with_peer: bool = True
    got: list[dict[str, Any]] = field(default_factory=list)
    closed_with: list[str] = field(default_factory=list)
    held: list[bool] = field(default_factory=list)
    ended: bool = False

    def message(self, message: bytes) -> None:
        self.got.append(json.loads(message))

    def closed(self, why: str) -> None:
        self.closed_with.append(why)

    def hold_input(self, held: bool) -> None:
        self.held.append(held)

    def end(self) -> None:
        self.ended = True


@dataclass
class ServerSession:
    """One relayed session main's relay holds for a member: what reached the server."""

    host: HostSide
    sent: list[dict[str, Any]] = field(default_factory=list)

    def last(self, method: str) -> dict[str, Any]:
        return next(m for m in reversed(self.sent) if m.get("method") == method)

    def answer(self, method: str, result: dict[str, Any]) -> None:
        self.host.message(raw({"id": self.last(method)["id"], "result": result}))


class FakeRelay:
    """main's Relay as the merged sessions see it: a session opens on its first message."""

    def __init__(self) -> None:
        self.sessions: dict[str, ServerSession] = {}
        self.ended: list[str] = []
        self.full: list[tuple[str, bool]] = []
        self.broker_sides: list[Side] = []

    def from_pipes(self, peer: Peer, session: str, server: str, raw: bytes, host: HostSide,
                   headers: dict[str, str] | None = None) -> None:
        opened = self.sessions.setdefault(session, ServerSession(host))
        opened.sent.append(json.loads(raw))

    def end_pipes(self, peer: Peer, session: str, why: str) -> None:
        self.ended.append(session)
        self.sessions.pop(session, None)

    def host_full(self, peer: Peer, session: str, full: bool) -> None:
        self.full.append((session, full))

    def broker_side(self, peer: Peer, session: str, full: Any) -> tuple[HostSide, Any]:
        side = Side()
        self.broker_sides.append(side)
        return side, side.end

    def of(self, server: str, session: str = "s1") -> ServerSession:
        return self.sessions[f"{session}{MEMBER_SEPARATOR}{server}"]


SERVERS = [ServerInfo(name="a", status="ready", tools=[]), ServerInfo(name="b", status="ready", tools=[])]


class Rig:
    def __init__(self) -> None:
        self.relay = FakeRelay()
        self.clock = Clock()
        self.merged = MergedRelays(self.relay, lambda: list(SERVERS), call_later=self.clock.call_later)
        self.host = Side(ends_with_peer=False)

    def send(self, message: dict[str, Any], session: str = "s1") -> None:
        self.merged.from_pipes(PEER, session, raw(message), self.host)

    def handshake(self, request_id: int | str = 0, session: str = "s1") -> None:
        self.send({"id": request_id, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "host", "version": "1"}}}, session)
        for server in ("a", "b"):
            self.relay.of(server, session).answer("initialize", {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": server, "version": "1"}})
        self.send({"method": "notifications/initialized"}, session)

    def listed(self, session: str = "s1") -> None:
        """Each server answers the tools/list the merger sent it (a call by name is routed once
        the names are known)."""
        for server in ("a", "b"):
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("echo", "slow")]
            self.relay.of(server, session).answer("tools/list", {"tools": tools})


def test_a_call_reaches_the_servers_own_session_under_its_own_name_and_comes_back_under_the_hosts_id() -> None:
    rig = Rig()
    rig.handshake()
    assert rig.host.got[-1]["result"]["serverInfo"]["name"] == "elicitron"
    rig.send({"id": 7, "method": "tools/call", "params": {"name": "b__echo", "arguments": {"text": "hi"}}})
    rig.listed()
    call = rig.relay.of("b").last("tools/call")
    assert call["params"]["name"] == "echo"
    rig.relay.of("b").answer("tools/call", {"content": [{"type": "text", "text": "hi"}]})
    assert rig.host.got[-1] == {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "hi"}]}}


def test_a_servers_process_ending_mid_call_answers_the_call_and_the_next_call_replays_the_handshake() -> None:
    rig = Rig()
    rig.handshake()
    rig.send({"id": 8, "method": "tools/call", "params": {"name": "a__slow", "arguments": {}}})
    rig.listed()
    session = rig.relay.of("a")
    del rig.relay.sessions[f"s1{MEMBER_SEPARATOR}a"]  # the relay ended it: the server's process exited
    session.host.closed("server 'a': its process exited")
    error = rig.host.got[-1]
    assert error["id"] == 8 and error["error"]["code"] == -32000
    assert "its process exited" in error["error"]["message"]

    rig.send({"id": 9, "method": "tools/call", "params": {"name": "a__slow", "arguments": {}}})
    again = rig.relay.of("a").sent  # a new session of the server's own: the handshake first
    assert [m.get("method") for m in again] == ["initialize", "notifications/initialized", "tools/call"]
    assert str(again[0]["id"]).startswith(REPLAY_PREFIX)


def test_a_handshake_replayed_to_a_new_main_tells_the_host_every_list_may_have_changed() -> None:
    rig = Rig()
    rig.handshake(f"{REPLAY_PREFIX}1")
    answered = next(i for i, m in enumerate(rig.host.got) if m.get("id") == f"{REPLAY_PREFIX}1")
    told = [m.get("method") for m in rig.host.got[answered + 1:]]
    assert "notifications/tools/list_changed" in told


def test_a_server_leaving_ends_its_session_and_the_host_hears_the_lists_changed() -> None:
    rig = Rig()
    rig.handshake()
    rig.merged.servers_changed([SERVERS[0], ServerInfo(name="b", status="stopped", tools=[])])
    assert rig.relay.ended == [f"s1{MEMBER_SEPARATOR}b"]
    assert "notifications/tools/list_changed" in [m.get("method") for m in rig.host.got[-3:]]
    rig.send({"id": 3, "method": "tools/call", "params": {"name": "b__echo", "arguments": {}}})
    assert rig.host.got[-1]["id"] == 3 and "error" in rig.host.got[-1]


def test_a_server_reading_slowly_holds_the_host_and_a_host_reading_slowly_holds_every_server() -> None:
    rig = Rig()
    rig.handshake()
    rig.relay.of("a").host.hold_input(True)
    rig.relay.of("b").host.hold_input(True)
    rig.relay.of("a").host.hold_input(False)
    assert rig.host.held == [True]  # b still reads nothing
    rig.relay.of("b").host.hold_input(False)
    assert rig.host.held == [True, False]
    rig.merged.host_full(PEER, "s1", True)
    assert sorted(rig.relay.full) == [(f"s1{MEMBER_SEPARATOR}a", True), (f"s1{MEMBER_SEPARATOR}b", True)]
    rig.send({"method": "notifications/roots/list_changed"})  # while full, what reaches a server keeps it paused
    assert rig.relay.full[-1] == (f"s1{MEMBER_SEPARATOR}b", True)


def test_over_the_broker_the_host_closing_ends_every_servers_session_and_main_stopping_tells_the_host() -> None:
    rig = Rig()
    rig.merged.from_peer(PEER, McpRelay(session="m1", message=raw({"id": 1, "method": "ping"}), server=EVERY_SERVER))
    rig.merged.from_peer(PEER, McpRelay(session="m2", message=raw({"id": 1, "method": "ping"}), server=EVERY_SERVER))
    first, second = rig.relay.broker_sides
    assert first.got == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    rig.handshake(session="m1")  # (through from_pipes: the same session, by its name)
    rig.merged.close_from_peer(PEER, McpClose(session="m1"))
    assert first.ended and sorted(rig.relay.ended) == [f"m1{MEMBER_SEPARATOR}a", f"m1{MEMBER_SEPARATOR}b"]
    rig.merged.close("main is stopping")
    assert second.ended and second.closed_with == ["main is stopping"] and len(rig.merged) == 0


def test_a_peer_that_is_not_a_host_is_refused() -> None:
    rig = Rig()
    window = Peer(routing_id=b"w", window="w", name="win", role="renderer", last_seen=0.0)
    rig.merged.from_pipes(window, "x", raw({"id": 1, "method": "ping"}), rig.host)
    assert rig.host.got[-1]["error"]["code"] == -32000 and rig.host.closed_with and len(rig.merged) == 0
