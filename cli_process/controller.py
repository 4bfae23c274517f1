"""A controller peer for the CLI: attach to a running main, ask something, wait for the answer."""

import logging
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import zmq

from shared import PROTOCOL_VERSION, channels
from shared.codec import decode_from_main, encode
from shared.connection_file import main_is_gone, read_connection_file, set_curve_client
from shared.errors import ConnectionFileError, MainUnreachableError, ProtocolError
from shared.messages import (
    Bye,
    CallTool,
    CancelCall,
    ChannelReply,
    ErrorNotice,
    Heartbeat,
    Hello,
    Reload,
    RevokeReport,
    RevokeRules,
    RotateHttpToken,
    RuleInfo,
    RulesRequest,
    ServerControl,
    ServerInfo,
    ServersUpdate,
    Shutdown,
    StatusReport,
    StatusRequest,
    Welcome,
)

logger = logging.getLogger(__name__)

HEARTBEAT_S = 1.0  # contract: a peer silent for 1 s sends a heartbeat
_REQUEST_TOPICS = (channels.CALL_TOOL, channels.STATUS, channels.SERVER_CONTROL, channels.RELOAD,
                   channels.MCP_REQUEST, channels.AUTH, channels.RULES, channels.REVOKE_RULES)


class Controller:
    def __init__(self, connection_path: Path, name: str = "elicitron-cli", attach_timeout_s: float = 5.0) -> None:
        self.connection_path = connection_path
        self._name = name
        self._attach_timeout_s = attach_timeout_s
        self.window = ""  # minted at attach: a CLI that finds no main never pays for a uuid7
        self.welcome: Welcome | None = None
        self.pid: int | None = None
        self.remote = False
        self._sock: zmq.Socket[bytes] | None = None
        self._last_sent = 0.0

    def __enter__(self) -> Self:
        self.attach()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def attach(self) -> Welcome:
        try:
            info = read_connection_file(self.connection_path)
        except ConnectionFileError as exc:
            raise MainUnreachableError(str(exc)) from exc
        if main_is_gone(info):
            # main was killed without cleaning up: say so now rather than after the attach timeout.
            raise MainUnreachableError(f"no main is running (stale connection file {self.connection_path}: "
                                       f"pid {info.pid} is gone)")
        self.pid = info.pid
        self.remote = info.endpoint.startswith("tcp://")  # a paired file: `pid` is on main's machine
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 500)
        try:
            set_curve_client(sock, info, self.connection_path)  # tcp: CURVE, as windows and askers do
        except ConnectionFileError as exc:
            sock.close(linger=0)
            raise MainUnreachableError(str(exc)) from None
        sock.connect(info.endpoint)
        self._sock = sock
        self.window = self.window or channels.new_uuid7()
        self._send(channels.HELLO, Hello(protocol=PROTOCOL_VERSION, token=info.token, window=self.window,
                                         name=self._name, role="controller"))
        _, body = self._wait_for(lambda t, b: t in (channels.WELCOME, channels.ERROR),
                                     self._attach_timeout_s)
        if isinstance(body, ErrorNotice):
            raise MainUnreachableError(f"main refused us: {body.code}: {body.message}")
        assert isinstance(body, Welcome)
        self.welcome = body
        return body

    def close(self) -> None:
        if self._sock is not None:
            self._send(channels.BYE, Bye())
            self._sock.close()
            self._sock = None

    def status(self, timeout_s: float = 5.0) -> StatusReport:
        channel = "status-" + channels.new_uuid7()
        self._send(channels.STATUS, StatusRequest(response_channel=channel))
        reply = self._wait_reply(channel, timeout_s)
        if reply.status is None:
            raise MainUnreachableError("main sent no status")
        return reply.status

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any], timeout_s: float) -> ChannelReply:
        """The call's answer. Given up on (a signal, the timeout, main gone), the call is cancelled at
        the server (msgCancelCall): its cards leave every window rather than wait for nobody."""
        channel = "call-" + channels.new_uuid7()
        self._send(channels.CALL_TOOL, CallTool(server=server, tool=tool, arguments=arguments,
                                                 response_channel=channel))
        try:
            return self._wait_reply(channel, timeout_s)
        except BaseException:
            if self._sock is not None:
                try:
                    self._send(channels.CANCEL_CALL, CancelCall(response_channel=channel))
                except zmq.ZMQError:
                    pass
            raise

    def control_server(self, server: str, action: str, timeout_s: float = 30.0) -> ChannelReply:
        channel = "control-" + channels.new_uuid7()
        self._send(channels.SERVER_CONTROL, ServerControl(server=server, action=action,  # type: ignore[arg-type]
                                                          response_channel=channel))
        return self._wait_reply(channel, timeout_s)

    def rotate_http_token(self, timeout_s: float = 90.0) -> ChannelReply:
        """A new `--mcp-http` token; answered once the HTTP gateway restarted on it."""
        channel = "rotate-" + channels.new_uuid7()
        self._send(channels.ROTATE_HTTP_TOKEN, RotateHttpToken(response_channel=channel))
        return self._wait_reply(channel, timeout_s)

    def reload(self, timeout_s: float = 30.0, config: str | None = None) -> ChannelReply:
        """`config`: an absolute path for main to read instead of its own config (it becomes main's)."""
        channel = "reload-" + channels.new_uuid7()
        self._send(channels.RELOAD, Reload(response_channel=channel, config=config))
        return self._wait_reply(channel, timeout_s)

    def wait_server(self, name: str, settled: Callable[[ServerInfo], bool],
                    timeout_s: float) -> ServerInfo | None:
        """Server `name` as main reports it (its status reply, then its `servers` pushes) once
        `settled(it)` holds, or as last reported when `timeout_s` runs out; None if main has no
        such server."""
        deadline = time.monotonic() + timeout_s
        current = next((s for s in self.status().servers if s.name == name), None)
        while current is not None and not settled(current) and (left := deadline - time.monotonic()) > 0:
            try:
                _, body = self._wait_for(lambda t, b: isinstance(b, ServersUpdate), left)
            except MainUnreachableError:
                if time.monotonic() < deadline:
                    raise  # main went away
                break
            current = next((s for s in body.servers if s.name == name), current)
        return current

    def rules(self, timeout_s: float = 5.0) -> list[RuleInfo]:
        channel = "rules-" + channels.new_uuid7()
        self._send(channels.RULES, RulesRequest(response_channel=channel))
        reply = self._wait_reply(channel, timeout_s)
        if reply.rules is None:
            raise MainUnreachableError("main sent no rules")
        return reply.rules

    def revoke_rules(self, ids: list[str], revoke_all: bool, server: str | None, asker: str | None = None,
                     timeout_s: float = 5.0) -> RevokeReport:
        channel = "revoke-" + channels.new_uuid7()
        self._send(channels.REVOKE_RULES, RevokeRules(response_channel=channel, ids=ids, revoke_all=revoke_all,
                                                      server=server, asker=asker))
        reply = self._wait_reply(channel, timeout_s)
        if reply.revoked is None:
            raise MainUnreachableError("main sent no revoke report")
        return reply.revoked

    def shutdown(self) -> None:
        self._send(channels.SHUTDOWN, Shutdown())

    def auth(self, server: str, action: str, timeout_s: float = 30.0) -> ChannelReply:
        """Extension msgAuth: a server's sign-in status, login or logout."""
        from shared.messages import AuthRequest

        channel = "auth-" + channels.new_uuid7()
        self._send(channels.AUTH, AuthRequest(server=server, action=action,  # type: ignore[arg-type]
                                              response_channel=channel))
        return self._wait_reply(channel, timeout_s)

    def _wait_reply(self, channel: str, timeout_s: float) -> ChannelReply:
        _, body = self._wait_for(lambda t, b: t == channel or (
            isinstance(b, ErrorNotice) and b.topic in _REQUEST_TOPICS), timeout_s)
        if isinstance(body, ErrorNotice):
            raise MainUnreachableError(f"main refused the request: {body.code}: {body.message}")
        assert isinstance(body, ChannelReply)
        return body

    def _send(self, topic: str, body: Any) -> None:
        assert self._sock is not None
        self._sock.send_multipart(encode(topic, body))
        self._last_sent = time.monotonic()

    def _wait_for(self, wanted: Any, timeout_s: float) -> tuple[str, Any]:
        """Receive until `wanted(topic, body)`; keep heartbeating so main does not drop us."""
        assert self._sock is not None
        deadline = time.monotonic() + timeout_s
        last_heard = time.monotonic()
        while (now := time.monotonic()) < deadline:
            if now - self._last_sent >= HEARTBEAT_S and self.welcome is not None:
                self._send(channels.HEARTBEAT, Heartbeat())
            if now - last_heard > 5.0 and self.welcome is not None:
                raise MainUnreachableError("main stopped answering (no heartbeat for 5 s)")
            if not self._sock.poll(int(min(HEARTBEAT_S, deadline - now) * 1000) + 1):
                continue
            last_heard = time.monotonic()
            try:
                topic, body = decode_from_main(self._sock.recv_multipart())
            except ProtocolError as exc:
                logger.warning("ignored a bad frame from main: %s", exc)
                continue
            if wanted(topic, body):
                return topic, body
        raise MainUnreachableError(f"no answer from main within {timeout_s:.0f} s ({self.connection_path})")
