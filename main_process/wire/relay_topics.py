"""Extension msgMcpRelay: host peers' own sessions with a server (relay.py)."""

from typing import Protocol

from main_process.wire.peers import Peer
from main_process.wire.topic_routes import handles
from shared import channels
from shared.messages import McpClose, McpRelay


class RelayTopicPorts(Protocol):
    """The relayed sessions (relay.Relay)."""

    def from_peer(self, peer: Peer, body: McpRelay) -> None: ...

    def close_from_peer(self, peer: Peer, body: McpClose) -> None: ...


class RelayTopics:
    def __init__(self, ports: RelayTopicPorts) -> None:
        self._ports = ports

    @handles(channels.MCP_RELAY)
    def _on_mcp_relay(self, peer: Peer, body: McpRelay) -> None:
        self._ports.from_peer(peer, body)

    @handles(channels.MCP_CLOSE)
    def _on_mcp_close(self, peer: Peer, body: McpClose) -> None:
        self._ports.close_from_peer(peer, body)
