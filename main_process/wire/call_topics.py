"""A window's or controller's tool calls and read-only MCP requests (hosts call in their relayed
sessions instead: relay.py). Every call in flight is tracked (`peer_calls.PeerCalls`): a peer may
cancel its own."""

from typing import Protocol

from main_process.wire.peer_calls import Cancel, PeerCalls
from main_process.wire.peers import Peer
from main_process.wire.replies import Replies
from main_process.wire.topic_routes import ProgressTo, ReplyTo, handles
from shared import channels
from shared.messages import CallTool, CancelCall, McpRequest


class CallPorts(Protocol):
    """Where the calls go (the servers)."""

    def call_tool(self, request: CallTool, caller: Peer, reply: ReplyTo,
                  progress: ProgressTo | None = None) -> Cancel | None:
        """Start the call; `reply` is called exactly once, with its result or error (also when it
        is cancelled). Returns how to cancel it at the server (None: it has already replied)."""

    def mcp_request(self, request: McpRequest, reply: ReplyTo) -> None:
        """Forward one read-only MCP request; `reply` is called exactly once."""


class CallTopics:
    def __init__(self, ports: CallPorts, replies: Replies) -> None:
        self._ports = ports
        self._replies = replies
        self._calls = PeerCalls()

    @handles(channels.CALL_TOOL)
    def _on_call_tool(self, peer: Peer, body: CallTool, reply: ReplyTo) -> None:
        reply, started = self._calls.track(peer, body.response_channel, reply)
        progress = self._replies.progress_sender(peer, body.response_channel) if body.progress else None
        started(self._ports.call_tool(body, peer, reply, progress))

    @handles(channels.CANCEL_CALL)
    def _on_cancel_call(self, peer: Peer, body: CancelCall) -> None:
        self._calls.cancel(peer.routing_id, body.response_channel)

    @handles(channels.MCP_REQUEST)
    def _on_mcp_request(self, peer: Peer, body: McpRequest, reply: ReplyTo) -> None:
        self._ports.mcp_request(body, reply)
