"""A raw stdio JSON-RPC MCP server that claims 2026-07-28 but answers it loosely, for the
`protocolMode: "auto"` tests: `server/discover` lists 2026-07-28 (without the 2026 result fields:
`resultType`, `cacheScope`, `ttlMs`, unless `--strict-discover`), 2026-07-28 `tools/list` answers
in full, but 2026-07-28 `tools/call` answers lack `resultType`; the handshake era (`initialize`)
is spoken correctly. Tools: `echo` (text back), `calls` (how many tools/call it has served, by
era), `crash` (a JSON-RPC -32603 from the server). Run as a script.
"""

import json
import sys
from typing import Any

META_VERSION = "io.modelcontextprotocol/protocolVersion"
TOOLS = [
    {"name": "echo", "description": "Echo text", "inputSchema": {"type": "object", "properties": {
        "text": {"type": "string"}}, "required": ["text"]}},
    {"name": "calls", "description": "How many tools/call this server served, by era",
     "inputSchema": {"type": "object"}},
    {"name": "crash", "description": "Fails with a JSON-RPC error", "inputSchema": {"type": "object"}},
]
served = {"modern": 0, "legacy": 0}


def answer(request: dict[str, Any], strict_discover: bool) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    era = "modern" if META_VERSION in (params.get("_meta") or {}) else "legacy"
    full = {"resultType": "complete", "cacheScope": "private", "ttlMs": 0} if era == "modern" else {}
    if "id" not in request:
        return None  # notifications (initialized, cancelled) need no answer
    if method == "server/discover":
        result = {"supportedVersions": ["2025-11-25", "2026-07-28"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "loose-modern", "version": "1"}}
        return {"result": {**result, **full} if strict_discover else result}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in ("2025-03-26", "2025-06-18", "2025-11-25") else "2025-11-25"
        return {"result": {"protocolVersion": version, "capabilities": {"tools": {}},
                           "serverInfo": {"name": "loose-modern", "version": "1"}}}
    if method == "ping":
        return {"result": {}}
    if method == "tools/list":
        return {"result": {"tools": TOOLS, **full}}
    if method == "tools/call":
        name, arguments = params.get("name"), params.get("arguments") or {}
        if name == "crash":
            return {"error": {"code": -32603, "message": "the loose server broke inside"}}
        served[era] += 1
        text = json.dumps(served) if name == "calls" else str(arguments.get("text", ""))
        return {"result": {"content": [{"type": "text", "text": text}]}}  # no resultType, in any era
    return {"error": {"code": -32601, "message": f"method not found: {method}"}}


def main() -> None:
    strict_discover = "--strict-discover" in sys.argv
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict):
            continue
        reply = answer(request, strict_discover)
        if reply is not None:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **reply}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
