"""GatewayServer: the MCP server a host talks to, answering every request through main.

A low-level `mcp.server.lowlevel.Server` (both protocol eras: the host's first request decides)
whose handlers find the host's `HostSession` for each request (`session_for`: one per stdio
process; per HTTP session or client on `--mcp-http`) and forward: lists to `catalog`, tool calls to
`forward`. Anything a host gets wrong (an unknown or wrongly prefixed name, a request too large for
main) is a JSON-RPC error naming the problem; main and the other hosts never see it.
"""

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway_process import catalog
from gateway_process.forward import drive_legacy, drive_modern, take_answers
from gateway_process.handshake import server_info
from gateway_process.names import Exposure, combined_instructions
from gateway_process.session import HostCall, HostSession
from shared.errors import (
    ConfigError,
    MainUnreachableError,
    RpcCode,
    UndeliverableRequestError,
    UnknownNameError,
)
from shared.messages import ServerInfo

logger = logging.getLogger(__name__)

SessionFor = Callable[[ServerRequestContext[Any, Any]], HostSession]
_EVERY_LIST = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)


class _ProxyServer(Server[Any]):
    """Announces list-changed support for every list (the gateway relays them all) and reads its
    instructions when a host initializes, not when the transport starts."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(notification_options or _EVERY_LIST,
                                                     experimental_capabilities, extensions)


@contextmanager
def _as_rpc_errors() -> Iterator[None]:
    """Elicitron's own errors as the JSON-RPC errors a host understands."""
    try:
        yield
    except UnknownNameError as exc:
        raise MCPError(code=RpcCode.INVALID_PARAMS, message=str(exc)) from None
    except UndeliverableRequestError as exc:
        raise MCPError(code=RpcCode.INVALID_PARAMS, message=f"request not sent: {exc}") from None
    except MainUnreachableError as exc:
        raise MCPError(code=RpcCode.SERVER_ERROR, message=f"Elicitron's main is not reachable: {exc}") from None
    except ConfigError as exc:
        raise MCPError(code=RpcCode.SERVER_ERROR, message=f"Elicitron's main cannot start: {exc}") from None


class GatewayServer:
    def __init__(self, exposure: Exposure, session_for: SessionFor) -> None:
        self.exposure = exposure
        self._session_for = session_for
        identity = server_info(exposure)  # the same as the early answer to `initialize` (handshake.py)
        self.server = _ProxyServer(
            identity["name"],
            version=identity["version"],
            title=identity.get("title"),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_subscriptions_listen=self._listen,
        )
        # The SDK's default OpenTelemetry span per message is dropped: the gateway only relays (the
        # servers behind it trace their own work), and it costs every call.
        self.server.middleware = [self._note_host]
        # 2026-07-28 HTTP validates Mcp-Param headers of every tools/call against the tool's schema;
        # from the last listing rather than a full listing through main per call.
        self._input_schemas: dict[str, dict[str, Any]] = {}
        self.server.get_tool_input_schema = self._input_schemas.get

    def refresh_instructions(self, servers: dict[str, ServerInfo]) -> None:
        self.server.instructions = combined_instructions(self.exposure, servers)

    async def _note_host(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "initialize":
            return await call_next(ctx)  # the host's info is committed only after it
        session = self._session_for(ctx)
        session.note_client(ctx)  # every request after the handshake (or carrying the 2026 envelope) knows it
        return await call_next(ctx)

    # ---- lists --------------------------------------------------------------------------------

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        with _as_rpc_errors():
            listing = await catalog.list_all(self._session_for(ctx), "tools/list", "tools")
        self._input_schemas.update({tool["name"]: tool["inputSchema"] for tool in listing["tools"]
                                    if isinstance(tool.get("inputSchema"), dict)})
        return listing

    async def _list_resources(self, ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        with _as_rpc_errors():
            return await catalog.list_all(self._session_for(ctx), "resources/list", "resources")

    async def _list_resource_templates(self, ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        with _as_rpc_errors():
            return await catalog.list_all(self._session_for(ctx), "resources/templates/list", "resourceTemplates")

    async def _list_prompts(self, ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        with _as_rpc_errors():
            return await catalog.list_all(self._session_for(ctx), "prompts/list", "prompts")

    async def _read_resource(self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams) -> Any:
        with _as_rpc_errors():
            return await catalog.read_resource(self._session_for(ctx), str(params.uri))

    async def _get_prompt(self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams) -> Any:
        with _as_rpc_errors():
            return await catalog.get_prompt(self._session_for(ctx), params.name, params.arguments)

    async def _listen(self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams) -> Any:
        return await self._session_for(ctx).listen(ctx, params)

    # ---- calls ----------------------------------------------------------------------------------

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        session = self._session_for(ctx)
        call: HostCall | None = None
        with _as_rpc_errors():
            if params.request_state is not None:  # 2026-07-28: the retry after an input round
                call = session.resume(params.request_state)
                if call is None:
                    raise MCPError(code=RpcCode.INVALID_PARAMS, message="this call is no longer in progress "
                                   "(unknown or expired requestState); call the tool again")
                take_answers(call, params.input_responses)
            else:
                await session.ready()
                server, tool = session.exposure.resolve("tool", params.name, session.link.servers,
                                                        listed=self._input_schemas)
                wants_progress = progress_token_from_params(ctx.params) is not None
                call = session.start_call(server, tool, params.arguments or {}, wants_progress)
        try:
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return await drive_modern(ctx, call)
            return await drive_legacy(ctx, call)
        except anyio.get_cancelled_exc_class():
            call.cancel()  # the host cancelled or went away: so does the call, at the server
            raise
