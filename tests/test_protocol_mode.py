"""`protocolMode: "auto"` never fails a call that "legacy" would serve: a server that claims
2026-07-28 but answers it loosely (tests/loose_modern_server.py) is spoken to in the handshake
era instead, and errors reach the caller as proper JSON-RPC codes with readable messages."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from gateway_kit import Host, HostLoop, serve_params, text_of
from kit.main import RunningMain
from kit.paths import PYTHON, TESTS
from mcp.shared.exceptions import MCPError

LOOSE_SERVER = TESTS / "loose_modern_server.py"


def _loose_entry(*args: str, **extra: Any) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(LOOSE_SERVER), *args], **extra}


def _text(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    return str(reply["result"]["content"][0]["text"])


@pytest.mark.parametrize("discover", ["loose-discover", "strict-discover"])
def test_auto_mode_serves_a_server_whose_2026_results_lack_result_type(
    main_factory: Callable[..., RunningMain], discover: str,
) -> None:
    # loose: the era probe itself shows the server is not a faithful 2026-07-28 one, so main never
    # speaks 2026 to it; strict: its discover passes, its tools/call answers do not, so the first
    # call reconnects it in the handshake era and is retried there.
    args = ["--strict-discover"] if discover == "strict-discover" else []
    main = main_factory({"loose": _loose_entry(*args, protocolMode="auto")})
    main.wait_server_ready("loose")
    window = main.peer()
    assert _text(window.expect_topic(window.call_tool("loose", "echo", {"text": "hello"}), 60)) == "hello"
    assert _text(window.expect_topic(window.call_tool("loose", "echo", {"text": "again"}), 30)) == "again"
    served = json.loads(_text(window.expect_topic(window.call_tool("loose", "calls", {}), 30)))
    assert served["legacy"] >= 3, served  # the calls are served in the handshake era from then on
    assert served["modern"] <= 1, served  # at most the one call that showed the server's fault
    cli = main.cli("call", "loose", "echo", json.dumps({"text": "from the CLI"}))
    assert cli.returncode == 0, cli.stderr
    assert "from the CLI" in cli.stdout
    assert "falls back to the handshake era" in main.stderr.text()


def test_a_server_side_fault_surfaces_as_its_json_rpc_code(main_factory: Callable[..., RunningMain]) -> None:
    main = main_factory({"loose": _loose_entry("--strict-discover")})
    main.wait_server_ready("loose")
    window = main.peer()
    error = window.expect_topic(window.call_tool("loose", "crash", {}), 60)["error"]
    assert error == {"code": -32603, "message": "the loose server broke inside"}
    assert _text(window.expect_topic(window.call_tool("loose", "echo", {"text": "still up"}), 30)) == "still up"


@pytest.mark.parametrize("host_mode", ["legacy", "auto"])
def test_errors_reach_a_host_through_serve_as_proper_codes(main_factory: Callable[..., RunningMain],
                                                          host_mode: str) -> None:
    """A host on `elicitron serve` gets the server's own code and message (not code 0 with an
    exception group's text). (A 2026-07-28 host holds the loose server's results to that schema
    itself wherever serve relays its session, so only the handshake-era host calls `echo`.)"""
    main = main_factory({"loose": _loose_entry("--strict-discover")})
    main.wait_server_ready("loose")
    loop = HostLoop()
    try:
        host = Host(loop, serve_params(main.connection), "code-host", mode=host_mode).open()
        try:
            with pytest.raises(MCPError) as caught:
                host.call("loose__crash", {}, timeout=60)
            assert (caught.value.error.code, caught.value.error.message) == (-32603, "the loose server broke inside")
            if host_mode == "legacy":
                assert text_of(host.call("loose__echo", {"text": "through serve"})) == "through serve"
        finally:
            host.close()
    finally:
        loop.close()
