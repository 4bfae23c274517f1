"""A minimal stdio MCP server for `scripts/soak --hosts`: the standard library only, so main can start
one per host session in ~20 ms (`python -I -S tiny_server.py`) where an SDK server takes ~0.5 s.

The handshake era only (`initialize`; `server/discover` is "method not found", so callers fall back).
Tools:
    echo {text}   the text back
    book {who}    asks its client (`elicitation/create`, a form naming `who`), then answers with the
                  ElicitResult it got, as JSON text: {"action", "content"}
    hang {}       never answers: a call left in flight, until `notifications/cancelled` drops it
It exits when its stdin closes.
"""

import json
import sys
from typing import Any

SUPPORTED = ("2025-03-26", "2025-06-18", "2025-11-25")
BOOK_SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "minLength": 1},
                                                "party_size": {"type": "integer", "minimum": 1, "maximum": 12}},
               "required": ["name"]}
TOOLS = [
    {"name": "echo", "description": "Echo text", "inputSchema": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "book", "description": "Ask for a booking (elicits a form)", "inputSchema": {
        "type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}},
    {"name": "hang", "description": "Never answers (until cancelled)", "inputSchema": {"type": "object"}},
]


def book_message(who: str) -> str:
    """The elicitation's message: how a window (and the audit log) tells which session asked."""
    return f"Book a table for {who}?"


class Tiny:
    def __init__(self) -> None:
        self.asking: dict[str, Any] = {}  # our elicitation/create id -> the tools/call id it answers
        self.hanging: set[Any] = set()
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        sys.stdout.buffer.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        sys.stdout.buffer.flush()

    def on_message(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:  # a response: to one of our elicitations
            call_id = self.asking.pop(str(message.get("id")), None)
            if call_id is not None:
                result = message.get("result") or {"action": "error", "content": message.get("error")}
                text = json.dumps({"action": result.get("action"), "content": result.get("content")})
                self.send({"id": call_id, "result": {"content": [{"type": "text", "text": text}]}})
            return
        params = message.get("params") or {}
        if "id" not in message:
            if method == "notifications/cancelled":
                self.hanging.discard(params.get("requestId"))
            return
        request_id = message["id"]
        if method == "initialize":
            asked = params.get("protocolVersion")
            self.send({"id": request_id, "result": {
                "protocolVersion": asked if asked in SUPPORTED else SUPPORTED[-1],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "soak-tiny", "version": "1"}}})
        elif method == "ping":
            self.send({"id": request_id, "result": {}})
        elif method == "tools/list":
            self.send({"id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            self.on_call(request_id, str(params.get("name")), params.get("arguments") or {})
        else:
            self.send({"id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}})

    def on_call(self, request_id: Any, name: str, arguments: dict[str, Any]) -> None:
        if name == "echo":
            self.send({"id": request_id, "result": {"content": [{"type": "text", "text": str(arguments.get("text"))}]}})
        elif name == "book":
            self.next_id += 1
            ask_id = f"tiny-elicit-{self.next_id}"
            self.asking[ask_id] = request_id
            self.send({"id": ask_id, "method": "elicitation/create", "params": {
                "mode": "form", "message": book_message(str(arguments.get("who"))), "requestedSchema": BOOK_SCHEMA}})
        elif name == "hang":
            self.hanging.add(request_id)
        else:
            self.send({"id": request_id, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})


def main() -> None:
    tiny = Tiny()
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            tiny.on_message(message)


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # its client went away: nothing left to answer
