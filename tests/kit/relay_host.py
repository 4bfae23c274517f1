"""RelayHost: an MCP host's side of relayed sessions (PROTOCOL.md §14) on a contract-only WirePeer of
role "host": one session per server, opened with the host's `initialize` and
`notifications/initialized`, then `tools/call` requests whose responses come back as `msgMcpRelay`.
Plain JSON and the wire contract, none of the project's packages: what a third-party gateway does.
"""

import itertools
import json
import uuid
from typing import Any

from kit import contract
from kit.peer import WirePeer

PROTOCOL_VERSION = "2025-11-25"
_INITIALIZE_ID = "initialize"


class RelayHost:
    def __init__(self, peer: WirePeer, client_name: str | None = None,
                 capabilities: dict[str, Any] | None = None) -> None:
        """`client_name`: the host's `clientInfo.name` (main names the peer after it; default the
        peer's hello name); `capabilities`: what the host declares (none: the windows answer every
        elicitation)."""
        self.peer = peer
        self.client_name = client_name or peer.name
        self.capabilities = capabilities or {}
        self._sessions: dict[str, str] = {}  # server -> session name
        self._ids = itertools.count(1)

    def session(self, server: str) -> str:
        """The host's session with `server`, opened on first use."""
        session = self._sessions.get(server)
        if session is None:
            session = self._sessions[server] = f"relay-{uuid.uuid4()}"
            self._send(session, server, {"jsonrpc": "2.0", "id": _INITIALIZE_ID, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL_VERSION, "capabilities": self.capabilities,
                "clientInfo": {"name": self.client_name, "version": "1"}}})
            self._send(session, server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        return session

    def send(self, server: str, message: dict[str, Any]) -> None:
        """One JSON-RPC message of the host in its session with `server`."""
        self._send(self.session(server), server, message)

    def _send(self, session: str, server: str, message: dict[str, Any]) -> None:
        self.peer.send(contract.MCP_RELAY, {"session": session, "server": server,
                                            "message": json.dumps(message).encode()})

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        """Send a `tools/call`; its answer is `reply_of` the relayed response (or `result`)."""
        request_id = next(self._ids)
        self.send(server, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": {"name": tool, "arguments": arguments}})
        return f"{self._sessions[server]}#{request_id}"

    def cancel(self, handle: str) -> None:
        """`notifications/cancelled` for one of our calls."""
        session, request_id = handle.rsplit("#", 1)
        server = next(name for name, own in self._sessions.items() if own == session)
        self.send(server, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": int(request_id), "reason": "the host gave up"}})

    @staticmethod
    def reply_of(topic: str, body: Any) -> tuple[str, dict[str, Any]] | None:
        """(handle, {"result": ...} or {"error": ...}) when a message main sent answers a call."""
        if topic != contract.MCP_RELAY:
            return None
        message = json.loads(body["message"])
        if not isinstance(message, dict) or "method" in message or message.get("id") in (None, _INITIALIZE_ID):
            return None
        return f"{body['session']}#{message['id']}", {key: message[key] for key in ("result", "error") if key in message}

    def reply(self, handle: str, timeout_s: float = 20.0) -> dict[str, Any]:
        """The answer to one call: {"result": CallToolResult JSON} or {"error": {code, message}}."""
        def answers(topic: str, body: Any) -> bool:
            found = self.reply_of(topic, body)
            return found is not None and found[0] == handle

        return self.reply_of(*self.peer.expect(answers, timeout_s))[1]  # type: ignore[index]
