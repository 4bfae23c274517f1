"""A controller peer for the CLI: attach to a running main, ask something, wait for the answer.

The blocking adapter over shared/peer.py's core: it owns one DEALER and a wait loop (poll, feed
what came, tick); the core says when to heartbeat, when main is gone (3 s of silence, its `bye`)
and where each reply goes. It never attaches again by itself: a CLI command says main went away.
"""

import logging
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import zmq

from shared import channels
from shared.codec import encode
from shared.connection_file import main_is_gone, read_connection_file
from shared.errors import ConnectionFileError, MainUnreachableError
from shared.messages import (
    AuthRequest,
    Body,
    CallTool,
    CancelCall,
    ChannelReply,
    ErrorNotice,
    Progress,
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
from shared.peer import (
    ATTACH_TIMEOUT_S,
    AttachFailed,
    Effect,
    Lost,
    PeerCore,
    Policy,
    Pushed,
    Refused,
    SocketWork,
    Timing,
    Welcomed,
    curve_options,
)

logger = logging.getLogger(__name__)

_REQUEST_TOPICS = (channels.CALL_TOOL, channels.STATUS, channels.SERVER_CONTROL, channels.RELOAD,
                   channels.MCP_REQUEST, channels.AUTH, channels.RULES, channels.REVOKE_RULES)


class _Reply:
    """The core's waiter on one response channel."""

    def __init__(self) -> None:
        self.answer: ChannelReply | None = None

    def reply(self, answer: ChannelReply) -> None:
        self.answer = answer

    def progress(self, update: Progress) -> None:
        pass

    def refused(self, notice: ErrorNotice) -> None:
        pass

    def lost(self, why: str) -> None:
        pass  # the wait loop raises on the core's Lost


class Controller:
    def __init__(self, connection_path: Path, name: str = "elicitron-cli",
                 attach_timeout_s: float = ATTACH_TIMEOUT_S) -> None:
        self.connection_path = connection_path
        self._name = name
        self._attach_timeout_s = attach_timeout_s
        self.window = ""  # minted at attach: a CLI that finds no main never pays for a uuid7
        self.welcome: Welcome | None = None
        self.pid: int | None = None
        self.remote = False
        self._sock: zmq.Socket[bytes] | None = None
        self._core: PeerCore | None = None
        self._work = SocketWork(self._send, self._connect, self._disconnect)

    def __enter__(self) -> Self:
        self.attach()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def attach(self) -> Welcome:
        self.window = self.window or channels.new_uuid7()
        self._core = PeerCore(role="controller", name=self._name, window=self.window,
                              timing=Timing(attach_timeout=self._attach_timeout_s), policy=Policy(reattach=False))
        self._apply(self._core.attach(time.monotonic()))
        effect = self._wait_for(lambda e: isinstance(e, Welcomed), self._attach_timeout_s + 1.0)
        assert isinstance(effect, Welcomed)
        self.welcome = effect.welcome
        return effect.welcome

    def close(self) -> None:
        if self._core is not None:
            self._apply(self._core.close(), linger_ms=500)

    def status(self, timeout_s: float = 5.0) -> StatusReport:
        channel = "status-" + channels.new_uuid7()
        reply = self._request(channels.STATUS, StatusRequest(response_channel=channel), channel, timeout_s)
        if reply.status is None:
            raise MainUnreachableError("main sent no status")
        return reply.status

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any], timeout_s: float) -> ChannelReply:
        """The call's answer. Given up on (a signal, the timeout, main gone), the call is cancelled at
        the server (msgCancelCall): its cards leave every window rather than wait for nobody."""
        channel = "call-" + channels.new_uuid7()
        body = CallTool(server=server, tool=tool, arguments=arguments, response_channel=channel)
        try:
            return self._request(channels.CALL_TOOL, body, channel, timeout_s)
        except BaseException:
            self._send(channels.CANCEL_CALL, CancelCall(response_channel=channel))
            raise

    def control_server(self, server: str, action: str, timeout_s: float = 30.0) -> ChannelReply:
        channel = "control-" + channels.new_uuid7()
        body = ServerControl(server=server, action=action, response_channel=channel)  # type: ignore[arg-type]
        return self._request(channels.SERVER_CONTROL, body, channel, timeout_s)

    def rotate_http_token(self, timeout_s: float = 90.0) -> ChannelReply:
        """A new `--mcp-http` token; answered once the HTTP gateway restarted on it."""
        channel = "rotate-" + channels.new_uuid7()
        return self._request(channels.ROTATE_HTTP_TOKEN, RotateHttpToken(response_channel=channel), channel,
                             timeout_s)

    def reload(self, timeout_s: float = 30.0, config: str | None = None) -> ChannelReply:
        """`config`: an absolute path for main to read instead of its own config (it becomes main's)."""
        channel = "reload-" + channels.new_uuid7()
        return self._request(channels.RELOAD, Reload(response_channel=channel, config=config), channel, timeout_s)

    def wait_server(self, name: str, settled: Callable[[ServerInfo], bool],
                    timeout_s: float) -> ServerInfo | None:
        """Server `name` as main reports it (its status reply, then its `servers` pushes) once
        `settled(it)` holds, or as last reported when `timeout_s` runs out; None if main has no
        such server."""
        deadline = time.monotonic() + timeout_s
        current = next((s for s in self.status().servers if s.name == name), None)
        while current is not None and not settled(current) and (left := deadline - time.monotonic()) > 0:
            try:
                pushed = self._wait_for(lambda e: isinstance(e, Pushed) and isinstance(e.body, ServersUpdate), left)
            except MainUnreachableError:
                if time.monotonic() < deadline:
                    raise  # main went away
                break
            assert isinstance(pushed, Pushed) and isinstance(pushed.body, ServersUpdate)
            current = next((s for s in pushed.body.servers if s.name == name), current)
        return current

    def rules(self, timeout_s: float = 5.0) -> list[RuleInfo]:
        channel = "rules-" + channels.new_uuid7()
        reply = self._request(channels.RULES, RulesRequest(response_channel=channel), channel, timeout_s)
        if reply.rules is None:
            raise MainUnreachableError("main sent no rules")
        return reply.rules

    def revoke_rules(self, ids: list[str], revoke_all: bool, server: str | None, asker: str | None = None,
                     timeout_s: float = 5.0) -> RevokeReport:
        channel = "revoke-" + channels.new_uuid7()
        body = RevokeRules(response_channel=channel, ids=ids, revoke_all=revoke_all, server=server, asker=asker)
        reply = self._request(channels.REVOKE_RULES, body, channel, timeout_s)
        if reply.revoked is None:
            raise MainUnreachableError("main sent no revoke report")
        return reply.revoked

    def shutdown(self) -> None:
        self._send(channels.SHUTDOWN, Shutdown())

    def auth(self, server: str, action: str, timeout_s: float = 30.0) -> ChannelReply:
        """Extension msgAuth: a server's sign-in status, login or logout."""
        channel = "auth-" + channels.new_uuid7()
        body = AuthRequest(server=server, action=action, response_channel=channel)  # type: ignore[arg-type]
        return self._request(channels.AUTH, body, channel, timeout_s)

    # ---- the blocking adapter ----------------------------------------------------------------

    def _request(self, topic: str, body: Body, channel: str, timeout_s: float) -> ChannelReply:
        assert self._core is not None
        waiter = _Reply()
        self._core.expect(channel, waiter)
        try:
            self._send(topic, body)
            self._wait_for(lambda e: waiter.answer is not None, timeout_s)
        finally:
            self._core.forget(channel)
        assert waiter.answer is not None
        return waiter.answer

    def _send(self, topic: str, body: Body) -> None:
        if self._sock is None or self._core is None:
            return
        try:
            self._sock.send_multipart(encode(topic, body))
        except zmq.ZMQError as exc:
            logger.debug("%s not sent: %s", topic, exc)
            return
        self._core.sent(time.monotonic())

    def _apply(self, effects: list[Effect], linger_ms: int = 0) -> list[Effect]:
        """Socket work done here; the rest is returned for the wait loop."""
        return [effect for effect in effects if not self._work.do(effect, linger_ms)]

    def _disconnect(self, linger_ms: int) -> None:
        if self._sock is not None:
            self._sock.close(linger=linger_ms)
            self._sock = None

    def _connect(self) -> None:
        assert self._core is not None
        now = time.monotonic()
        try:
            info = read_connection_file(self.connection_path)
            if main_is_gone(info):  # main was killed without cleaning up: say so now, not after the timeout
                raise ConnectionFileError(f"no main is running (stale connection file {self.connection_path}: "
                                          f"pid {info.pid} is gone)")
            options = curve_options(info, self.connection_path)
        except ConnectionFileError as exc:
            raise MainUnreachableError(str(exc)) from None
        self.pid = info.pid
        self.remote = info.endpoint.startswith("tcp://")  # a paired file: `pid` is on main's machine
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 500)
        for option, key in options:
            sock.setsockopt(option, key)
        sock.connect(info.endpoint)
        self._sock = sock
        self._apply(self._core.connected(info, now))

    def _wait_for(self, wanted: Callable[[Effect | None], bool], timeout_s: float) -> Effect | None:
        """Pump the socket and the core until `wanted` holds of an effect (or of None, checked after
        every frame); heartbeats go out meanwhile. Raises MainUnreachableError when main is gone,
        refuses the request, or says nothing wanted within `timeout_s`."""
        assert self._core is not None
        deadline = time.monotonic() + timeout_s
        while (now := time.monotonic()) < deadline:
            sock = self._sock
            if sock is None:
                raise MainUnreachableError("not attached to main")
            effects = self._core.tick(now)
            if sock.poll(int(min(self._core.timing.tick, deadline - now) * 1000) + 1):
                effects += self._core.feed(sock.recv_multipart(), time.monotonic())
            for effect in [*self._apply(effects), None]:
                self._raise_for(effect)
                if wanted(effect):
                    return effect
        raise MainUnreachableError(f"no answer from main within {timeout_s:.0f} s ({self.connection_path})")

    def _raise_for(self, effect: Effect | None) -> None:
        match effect:
            case AttachFailed(why) | Lost(why):
                raise MainUnreachableError(f"{why} ({self.connection_path})")
            case Refused(notice) if notice.topic in _REQUEST_TOPICS:
                raise MainUnreachableError(f"main refused the request: {notice.code}: {notice.message}")
            case _:
                pass
