"""A controller peer for the CLI: attach to a running main, ask something, wait for the answer.

shared/peer.py's core in shared/peer_blocking.py's wait loop: the core says when to heartbeat,
when main is gone (3 s of silence, its `bye`) and where each reply goes. It never attaches again by
itself: a CLI command says main went away.
"""

import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from shared import channels, messages, peer
from shared import peer_requests as requests
from shared.errors import AuditLogError, MainUnreachableError
from shared.peer_blocking import BlockingPeer


class Controller:
    def __init__(self, connection_path: Path, name: str = "elicitron-cli",
                 attach_timeout_s: float = peer.ATTACH_TIMEOUT_S) -> None:
        self.connection_path = connection_path
        self._name = name
        self._attach_timeout_s = attach_timeout_s
        self.window = ""  # minted at attach: a CLI that finds no main never pays for a uuid7
        self.welcome: messages.Welcome | None = None
        self.pid: int | None = None
        self.remote = False  # a paired file: `pid` is on main's machine
        self._peer: BlockingPeer | None = None

    def __enter__(self) -> Self:
        self.attach()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def attach(self) -> messages.Welcome:
        self.window = self.window or channels.new_uuid7()
        timing = peer.Timing(attach_timeout=self._attach_timeout_s)
        core = peer.PeerCore(role="controller", name=self._name, window=self.window, timing=timing,
                             policy=peer.Policy(reattach=False))
        self._peer = BlockingPeer(self.connection_path, core)
        self.welcome = self._peer.attach(self._attach_timeout_s + 1.0)
        assert core.info is not None
        self.pid, self.remote = core.info.pid, core.info.is_remote
        return self.welcome

    def close(self) -> None:
        if self._peer is not None:
            self._peer.close()

    def status(self, timeout_s: float = 5.0) -> messages.StatusReport:
        return _given(self._request(requests.status(), timeout_s).status, "status")

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any],
                  timeout_s: float) -> messages.ChannelReply:
        """The call's answer. Given up on (a signal, the timeout, main gone), the call is cancelled at
        the server (msgCancelCall): its cards leave every window rather than wait for nobody."""
        request = requests.call_tool(server, tool, arguments)
        try:
            return self._request(request, timeout_s)
        except BaseException:
            self._send(channels.CANCEL_CALL, messages.CancelCall(response_channel=request.channel))
            raise

    def control_server(self, server: str, action: str, timeout_s: float = 30.0) -> messages.ChannelReply:
        return self._request(requests.control_server(server, action), timeout_s)  # type: ignore[arg-type]

    def rotate_http_token(self, timeout_s: float = 90.0) -> messages.ChannelReply:
        """A new `--mcp-http` token; answered once the HTTP gateway restarted on it."""
        return self._request(requests.rotate_http_token(), timeout_s)

    def reload(self, timeout_s: float = 30.0, config: str | None = None) -> messages.ChannelReply:
        """`config`: an absolute path for main to read instead of its own config (it becomes main's)."""
        return self._request(requests.reload(config=config), timeout_s)

    def wait_server(self, name: str, settled: Callable[[messages.ServerInfo], bool],
                    timeout_s: float) -> messages.ServerInfo | None:
        """Server `name` as main reports it (its status reply, then its `servers` pushes) once
        `settled(it)` holds, or as last reported when `timeout_s` runs out; None if main has no
        such server."""
        deadline = time.monotonic() + timeout_s
        current = next((s for s in self.status().servers if s.name == name), None)
        while current is not None and not settled(current) and (left := deadline - time.monotonic()) > 0:
            try:
                pushed = self._attached().wait_for(_servers_pushed, left)
            except MainUnreachableError:
                if time.monotonic() < deadline:
                    raise  # main went away
                break
            assert isinstance(pushed, peer.Pushed) and isinstance(pushed.body, messages.ServersUpdate)
            current = next((s for s in pushed.body.servers if s.name == name), current)
        return current

    def rules(self, timeout_s: float = 5.0) -> list[messages.RuleInfo]:
        return _given(self._request(requests.rules(), timeout_s).rules, "rules")

    def revoke_rules(self, ids: list[str], revoke_all: bool, server: str | None, asker: str | None = None,
                     timeout_s: float = 5.0) -> messages.RevokeReport:
        request = requests.revoke_rules(ids, revoke_all, server=server, asker=asker)
        return _given(self._request(request, timeout_s).revoked, "revoke report")

    def audit(self, limit: int, server: str | None, timeout_s: float = 30.0) -> list[messages.AuditEntry]:
        """Extension msgAudit: the newest rows of main's store (a shared one may be slow to read)."""
        reply = self._request(requests.audit(limit, server), timeout_s)
        if reply.error is not None:  # main runs, but keeps no log or cannot read its store: not "main is gone"
            raise AuditLogError(f"main says: {reply.error.message}")
        return _given(reply.audit, "audit rows")

    def shutdown(self) -> None:
        self._send(channels.SHUTDOWN, messages.Shutdown())

    def shutdown_heard(self, timeout_s: float) -> bool:
        """Shutdown, then wait for main's bye (it says bye as it starts to stop): True once heard,
        False if main said nothing of it within `timeout_s`. For a main on another machine, whose
        pid cannot be watched: the request is known to have arrived, not hoped to."""
        self.shutdown()
        try:
            self._attached().wait_for(lambda effect: isinstance(effect, peer.Lost) and effect.stopping, timeout_s)
        except MainUnreachableError:
            return False
        return True

    def auth(self, server: str, action: str, timeout_s: float = 30.0) -> messages.ChannelReply:
        """Extension msgAuth: a server's sign-in status, login or logout."""
        return self._request(requests.auth(server, action), timeout_s)  # type: ignore[arg-type]

    def _attached(self) -> BlockingPeer:
        assert self._peer is not None, "attach() first"
        return self._peer

    def _request(self, request: requests.Request, timeout_s: float) -> messages.ChannelReply:
        return self._attached().request(request, timeout_s)

    def _send(self, topic: str, body: messages.Body) -> None:
        if self._peer is not None:
            self._peer.send(topic, body)


def _servers_pushed(effect: peer.Effect | None) -> bool:
    return isinstance(effect, peer.Pushed) and isinstance(effect.body, messages.ServersUpdate)


def _given[T](value: T | None, what: str) -> T:
    if value is None:
        raise MainUnreachableError(f"main sent no {what}")
    return value
