"""A raw streamable-HTTP MCP host (handshake era) for the soak and the session-end tests: plain
http.client requests on one keep-alive connection, no SDK, so each way a host can leave a session
is one plain step.

    session = HttpHostSession(url, token, "soak-host-3").open()   # initialize + initialized
    session.call("book", {"who": "soak-3"})                          # the tool's result
    session.delete()      # ends it the proper way
    session.abandon()     # closes its connection, never says goodbye (swept as idle)
    session.drop_mid_call("hang")  # a call in flight, then the connection closed under it
"""

import http.client
import json
import select
import socket
from typing import Any
from urllib.parse import urlsplit

HANDSHAKE_VERSION = "2025-11-25"
_IDEMPOTENT = frozenset({"GET", "DELETE"})  # sent again after a stale connection (RFC 9110 9.2.2)


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read: between responses, only its end."""
    poll = select.poll()  # not select(): a test may hold over 1,024 descriptors
    poll.register(sock, select.POLLIN)
    return bool(poll.poll(0))


class HostError(RuntimeError):
    """The gateway answered something a host cannot go on with (a status, an error, no response)."""


class HttpHostSession:
    def __init__(self, url: str, token: str, name: str, *, timeout_s: float = 30.0) -> None:
        parts = urlsplit(url)
        self.path = parts.path
        self.name = name
        self.session_id: str | None = None
        self._ids = 0
        self._connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
        self._base = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
                      "Content-Type": "application/json"}

    def _send(self, method: str, body: dict[str, Any] | None) -> http.client.HTTPResponse:
        headers = dict(self._base)
        if self.session_id is not None:
            headers.update({"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": HANDSHAKE_VERSION})
        data = None if body is None else json.dumps(body)
        if self._connection.sock is not None and _readable(self._connection.sock):
            self._connection.close()  # readable while idle: the gateway closed it (a new one opens)
        try:
            self._connection.request(method, self.path, body=data, headers=headers)
            return self._connection.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if method not in _IDEMPOTENT:
                raise
        # The gateway closed the kept-alive connection as the request went out (its keep-alive
        # timeout): as HTTP clients do, an idempotent request is sent again once on a new connection.
        self._connection.close()
        self._connection.request(method, self.path, body=data, headers=headers)
        return self._connection.getresponse()

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def open(self) -> "HttpHostSession":
        init_id = self._next_id()
        response = self._send("POST", {"jsonrpc": "2.0", "id": init_id, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE_VERSION, "capabilities": {},
            "clientInfo": {"name": self.name, "version": "1"}}})
        session_id = response.getheader("mcp-session-id")
        answer = _response_to(response, init_id)
        if "result" not in answer:
            raise HostError(f"initialize answered {answer}")
        if session_id is None:
            raise HostError("initialize answered with no Mcp-Session-Id")
        self.session_id = session_id
        self.notify("notifications/initialized")
        return self

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        response = self._send("POST", message)
        text = response.read()
        if response.status != 202:
            raise HostError(f"{method}: HTTP {response.status} {text[:200]!r}")

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = self._next_id()
        response = self._send("POST", {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return _response_to(response, request_id)

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tools/call's result (HostError if it was an error)."""
        answer = self.request("tools/call", {"name": tool, "arguments": arguments})
        if "result" not in answer:
            raise HostError(f"tools/call {tool}: {answer}")
        result: dict[str, Any] = answer["result"]
        return result

    def delete(self) -> int:
        """End the session (HTTP DELETE); the status the gateway answered."""
        try:
            response = self._send("DELETE", None)
            response.read()
            return response.status
        finally:
            self._connection.close()

    def abandon(self) -> None:
        """Go away without a word: the gateway holds the session until it is idle long enough."""
        self._connection.close()

    def drop_mid_call(self, tool: str) -> None:
        """Start a call, wait until the gateway has answered its headers (the call is at the
        server), then close the connection under it."""
        response = self._send("POST", {"jsonrpc": "2.0", "id": self._next_id(), "method": "tools/call",
                                       "params": {"name": tool, "arguments": {}}})
        status = response.status
        self._connection.close()
        if status != 200:
            raise HostError(f"tools/call {tool}: HTTP {status}")


def _response_to(response: http.client.HTTPResponse, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response to `request_id` in a JSON or SSE answer (read to its end)."""
    body = response.read().decode(errors="replace")
    if response.status != 200:
        raise HostError(f"HTTP {response.status}: {body[:300]}")
    if (response.getheader("content-type") or "").startswith("application/json"):
        messages = [json.loads(body)]
    else:
        messages = [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]
    for message in messages:
        if isinstance(message, dict) and message.get("id") == request_id and "method" not in message:
            return message
    raise HostError(f"no response to request {request_id} in {body[:300]!r}")
