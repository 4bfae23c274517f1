"""The configured servers as peers reach them: their list, their calls (msgMcpCallTool,
msgMcpRequest), start/stop/restart, "Decline all" and sign-in. One ManagedServer per name; a
reload (reloader.py) adds and removes them."""

import asyncio
import logging
from collections.abc import Iterator

from main_process.config import ServerConfig
from main_process.servers.server_faults import error_reply
from main_process.servers.servers import ManagedServer
from main_process.wire.broker_ports import Publisher
from main_process.wire.open_calls import OpenCalls
from main_process.wire.peer_calls import Cancel
from main_process.wire.peers import Peer
from main_process.wire.topic_routes import ProgressTo, ReplyTo
from shared.errors import RpcCode
from shared.messages import (
    AuthRequest,
    CallTool,
    ChannelReply,
    McpRequest,
    ServerControl,
    ServerControlReport,
    ServerInfo,
    ServerPolicy,
    SignInRedirect,
)

logger = logging.getLogger(__name__)


class ServerDesk:
    def __init__(self, calls: OpenCalls) -> None:
        """`calls`: the peers' calls not answered yet (all answered when main stops)."""
        self._servers: dict[str, ManagedServer] = {}
        self._calls = calls

    # ---- the list ----------------------------------------------------------------------

    def infos(self) -> list[ServerInfo]:
        return [server.info() for server in self._servers.values()]

    def get(self, name: str) -> ManagedServer | None:
        return self._servers.get(name)

    def __iter__(self) -> Iterator[ManagedServer]:
        return iter(list(self._servers.values()))

    def __len__(self) -> int:
        return len(self._servers)

    def add(self, server: ManagedServer) -> None:
        self._servers[server.name] = server

    def set_config(self, name: str, config: ServerConfig) -> None:
        """Its entry changed in ways that need no restart (toolApproval)."""
        self._servers[name].config = config

    async def remove(self, name: str) -> None:
        """Stop it, then forget it."""
        await self._servers[name].stop()
        del self._servers[name]

    async def stop_all(self) -> None:
        await asyncio.gather(*(server.stop() for server in self._servers.values()))

    def unknown(self, name: str) -> ChannelReply:
        configured = ", ".join(sorted(self._servers)) or "none"
        return error_reply(RpcCode.INVALID_PARAMS, f"unknown server {name!r} (configured: {configured})")

    # ---- calls (call_topics.CallPorts) ---------------------------------------------------

    def call_tool(self, request: CallTool, caller: Peer, reply: ReplyTo,
                  progress: ProgressTo | None = None) -> Cancel | None:
        server = self._servers.get(request.server)
        if server is None:
            reply(self.unknown(request.server))
            return None
        # Windows' and controllers' calls: the user's own, never approved (hosts call in their
        # relayed sessions, where consent decides: relay.py).
        return self._calls.start(reply, progress, lambda answer, report: server.call_tool(
            request.tool, request.arguments, caller.window, answer, call_id=request.response_channel,
            progress=report))

    def mcp_request(self, request: McpRequest, reply: ReplyTo) -> None:
        server = self._servers.get(request.server)
        if server is None:
            reply(self.unknown(request.server))
            return
        self._calls.start(reply, None, lambda answer, _report: server.mcp_request(request.method, request.params,
                                                                                    answer))

    # ---- control (control_topics.ServerControlPorts), sign-in -------------------------------

    async def control_server(self, request: ServerControl) -> ChannelReply:
        server = self._servers.get(request.server)
        if server is None:
            return self.unknown(request.server)
        logger.info("%s server %s on request", request.action, request.server)
        if request.action == "stop":
            await server.stop()
        elif request.action == "restart":
            await server.restart()
        else:
            server.start()
        return ChannelReply(control=ServerControlReport(server=request.server, status=server.status))

    async def auth(self, request: AuthRequest) -> ChannelReply:
        from main_process.oauth.commands import auth_command

        server = self._servers.get(request.server)
        return self.unknown(request.server) if server is None else await auth_command(server, request.action)

    async def sign_in_redirect(self, request: SignInRedirect) -> ChannelReply:
        from main_process.oauth.commands import pasted_redirect

        server = self._servers.get(request.server)
        return self.unknown(request.server) if server is None else await pasted_redirect(server, request)


class ServerPolicies:
    """msgServerPolicy: "Decline all from this server" for this session, said to every window."""

    def __init__(self, servers: ServerDesk, publisher: Publisher) -> None:
        self._servers = servers
        self._publisher = publisher

    def set_server_policy(self, policy: ServerPolicy, caller: Peer) -> None:
        server = self._servers.get(policy.server)
        if server is None:
            return
        server.decline_all = policy.decline_all
        verb = "declining every request" if policy.decline_all else "asking again"
        logger.info("server %s: %s for this session (chosen in %s)", policy.server, verb,
                    caller.name or caller.window)
        self._publisher.publish_notice("info", f"{verb} from this server for this session", policy.server)
