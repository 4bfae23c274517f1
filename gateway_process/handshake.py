"""The host's `initialize`, answered before the SDK is loaded.

Loading `mcp` takes most of `elicitron serve`'s start-up, and a host that spawns serve waits on its
handshake. So `stdio.py` reads the host's first line itself: when it is a well-formed
`initialize`, the reply is built here, from what the gateway's SDK server would say (the same
capabilities, server info and negotiated version; `tests/test_gateway_handshake.py` holds the two
equal), and written at once. The SDK, loaded meanwhile, is then handed the same line, so its session
knows the host, and its own reply to it is dropped (`stdio_wire`). Anything else as a first line
(a 2026-07-28 request, a malformed `initialize`) is left to the SDK.

Pure: no I/O, and no import of `mcp` (that is the point).
"""

import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

from gateway_process.names import Exposure, combined_instructions
from shared.messages import ServerInfo

# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS, oldest to newest (importing it loads the SDK's types)
HANDSHAKE_VERSIONS: Final[tuple[str, ...]] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# What GatewayServer declares: every list, with list-changed notifications (the gateway relays them).
CAPABILITIES: Final[dict[str, Any]] = {
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": False},
    "tools": {"listChanged": True},
}
SERVER_NAME: Final = "elicitron"
SERVER_TITLE: Final = "Elicitron"


def package_version() -> str:
    try:
        return version("elicitron")
    except PackageNotFoundError:
        return "0"


def server_info(exposure: Exposure) -> dict[str, str]:
    """The gateway's `serverInfo`: Elicitron, or the one server it stands in for (`--server`)."""
    if exposure.only is not None:
        return {"name": exposure.only, "version": package_version()}
    return {"name": SERVER_NAME, "title": SERVER_TITLE, "version": package_version()}


def negotiated_version(requested: str) -> str:
    """The spec's rule: the host's version when we speak it, else our latest handshake version."""
    return requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]


def initialize_request(line: bytes) -> tuple[int | str, str] | None:
    """(id, requested protocol version) when `line` is a well-formed `initialize` request, else None."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or message.get("method") != "initialize":
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    requested, capabilities, client = params.get("protocolVersion"), params.get("capabilities"), params.get("clientInfo")
    if not isinstance(requested, str) or not isinstance(capabilities, dict) or not isinstance(client, dict):
        return None
    if not isinstance(client.get("name"), str) or not isinstance(client.get("version"), str):
        return None
    return request_id, requested


def initialize_result(requested: str, exposure: Exposure, servers: dict[str, ServerInfo]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "protocolVersion": negotiated_version(requested),
        "capabilities": CAPABILITIES,
        "serverInfo": server_info(exposure),
    }
    instructions = combined_instructions(exposure, servers)
    if instructions is not None:
        result["instructions"] = instructions
    return result


def early_reply(line: bytes, exposure: Exposure, servers: dict[str, ServerInfo]) -> tuple[int | str, bytes] | None:
    """(request id, reply line) for an `initialize` line, or None when the SDK should answer it."""
    request = initialize_request(line)
    if request is None:
        return None
    request_id, requested = request
    reply = {"jsonrpc": "2.0", "id": request_id, "result": initialize_result(requested, exposure, servers)}
    return request_id, json.dumps(reply, separators=(",", ":")).encode() + b"\n"
