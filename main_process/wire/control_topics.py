"""What controllers and windows ask of main itself: status, server control, reload, the MCP HTTP
token, a server's policy, sign-in, shutdown."""

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from main_process.log_limiter import cut
from main_process.wire.peers import Peer
from main_process.wire.replies import Replies
from main_process.wire.topic_routes import ReplyTo, handles
from shared import channels
from shared.errors import RpcCode
from shared.messages import (
    AuthRequest,
    CallError,
    ChannelReply,
    Reload,
    RotateHttpToken,
    ServerControl,
    ServerPolicy,
    Shutdown,
    SignInRedirect,
    StatusReport,
    StatusRequest,
)

logger = logging.getLogger(__name__)


class ServerControlPorts(Protocol):
    """What acts on one configured server (server_desk.py)."""

    def control_server(self, request: ServerControl) -> Awaitable[ChannelReply]: ...

    def auth(self, request: AuthRequest) -> Awaitable[ChannelReply]:
        """Extension msgAuth: a server's sign-in status, login or logout."""

    def sign_in_redirect(self, request: SignInRedirect) -> Awaitable[ChannelReply]:
        """Extension msgSignInRedirect: an address pasted in a window on another machine."""


class ControlTopics:
    def __init__(self, ports: ServerControlPorts, replies: Replies, *, status: Callable[[], StatusReport],
                 reload: Callable[[str | None], Awaitable[ChannelReply]], shutdown: Callable[[], None],
                 server_policy: Callable[[ServerPolicy, Peer], None],
                 rotate_http_token: Callable[[], Awaitable[None]] | None) -> None:
        """`reload`: re-read the config (or the one named); `server_policy`: "Decline all" for a
        server, or not; `rotate_http_token`: how to rotate main's
        MCP HTTP token (None: main serves no MCP over HTTP)."""
        self._ports = ports
        self._replies = replies
        self._status = status
        self._reload = reload
        self._shutdown = shutdown
        self._server_policy = server_policy
        self._rotate_http_token = rotate_http_token

    @handles(channels.STATUS)
    def _on_status(self, peer: Peer, body: StatusRequest, reply: ReplyTo) -> None:
        reply(ChannelReply(status=self._status()))

    @handles(channels.SERVER_CONTROL)
    def _on_server_control(self, peer: Peer, body: ServerControl, reply: ReplyTo) -> None:
        self._replies.later(reply, self._ports.control_server(body))

    @handles(channels.RELOAD)
    def _on_reload(self, peer: Peer, body: Reload, reply: ReplyTo) -> None:
        self._replies.later(reply, self._reload(body.config))

    @handles(channels.ROTATE_HTTP_TOKEN)
    def _on_rotate_http_token(self, peer: Peer, body: RotateHttpToken, reply: ReplyTo) -> None:
        self._replies.later(reply, self._rotated_http_token())

    @handles(channels.SERVER_POLICY)
    def _on_server_policy(self, peer: Peer, body: ServerPolicy) -> None:
        self._server_policy(body, peer)

    @handles(channels.AUTH)
    def _on_auth(self, peer: Peer, body: AuthRequest, reply: ReplyTo) -> None:
        self._replies.later(reply, self._ports.auth(body))

    @handles(channels.SIGN_IN_REDIRECT)
    def _on_sign_in_redirect(self, peer: Peer, body: SignInRedirect, reply: ReplyTo) -> None:
        self._replies.later(reply, self._ports.sign_in_redirect(body))

    @handles(channels.SHUTDOWN)
    def _on_shutdown(self, peer: Peer, body: Shutdown) -> None:
        logger.info("shutdown requested by %r (%s)", cut(peer.name or peer.window), peer.role)
        self._shutdown()

    async def _rotated_http_token(self) -> ChannelReply:
        rotate = self._rotate_http_token
        if rotate is None:
            return ChannelReply(error=CallError(code=RpcCode.INVALID_REQUEST, message=(
                "main does not serve MCP over HTTP; start it with `elicitron main --mcp-http [HOST:]PORT`")))
        logger.info("rotating the MCP HTTP bearer token")
        await rotate()
        return ChannelReply(status=self._status())
