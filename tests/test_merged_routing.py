"""Where the merged gateway (`elicitron serve` without --server) sends what a host asks, with
servers made to mislead it (issue 24): a catch-all resource template on one server never answers a
read of a URI another server listed (finding 12), and a `<server>__<name>` two servers would both
produce is refused, the same way whatever the host did first, with a notice the host and
`elicitron status` show (finding 15). A real main, real servers (tests/merge_probe_server.py), and
mcp's own `Client` as the host in both eras."""

from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from gateway_kit import HostLoop, serve_params
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT
from kit.zygote import launched
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = [pytest.mark.slow,  # a real main, gateways, servers and hosts
              pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]

PROBE = ROOT / "tests" / "merge_probe_server.py"
CLASH = "a__b__c"  # server a's tool b__c, and server a__b's tool c


def probe(role: str) -> dict[str, Any]:
    return launched(PROBE, role)


@pytest.fixture(scope="module")
def routing_main(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMain]:
    runtime = short_tmp_dir()
    # The catch-all comes first: a router that takes the first match sends every read there.
    config = write_config(tmp_path_factory.mktemp("routing") / "mcp.json", {
        "catchall": probe("catchall"), "files": probe("files"), "notes": probe("notes"), "a": probe("a"),
        "a__b": probe("a__b")})
    running = start_main(config, runtime)
    try:
        for name in ("catchall", "files", "notes", "a", "a__b"):
            running.wait_server_ready(name)
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def hosts() -> Iterator[HostLoop]:
    loop = HostLoop()
    yield loop
    loop.close()


def session(loop: HostLoop, main: RunningMain, mode: str, body: Any, logs: list[str] | None = None) -> Any:
    """Run `body(client)` in one host session through `elicitron serve` (every server, merged)."""
    async def log(params: types.LoggingMessageNotificationParams) -> None:
        if logs is not None:
            logs.append(str(params.data))

    client = Client(serve_params(main.connection), mode=mode, logging_callback=log,
                    log_level="info" if mode == "auto" else None, cache=None,
                    client_info=types.Implementation(name=f"routing-{mode}", version="1"))

    async def run() -> Any:
        async with client:
            with anyio.fail_after(90):
                return await body(client)

    return loop.run(run(), 120)


def text(result: types.ReadResourceResult) -> str:
    return "".join(getattr(item, "text", "") for item in result.contents)


# ---- finding 12: reads --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_read_goes_to_the_server_that_listed_the_uri_not_to_a_catch_all_template(
    routing_main: RunningMain, hosts: HostLoop, mode: str
) -> None:
    async def body(client: Client) -> list[str]:
        templates = await client.list_resource_templates()  # the host knows the templates, not the list
        assert {t.uri_template for t in templates.resource_templates} == {"{+uri}", "note://notes/{name}"}
        return [text(await client.read_resource(uri))
                for uri in ("note://files/readme", "note://notes/today", "zzz://elsewhere")]

    assert session(hosts, routing_main, mode, body) == [
        "files read note://files/readme",  # listed by files
        "notes read note://notes/today",  # notes' template is the most specific match
        "catchall read zzz://elsewhere",  # only the catch-all matches
    ]


def test_a_read_with_nothing_listed_yet_goes_to_the_server_that_lists_the_uri(
    routing_main: RunningMain, hosts: HostLoop
) -> None:
    async def body(client: Client) -> str:
        return text(await client.read_resource("note://files/readme"))

    assert session(hosts, routing_main, "legacy", body) == "files read note://files/readme"


# ---- finding 15: names two servers would share --------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_name_two_servers_would_share_is_refused_with_a_notice_the_host_gets(
    routing_main: RunningMain, hosts: HostLoop, mode: str
) -> None:
    logs: list[str] = []

    async def body(client: Client) -> tuple[list[str], str]:
        names = [tool.name for tool in (await client.list_tools()).tools]
        with pytest.raises(MCPError) as refused:
            await client.call_tool(CLASH, {})
        return names, refused.value.error.message

    names, refusal = session(hosts, routing_main, mode, body, logs)
    assert "a__d" in names and CLASH not in names
    assert "ambiguous" in refusal and "'a'" in refusal and "'a__b'" in refusal
    notice = [line for line in logs if CLASH in line]
    assert len(notice) == 1, logs  # once, at listing time
    assert "'b__c' of server 'a'" in notice[0] and "'c' of server 'a__b'" in notice[0]
    assert "--server" in notice[0]  # and how to reach each of them


def test_a_shared_name_is_refused_the_same_way_when_called_before_any_listing(
    routing_main: RunningMain, hosts: HostLoop
) -> None:
    async def body(client: Client) -> str:
        with pytest.raises(MCPError) as refused:
            await client.call_tool(CLASH, {})
        return refused.value.error.message

    for _ in range(2):  # a fresh session each time: no listing was ever seen
        assert "ambiguous" in session(hosts, routing_main, "legacy", body)


def test_status_names_the_names_merged_hosts_cannot_call(routing_main: RunningMain) -> None:
    shown = routing_main.cli("status")
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if CLASH in line]
    assert len(lines) == 1, shown.stdout
    assert "'b__c' of server 'a'" in lines[0] and "'c' of server 'a__b'" in lines[0]
