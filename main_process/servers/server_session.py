"""One configured server's mcp.Client connection (servers.py supervises it): connect, list tools,
then watch it; whenever the server's tools, resources or prompts may have changed (it said so, or
its listing changed), host peers hear of it (`publish_list_changed`)."""

import asyncio
import logging
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Protocol, TextIO

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged
from mcp_types import (
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    Implementation,
    PromptListChangedNotification,
    ResourceListChangedNotification,
    Tool,
    ToolListChangedNotification,
)
from pydantic import ValidationError

from main_process.config import HttpServerConfig, ServerConfig, StdioServerConfig
from main_process.oauth.sign_in import SignIn
from main_process.private_files import open_private
from main_process.servers.server_era import READY_TIMEOUT_S, ProtocolEra
from main_process.servers.server_faults import describe
from main_process.servers.stdio_transport import capped_stdio_client
from shared.messages import ListName, ServerStatus

logger = logging.getLogger(__name__)

WATCH_INTERVAL_S = 2.0
WATCH_TIMEOUT_S = 10.0
ALL_LISTS: list[ListName] = ["tools", "resources", "prompts"]
_LIST_NOTIFICATIONS: dict[type, ListName] = {  # handshake era: notifications
    ToolListChangedNotification: "tools", ResourceListChangedNotification: "resources",
    PromptListChangedNotification: "prompts",
}
_LIST_EVENTS: dict[type, ListName] = {  # 2026-07-28: events on a subscriptions/listen stream
    ToolsListChanged: "tools", ResourcesListChanged: "resources", PromptsListChanged: "prompts",
}


class _Notices(Protocol):
    def publish_servers(self) -> None: ...

    def publish_list_changed(self, server: str, lists: list[ListName]) -> None: ...

    def publish_complete(self, server: str, elicitation_id: str) -> None: ...


class _Elicitations(Protocol):
    async def on_elicit(self, context: Any, params: ElicitRequestParams) -> ElicitResult | ErrorData: ...


class _Server(Protocol):
    """What the connection reads and keeps of its server (servers.ManagedServer)."""

    client: Client | None
    call_group: anyio.abc.TaskGroup | None
    connection_calls: set[asyncio.Task[None]] | None
    connection_lost: bool
    tools: list[str]
    listed: dict[str, Tool]
    instructions: str | None

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> ServerConfig: ...

    @property
    def sign_in(self) -> SignIn | None: ...

    @property
    def stopping(self) -> asyncio.Event: ...

    @property
    def became_ready(self) -> asyncio.Event: ...

    @property
    def completions(self) -> dict[str, asyncio.Event]: ...

    @property
    def tasks(self) -> set[asyncio.Task[None]]: ...

    @property
    def stderr_log(self) -> Path: ...

    @property
    def ports(self) -> _Notices: ...

    @property
    def era(self) -> ProtocolEra: ...

    @property
    def elicitation(self) -> _Elicitations: ...

    def set_status(self, status: ServerStatus, error: str | None) -> None: ...


