"""Tools, resources and prompts of the exposed servers, fetched through main (`msgMcpRequest`).

Every page of every exposed server is fetched (following `nextCursor`) and handed to the host as
one page: items unchanged but for their `name` (`names.Exposure`). A server that is stopped or
failed is left out of a listing of all servers (the host sees what it can use); with one server
alone, its error is the host's error. Reads and prompt gets go to the one server that owns the name.
"""

import asyncio
import logging
from typing import Any

from mcp.shared.exceptions import MCPError

from gateway_process.forward import result_of
from gateway_process.session import HostSession
from shared import channels
from shared.errors import MainUnreachableError, RpcCode, UnknownNameError
from shared.messages import McpMethod, McpRequest

logger = logging.getLogger(__name__)

MAX_PAGES = 100  # per server and list: a paginator that never ends cannot hang the host
REQUEST_TIMEOUT_S = 60.0  # main waits up to 30 s for a starting server before it answers
_CACHE_FIELDS = {"ttlMs": 0, "cacheScope": "private", "resultType": "complete"}  # 2026-07-28 requires them


async def ask_main(session: HostSession, server: str, method: McpMethod, params: dict[str, Any]) -> dict[str, Any]:
    """One read-only MCP request through main; MCPError with main's (or the server's) code on failure."""
    await session.ready()
    channel = "req-" + channels.new_uuid7()
    try:
        reply = await session.link.request(channels.MCP_REQUEST, McpRequest(
            server=server, method=method, params=params, response_channel=channel), channel, REQUEST_TIMEOUT_S)
    except MainUnreachableError as exc:
        raise MCPError(code=RpcCode.SERVER_ERROR, message=f"Elicitron's main is not reachable: {exc}") from None
    return result_of(reply)


async def _all_pages(session: HostSession, server: str, method: McpMethod, key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await ask_main(session, server, method, {"cursor": cursor} if cursor else {})
        items += [item for item in page.get(key, []) if isinstance(item, dict)]
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
    return items


async def list_all(session: HostSession, method: McpMethod, key: str) -> dict[str, Any]:
    """One page with every exposed server's items, names as the host sees them."""
    await session.ready()
    exposure = session.exposure
    servers = exposure.servers(session.link.servers)
    pages = await asyncio.gather(*(_all_pages(session, server, method, key) for server in servers),
                                 return_exceptions=True)
    items: list[dict[str, Any]] = []
    for server, got in zip(servers, pages, strict=True):
        if isinstance(got, BaseException):
            if exposure.only is not None or not isinstance(got, MCPError):
                raise got
            logger.info("%s of %s left out: %s", method, server, got)
            continue
        if method in ("resources/list", "resources/templates/list"):
            session.note_resources(server, got, templates=method == "resources/templates/list")
        for item in got:
            if isinstance(item.get("name"), str):
                item = {**item, "name": exposure.public(server, item["name"])}
            items.append(item)
    return {key: items, **_CACHE_FIELDS}


async def read_resource(session: HostSession, uri: str) -> dict[str, Any]:
    await session.ready()
    server = session.owner_of(uri)
    if server is None:  # not listed since the last change: look again once
        await list_all(session, "resources/list", "resources")
        await list_all(session, "resources/templates/list", "resourceTemplates")
        server = session.owner_of(uri)
    if server is None:
        raise UnknownNameError(f"unknown resource {uri!r}: no exposed server lists it or a template matching it")
    return await ask_main(session, server, "resources/read", {"uri": uri})


async def get_prompt(session: HostSession, name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
    await session.ready()
    server, prompt = session.exposure.resolve("prompt", name, session.link.servers)
    params: dict[str, Any] = {"name": prompt}
    if arguments is not None:
        params["arguments"] = arguments
    return await ask_main(session, server, "prompts/get", params)
