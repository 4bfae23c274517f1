"""A raw stdio MCP server for tests/test_session_ends.py: it starts in the time Python does (no SDK,
since the matrix starts one per host session), speaks both eras, and writes what happens to it to
`<events dir>/<pid>.log`, a line each: `host NAME` when it first hears of its host (clientInfo, in
either era), `started TAG` when a `work` call begins, `cancelled TAG` on its
`notifications/cancelled`, `eof` when its stdin closes, `term` on SIGTERM. `work` tells its host
it has begun (a progress notification, when asked for one) and never answers: work that nobody
must go on with once its host has gone. Run as a script.
"""

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT = "io.modelcontextprotocol/clientInfo"
TOOLS = [
    {"name": "work", "description": "Works until cancelled", "inputSchema": {
        "type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}},
    {"name": "echo", "description": "Echo text", "inputSchema": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
]
INFO = {"name": "session-end", "version": "1"}


class Server:
    def __init__(self, events: Path) -> None:
        self._log = events / f"{os.getpid()}.log"
        self._working: dict[Any, str] = {}  # request id -> tag
        self._host: str | None = None

    def event(self, word: str) -> None:
        with self._log.open("a") as log:
            log.write(word + "\n")

    def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        method, params = message.get("method"), message.get("params") or {}
        meta = params.get("_meta") or {}
        modern = META_VERSION in meta
        client = params.get("clientInfo") if method == "initialize" else meta.get(META_CLIENT)
        if self._host is None and isinstance(client, dict):
            self._host = str(client.get("name"))
            self.event(f"host {self._host}")
        reply = self._reply(message, method, params, modern)
        return None if reply is None else {"id": message["id"], **reply}

    def _reply(self, message: dict[str, Any], method: Any, params: dict[str, Any],
               modern: bool) -> dict[str, Any] | None:
        complete = {"resultType": "complete"} if modern else {}
        if "id" not in message:
            if method == "notifications/cancelled":
                tag = self._working.pop(params.get("requestId"), None)
                if tag is not None:
                    self.event(f"cancelled {tag}")
            return None
        if method == "initialize":
            return {"result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": INFO}}
        if method == "server/discover":
            return {"result": {"supportedVersions": ["2025-11-25", "2026-07-28"], "capabilities": {"tools": {}},
                               "serverInfo": INFO, **complete}}
        if method == "ping":
            return {"result": {}}
        if method == "tools/list":
            return {"result": {"tools": TOOLS, **complete}}
        if method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments") or {}
            if name == "work":
                self._working[message["id"]] = str(arguments.get("tag"))
                self.event(f"started {arguments.get('tag')}")
                token = (params.get("_meta") or {}).get("progressToken")
                if token is not None:
                    write({"method": "notifications/progress", "params": {"progressToken": token, "progress": 0}})
                return None  # answered never: only a cancellation ends it
            return {"result": {"content": [{"type": "text", "text": str(arguments.get("text"))}], **complete}}
        return {"error": {"code": -32601, "message": f"method not found: {method}"}}


def write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def main() -> None:
    server = Server(Path(sys.argv[1]))

    def on_term(signum: int, frame: object) -> None:
        server.event("term")
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        reply = server.answer(message)
        if reply is not None:
            write(reply)
    server.event("eof")


if __name__ == "__main__":
    main()
