"""serve's early answer to `initialize` (gateway_process/handshake.py) says what the SDK says.

The SDK's own answer comes from the real GatewayServer on the SDK's dual-era loop, in process over
memory streams: no host, no main (the `initialize` handler needs neither).
"""

import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.runner import serve_dual_era_loop
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from gateway_process.handshake import HANDSHAKE_VERSIONS, early_reply, initialize_request
from gateway_process.names import Exposure
from gateway_process.proxy import GatewayServer
from gateway_process.stdio_wire import EarlyAnswer
from shared.messages import ServerInfo

SERVERS = {"demo": ServerInfo(name="demo", status="ready", tools=[], instructions="Books tables.")}


def _initialize(version: str, request_id: int | str = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "initialize",
                       "params": {"protocolVersion": version, "capabilities": {"elicitation": {}},
                                  "clientInfo": {"name": "a-host", "version": "1"}}}).encode()


async def _sdk_answer(exposure: Exposure, line: bytes) -> dict[str, Any]:
    gateway = GatewayServer(exposure, lambda _ctx: None)  # type: ignore[arg-type,return-value]
    gateway.refresh_instructions(SERVERS)
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](1)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](1)
    message = SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    async with anyio.create_task_group() as group:
        async def serve() -> None:
            async with gateway.server.lifespan(gateway.server) as state:
                await serve_dual_era_loop(gateway.server, server_reads, server_writes, lifespan_state=state)

        group.start_soon(serve)
        await to_server.send(message)
        with anyio.fail_after(10):
            reply = await from_server.receive()
        await to_server.aclose()
        group.cancel_scope.cancel()
    return json.loads(reply.message.model_dump_json(by_alias=True, exclude_unset=True))


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28", "1999-01-01"])
@pytest.mark.parametrize("only", [None, "demo"])
def test_the_early_answer_is_the_sdks_answer(version: str, only: str | None) -> None:
    exposure = Exposure(only=only)
    line = _initialize(version, request_id="first")
    early = early_reply(line, exposure, SERVERS)
    assert early is not None and early[0] == "first"
    assert json.loads(early[1]) == anyio.run(_sdk_answer, exposure, line)


def test_the_handshake_versions_are_the_sdks() -> None:
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


_HEAD = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": '


@pytest.mark.parametrize("line", [
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
    _HEAD.replace(b'"id": 1', b'"id": true') + b'{"protocolVersion": "2025-11-25", "capabilities": {}, '
                                                b'"clientInfo": {"name": "h", "version": "1"}}}',
    _HEAD + b'{"protocolVersion": "2025-11-25", "capabilities": {}}}',
    _HEAD + b'{"protocolVersion": 20251125, "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}}',
    b'{"jsonrpc": "2.0", "method": "initialize", "params": {}}',
    b"not json",
])
def test_anything_but_a_well_formed_initialize_is_left_to_the_sdk(line: bytes) -> None:
    assert initialize_request(line) is None
    assert early_reply(line, Exposure(only=None), SERVERS) is None


def test_the_sdks_own_reply_to_the_answered_request_is_dropped_once() -> None:
    line = _initialize("2025-11-25", request_id=5)
    early = early_reply(line, Exposure(only=None), SERVERS)
    assert early is not None
    answered = EarlyAnswer(*early)
    sdk_reply = types.JSONRPCResponse(jsonrpc="2.0", id=5, result=json.loads(early[1])["result"])
    other = types.JSONRPCResponse(jsonrpc="2.0", id=6, result={})
    assert not answered.drops(other)
    assert answered.drops(sdk_reply)
    assert not answered.drops(sdk_reply)  # a second reply with that id is the host's to see
