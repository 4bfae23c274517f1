"""A card whose host stopped waiting says so (issue 37, friction 11): mcp's own `Client` as the host,
through a real `elicitron serve --server demo`, calls a tool that elicits; a contract window sees
the card; the host cancels its call, or ends its session; the window's dismiss says the host went
(v1 reason "cancelled", extension cause "host-gone") and `elicitron audit` reads "host stopped waiting".
"""

import concurrent.futures
import json
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from gateway_kit import Host, HostLoop, open_beside, serve_params, status_json, text_of
from kit.demo import demo_stdio_entry
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.peer import WirePeer
from mcp import Client, types

pytestmark = pytest.mark.slow  # a real main, gateway and host

WAIT_S = 20.0


@pytest.fixture(scope="module")
def main(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMain]:
    runtime = short_tmp_dir()
    running = start_main(write_config(tmp_path_factory.mktemp("gone") / "mcp.json", {"demo": demo_stdio_entry()}),
                         runtime)
    try:
        running.wait_server_ready("demo")
        yield running
    finally:
        running.stop()
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


@pytest.fixture(scope="module")
def hosts() -> Iterator[HostLoop]:
    loop = HostLoop()
    yield loop
    loop.close()


@pytest.fixture
def window(main: RunningMain) -> Iterator[WirePeer]:
    peer = main.peer("wire-window")
    yield peer
    peer.close()


def card_of(window: WirePeer, restaurant: str) -> dict[str, Any]:
    _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                              and b["request"]["params"]["message"] == f"Book a table at {restaurant}?", WAIT_S)
    return dict(invoke)


def dismiss_of(window: WirePeer, invoke: dict[str, Any]) -> dict[str, Any]:
    _, dismiss = window.expect(lambda t, b: t == "msgElicitationTransferDismiss"
                               and b["responseChannel"] == invoke["responseChannel"], WAIT_S)
    return dict(dismiss)


async def book(client: Client, restaurant: str, tool: str = "book_table") -> types.CallToolResult:
    return await client.call_tool(tool, {"restaurant": restaurant})


def audit_row(main: RunningMain, channel: str) -> tuple[dict[str, Any], str]:
    """The row of `channel` once its outcome is on disk (committed right after the dismiss went
    out), and the table `elicitron audit` prints."""
    deadline = time.monotonic() + WAIT_S
    while True:
        rows = json.loads(main.cli_plain("audit", "--json", "--server", "demo").stdout)
        row = next((r for r in rows if r["channel"] == channel), None)
        if row is not None and row["outcome"] is not None:
            return row, main.cli_plain("audit", "--server", "demo").stdout
        assert time.monotonic() < deadline, f"no outcome for {channel} in the audit log: {row}"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_host_that_cancels_its_call_closes_the_card_saying_it_stopped_waiting(
    main: RunningMain, hosts: HostLoop, window: WirePeer, mode: str
) -> None:
    host = open_beside(Host(hosts, serve_params(main.connection, "--server", "demo"), f"Impatient-{mode}",
                            mode=mode), main)
    try:
        asking = host.start(lambda c: c.call_tool("book_table", {"restaurant": f"gone-{mode}"}))
        invoke = card_of(window, f"gone-{mode}")
        assert invoke["via"] == f"Impatient-{mode}"
        asking.cancel()  # the host gives up on its call (its Client sends notifications/cancelled)
        dismiss = dismiss_of(window, invoke)
        assert (dismiss["reason"], dismiss.get("cause")) == ("cancelled", "host-gone")
        row, table = audit_row(main, invoke["responseChannel"])
        assert row["outcome"] == "host-gone" and row["via"] == f"Impatient-{mode}"
        line = next(line for line in table.splitlines() if f"gone-{mode}" in line)
        assert "host stopped waiting" in line
    finally:
        host.close()


def test_a_host_whose_session_ends_closes_the_card_saying_it_stopped_waiting(
    main: RunningMain, hosts: HostLoop, window: WirePeer
) -> None:
    host = open_beside(Host(hosts, serve_params(main.connection, "--server", "demo"), "Leaver"), main)
    closed = False
    try:
        host.start(lambda c: c.call_tool("book_table", {"restaurant": "left"}))
        invoke = card_of(window, "left")
        host.close()  # the host's session ends while the card is up (serve exits with it)
        closed = True
        dismiss = dismiss_of(window, invoke)
        assert (dismiss["reason"], dismiss.get("cause")) == ("cancelled", "host-gone")
        row, table = audit_row(main, invoke["responseChannel"])
        assert row["outcome"] == "host-gone"
        assert "host stopped waiting" in next(line for line in table.splitlines() if "left" in line)
    finally:
        if not closed:
            host.close()



@pytest.mark.parametrize(("cancelled", "merged"), [("first", False), ("second", False), ("second", True)])
def test_with_two_calls_in_flight_the_cancelled_calls_card_says_the_host_stopped_waiting(
    main: RunningMain, hosts: HostLoop, window: WirePeer, cancelled: str, merged: bool
) -> None:
    """A 2025-era server's elicitation names no call (host_cancels.py). The first call's card was
    made while only that call was at the server: cancelling it closes the card at once. The second's
    was made while both were: its card closes when the server withdraws it, attributed to the
    host's cancel. Either way the other card stays up and is answered as usual; `merged`: through
    serve's one session with every server (the tool is `demo__book_table`)."""
    name = f"Two-calls-{cancelled}{'-merged' if merged else ''}"
    serving = () if merged else ("--server", "demo")
    host = open_beside(Host(hosts, serve_params(main.connection, *serving), name, mode="legacy"), main)
    try:
        calls: dict[str, concurrent.futures.Future[types.CallToolResult]] = {}
        cards: dict[str, dict[str, Any]] = {}
        for which in ("first", "second"):
            restaurant = f"{which}-of-two-{name}"
            calls[which] = host.start(partial(book, restaurant=restaurant,
                                              tool="demo__book_table" if merged else "book_table"))
            cards[which] = card_of(window, restaurant)
        kept = "second" if cancelled == "first" else "first"
        calls[cancelled].cancel()  # notifications/cancelled for one of the two calls at demo
        dismiss = dismiss_of(window, cards[cancelled])
        assert (dismiss["reason"], dismiss.get("cause")) == ("cancelled", "host-gone")
        row, table = audit_row(main, cards[cancelled]["responseChannel"])
        assert row["outcome"] == "host-gone" and row["via"] == name
        line = next(line for line in table.splitlines() if f"{cancelled}-of-two-{name}" in line)
        assert "host stopped waiting" in line
        still_up = [p["responseChannel"] for p in status_json(main)["pending"]]
        assert still_up == [cards[kept]["responseChannel"]]  # the other call's card is still up
        window.answer(cards[kept], "accept", {"name": "Ada", "party_size": 2})
        answer = json.loads(text_of(calls[kept].result(WAIT_S)))
        assert answer["action"] == "accept" and answer["content"]["name"] == "Ada"
        kept_row, _ = audit_row(main, cards[kept]["responseChannel"])
        assert kept_row["outcome"] == "accept"
    finally:
        host.close()