class ServerSession:
    """The server's current connection, made by `run` and watched until it ends."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._listing_digest = ""  # of the last tools listing, to notice a change

    async def run(self) -> None:
        server = self._server
        server.connection_lost = False
        mode = server.era.protocol_mode()
        era_switch = server.era.new_connection()
        async with AsyncExitStack() as stack:
            client = Client(
                await self._transport(stack),
                elicitation_callback=server.elicitation.on_elicit,
                message_handler=self.on_message,
                mode=mode,
                client_info=Implementation(name="elicitron", version="0.1.0"),
                cache=None,  # tool listings double as a liveness probe, so never serve them from cache
            )
            try:
                await stack.enter_async_context(client)
            except Exception as exc:
                server.era.handshake_failed(mode, exc)
                raise
            if not await server.era.modern_era_sound(client):
                return  # a verdict: run() reconnects in the handshake era
            try:
                with anyio.fail_after(READY_TIMEOUT_S):
                    listing = await client.list_tools()
            except Exception as exc:
                if server.era.fall_back(client, exc, "tools/list"):
                    return
                raise
            async with anyio.create_task_group() as group:
                calls: set[asyncio.Task[None]] = set()
                server.client, server.call_group, server.connection_calls = client, group, calls
                server.tools = [tool.name for tool in listing.tools]
                server.listed = {tool.name: tool for tool in listing.tools}
                self._listing_digest = listing.model_dump_json()
                server.instructions = client.instructions
                # Logged before anyone is told: a reader of the log who saw `ready` finds the line.
                logger.info("server %s ready (protocol %s, %d tools)", server.name, client.protocol_version,
                            len(server.tools))
                server.set_status("ready", None)
                server.became_ready.set()
                group.start_soon(self._watch, client, group)
                group.start_soon(self._end_calls_with_connection, calls)
                group.start_soon(self._listen_for_list_changes, client)
                group.start_soon(server.era.replace_when_asked, era_switch, calls, group)

    async def _end_calls_with_connection(self, calls: set[asyncio.Task[None]]) -> None:
        """When the connection ends, so do its calls (each then replies with an error)."""
        try:
            await anyio.sleep_forever()
        finally:
            for task in calls:
                task.cancel()
            if calls:
                with anyio.CancelScope(shield=True):
                    await asyncio.wait(set(calls))

    async def _listen_for_list_changes(self, client: Client) -> None:
        """2026-07-28 servers announce list changes only on a `subscriptions/listen` stream; open one
        when the server offers any (handshake-era servers send notifications, see `on_message`)."""
        server = self._server
        capabilities = client.server_capabilities
        tools = bool(capabilities.tools and capabilities.tools.list_changed)
        prompts = bool(capabilities.prompts and capabilities.prompts.list_changed)
        resources = bool(capabilities.resources and capabilities.resources.list_changed)
        if not (tools or prompts or resources):
            return
        try:
            async with client.listen(tools_list_changed=tools, prompts_list_changed=prompts,
                                     resources_list_changed=resources) as subscription:
                async for event in subscription:
                    changed = _LIST_EVENTS.get(type(event))
                    if changed is not None:
                        self.list_changed(changed)
        except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError, ValidationError) as exc:
            if server.era.fall_back(client, exc, "subscriptions/listen"):
                return
            # Not fatal: the tool listing is still polled by _watch.
            logger.info("server %s: no list-change stream (%s)", server.name, describe(exc))

    def list_changed(self, changed: ListName) -> None:
        """The server says a list changed: tools are listed again first, so the `servers` push
        (the names callers check) is current before host peers hear of it."""
        server = self._server
        client = server.client
        if changed != "tools" or client is None:
            server.ports.publish_list_changed(server.name, [changed])
            return
        task = asyncio.create_task(self._relist_tools(client))
        server.tasks.add(task)
        task.add_done_callback(server.tasks.discard)

    async def _relist_tools(self, client: Client) -> None:
        server = self._server
        try:
            async with asyncio.timeout(WATCH_TIMEOUT_S):
                listing = await client.list_tools()
        except (MCPError, TimeoutError, ValidationError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            if not server.era.fall_back(client, exc, "tools/list"):
                logger.info("server %s: listing its tools after a change failed: %s", server.name, describe(exc))
        else:
            self._listing_digest = listing.model_dump_json()
            names = [tool.name for tool in listing.tools]
            if names != server.tools:
                server.tools = names
                server.ports.publish_servers()
        server.ports.publish_list_changed(server.name, ["tools"])

    async def _watch(self, client: Client, group: anyio.abc.TaskGroup) -> None:
        """End the connection when stop is asked or the server stops answering."""
        server = self._server
        while True:
            with anyio.move_on_after(WATCH_INTERVAL_S):
                await server.stopping.wait()
            if server.stopping.is_set():
                group.cancel_scope.cancel()
                return
            if server.sign_in is not None and server.sign_in.in_progress:
                continue  # a probe would wait behind the sign-in's lock, which is no sign of a dead server
            try:
                with anyio.fail_after(WATCH_TIMEOUT_S):
                    listing = await client.list_tools()
            except Exception as exc:
                if server.era.fall_back(client, exc, "tools/list"):
                    return  # the connection is being replaced
                server.connection_lost = True
                raise
            except BaseException:
                # Set before the task group cancels the calls, so their requests read server-closed.
                server.connection_lost = True
                raise
            names = [tool.name for tool in listing.tools]
            server.listed = {tool.name: tool for tool in listing.tools}
            if names != server.tools:
                server.tools = names
                server.ports.publish_servers()
            digest = listing.model_dump_json()
            if digest != self._listing_digest:  # a server that changes its tools without saying so
                self._listing_digest = digest
                server.ports.publish_list_changed(server.name, ["tools"])

    async def _transport(self, stack: AsyncExitStack) -> Any:
        server = self._server
        config = server.config
        if isinstance(config, HttpServerConfig):
            auth = server.sign_in.provider if server.sign_in is not None else None
            if not config.headers and auth is None:
                return streamable_http_client(config.url)
            http = await stack.enter_async_context(create_mcp_http_client(headers=config.headers or None, auth=auth))
            return streamable_http_client(config.url, http_client=http)
        assert isinstance(config, StdioServerConfig)
        # The SDK hands stderr to the child as a file descriptor, so it must be a real file; 0600,
        # since a server's output may hold its secrets.
        errlog: TextIO = stack.enter_context(open_private(server.stderr_log))
        return capped_stdio_client(config, errlog)  # the SDK's stdio_client, with a line cap

    async def on_message(self, message: Any) -> None:
        """Server notifications: URL-mode completion closes the waiting state everywhere; a list
        change goes to the host peers."""
        server = self._server
        root = getattr(message, "root", message)
        changed = _LIST_NOTIFICATIONS.get(type(root))
        if changed is not None:
            self.list_changed(changed)
            return
        if isinstance(root, ElicitCompleteNotification):
            elicitation_id = root.params.elicitation_id
            event = server.completions.get(elicitation_id)
            if event is not None:
                event.set()
            server.ports.publish_complete(server.name, elicitation_id)
