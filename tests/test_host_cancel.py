"""A call a host cancels is no longer in flight: `elicitron status` and the windows' `peers` count
it out, however early the host cancels (issue 24, finding 14); and a peer's own `msgMcpCallTool`
cancelled at once is answered cancelled. Real main, real probe server, real hosts: mcp's own
`Client` through `elicitron serve`, and a controller peer on the wire."""

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from gateway_kit import Host as McpHost
from gateway_kit import HostLoop, open_beside, probe_entry, serve_params
from kit import contract
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from mcp import Client

pytestmark = pytest.mark.slow  # a real main, gateways, servers and hosts


@pytest.fixture(scope="module")
def probe_main(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMain]:
    runtime = short_tmp_dir()
    config = write_config(tmp_path_factory.mktemp("cancel") / "mcp.json", {"probe": probe_entry()})
    running = start_main(config, runtime)
    try:
        running.wait_server_ready("probe")
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def hosts() -> Iterator[HostLoop]:
    loop = HostLoop()
    yield loop
    loop.close()


def _in_flight(peers: list[dict[str, Any]] | None, name: str) -> int | None:
    counts = [p.get("calls") or 0 for p in peers or [] if p["role"] == "host" and p["name"] == name]
    return counts[0] if counts else None


def _wait_in_flight(main: RunningMain, name: str, calls: int) -> None:
    with main.watch() as watcher:
        watcher.wait(lambda: _in_flight(watcher.peers, name) == calls,
                     f"host {name!r} with {calls} calls in flight", 20)


@pytest.mark.parametrize("exposure", [["--server", "probe"], []], ids=["one-server", "merged"])
def test_a_call_the_host_cancels_is_no_longer_counted_in_flight(
    probe_main: RunningMain, hosts: HostLoop, exposure: list[str]
) -> None:
    name = f"Canceller-{len(exposure)}"
    host = open_beside(McpHost(hosts, serve_params(probe_main.connection, *exposure), name), probe_main)
    tool = "block" if exposure else "probe__block"
    try:
        host.tool_names()

        async def call_and_cancel(client: Client) -> None:
            started = anyio.Event()

            async def note(progress: float, total: float | None, message: str | None) -> None:
                started.set()  # the server runs the call: main counts it in flight

            async with anyio.create_task_group() as group:
                group.start_soon(lambda: client.call_tool(tool, {"tag": name, "steps": 1}, progress_callback=note))
                await started.wait()
                group.cancel_scope.cancel()  # the host's Client sends notifications/cancelled

        host.run(call_and_cancel)
        # mcp servers never answer a cancelled request (the spec's MUST NOT): main must not wait for one.
        _wait_in_flight(probe_main, name, 0)
        shown = probe_main.cli("status")
        assert shown.returncode == 0, shown.stderr
        line = next(line for line in shown.stdout.splitlines() if name in line)
        assert "0 calls in flight" in line, shown.stdout
        assert host.call(tool.replace("block", "pid")).is_error is False  # the session goes on
    finally:
        host.close()


def test_a_call_its_caller_cancels_at_once_is_answered_cancelled(probe_main: RunningMain) -> None:
    caller = probe_main.peer(name="wire-caller", role="controller")
    channel = "call-at-once"
    # One burst: main reads both in one drain, so the cancel reaches the call before its task ran.
    caller.send(contract.CALL_TOOL, {"server": "probe", "tool": "block", "arguments": {"tag": "at-once"},
                                     "responseChannel": channel})
    caller.send("msgCancelCall", {"responseChannel": channel})
    reply = caller.expect_topic(channel, 20)
    assert reply["error"]["code"] == -32800, reply
