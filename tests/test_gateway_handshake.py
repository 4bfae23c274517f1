"""The merged handshake: the host's `initialize` goes to every server and the merged answer is one
the SDK takes (main_process/relay/merge/, run by main); serve relays without loading `mcp` (it starts in
the time Python and pyzmq take)."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from main_process.relay.merge import MergedSession
from main_process.relay.merge.versions import HANDSHAKE_VERSIONS, server_info
from shared.merged_names import Exposure
from shared.messages import ServerInfo


class _Server:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def from_host(self, raw: bytes, headers: dict[str, str] | None = None) -> None:
        self.sent.append(json.loads(raw))

    def close(self) -> None:
        pass


def _handshake(version: str, answers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    got: list[dict[str, Any]] = []
    servers: dict[str, _Server] = {}

    def open_server(name: str) -> _Server:
        servers[name] = _Server()
        return servers[name]

    merged = MergedSession(lambda raw: got.append(json.loads(raw)), open_server, call_later=lambda _d, _f: None)  # type: ignore[arg-type,return-value]
    merged.set_servers([ServerInfo(name=name, status="ready", tools=[]) for name in answers])
    merged.from_host(json.dumps({"jsonrpc": "2.0", "id": "first", "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "a-host", "version": "1"}}}).encode())
    for name, result in answers.items():
        merged.from_server(name, json.dumps({"jsonrpc": "2.0", "id": servers[name].sent[0]["id"],
                                             "result": result}).encode())
    assert len(got) == 1 and got[0]["id"] == "first"
    answer: dict[str, Any] = got[0]["result"]
    return answer


def test_the_handshake_versions_are_the_sdks() -> None:
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28", "1999-01-01"])
def test_with_no_server_the_answer_is_what_an_sdk_server_would_say(version: str) -> None:
    result = _handshake(version, {})
    expected = version if version in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    assert result["protocolVersion"] == expected
    assert result["serverInfo"] == server_info(Exposure())
    types.InitializeResult.model_validate(result)


def test_the_merged_answer_is_one_the_sdk_takes() -> None:
    result = _handshake("2025-11-25", {
        "demo": {"protocolVersion": "2025-11-25", "instructions": "Books tables.",
                 "capabilities": {"tools": {"listChanged": False}, "logging": {}},
                 "serverInfo": {"name": "demo", "version": "1"}},
        "files": {"protocolVersion": "2025-11-25",
                  "capabilities": {"resources": {"subscribe": True}, "prompts": {}, "completions": {}},
                  "serverInfo": {"name": "files", "version": "2"}},
    })
    parsed = types.InitializeResult.model_validate(result)
    assert parsed.server_info.name == "elicitron" and parsed.protocol_version == "2025-11-25"
    capabilities = parsed.capabilities
    assert capabilities.logging is not None and capabilities.completions is not None
    assert capabilities.resources is not None and capabilities.resources.subscribe is True
    assert capabilities.tools is not None and capabilities.tools.list_changed is True
    assert parsed.instructions is not None and "## demo\nBooks tables." in parsed.instructions


@pytest.mark.slow  # a fresh interpreter
def test_serve_relays_without_loading_mcp_or_main() -> None:
    """serve relays bytes in both modes (main merges every server), so it loads neither the SDK
    nor main's merger."""
    code = ("import sys, gateway_process.cli, gateway_process.relay_stdio; "
            "sys.exit(1 if any(m == 'mcp' or m.startswith(('mcp.', 'mcp_types', 'main_process')) "
            "for m in sys.modules) else 0)")
    done = subprocess.run([sys.executable, "-c", code], check=False, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0
