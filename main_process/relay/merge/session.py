"""MergedSession: the face of the merged session — the servers as main gives them, each message of
the host and of a server read and handed to the part that deals with it (handshake.py, catalog.py,
router.py, asks.py, listen.py). What the host sends before the servers are known, or during a
handshake, waits here (in order, at most MAX_WAITING); `ping` is answered here.
"""

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any, Final

import msgspec

from main_process.relay.merge.asks import ServerAsks
from main_process.relay.merge.catalog import CHANGED, LISTS, Catalog
from main_process.relay.merge.fanout import FanOuts
from main_process.relay.merge.handshake import Handshake
from main_process.relay.merge.listen import ANNOUNCE, SUBSCRIPTION_KEY, Listens
from main_process.relay.merge.records import (
    CallLater,
    Deferred,
    FanOut,
    Headers,
    Listen,
    ListenPart,
    Member,
    Part,
    Routed,
    Timer,
    Upstream,
)
from main_process.relay.merge.router import Router
from main_process.relay.merge.state import Shared
from main_process.relay.merge.wire import shaped
from shared import jsonrpc
from shared.errors import RpcCode
from shared.messages import ServerInfo

logger = logging.getLogger(__name__)

MAX_WAITING: Final = 1000  # host messages held until the servers are known
PROTOCOL_KEY: Final = "io.modelcontextprotocol/protocolVersion"
LEFT_OUT_STATUSES: Final = ("failed", "stopped")

_PROTOCOL_KEY_BYTES: Final = PROTOCOL_KEY.encode()
_SUBSCRIPTION_KEY_BYTES: Final = SUBSCRIPTION_KEY.encode()


def _loop_call_later(delay: float, callback: Callable[[], None]) -> Timer:
    return asyncio.get_running_loop().call_later(delay, callback)


class MergedSession:
    """One host, every server. `to_host` gets each message for the host; `open_server(name)` gives
    the relayed session with server `name`, whose messages come back through `from_server`."""

    def __init__(self, to_host: Callable[[bytes], None], open_server: Callable[[str], Upstream], *,
                 call_later: CallLater | None = None) -> None:
        self.to_host = to_host
        self.servers_known = False
        self._waiting: list[tuple[bytes, Headers]] = []
        self._state = state = Shared(to_host, open_server, call_later or _loop_call_later)
        self._fans = FanOuts(state)
        self._catalog = Catalog(state, self._fans)
        self._router = Router(state, self._fans, self._catalog)
        self._asks = ServerAsks(state)
        self._listens = Listens(state, self._catalog)
        self._handshake = Handshake(state, self._fans, ready=self._let_waiting_go,
                                    joined=lambda: self._listens.announce(ANNOUNCE))

    # ---- the servers ---------------------------------------------------------------------------

    @property
    def servers(self) -> list[str]:
        return list(self._state.members)

    def set_servers(self, servers: Iterable[ServerInfo]) -> None:
        """The configured servers, in config order (main's welcome or `servers` push); failed and
        stopped ones are left out. The first call lets the host's waiting messages go."""
        state = self._state
        wanted = [info.name for info in servers if info.status not in LEFT_OUT_STATUSES]
        changed = False
        for name in [name for name in state.members if name not in wanted]:
            self._remove(state.members[name], f"server {name!r} is no longer served (stopped, failed or removed)")
            changed = True
        for name in wanted:
            if name not in state.members and not state.closed:
                member = state.members[name] = Member(name, state.open_server(name))
                changed = True
                self._handshake.join(member)
        if list(state.members) != wanted:  # config order, as the host sees the servers
            state.members = {name: state.members[name] for name in wanted if name in state.members}
        if changed and self.servers_known:
            self._listens.announce(ANNOUNCE)
        if not self.servers_known:
            self.servers_known = True
            self._let_waiting_go()

    def _let_waiting_go(self) -> None:
        waiting, self._waiting = self._waiting, []
        for n, (raw, headers) in enumerate(waiting):
            if self._handshake.busy or not self.servers_known:  # the rest wait again
                self._waiting = [*waiting[n:], *self._waiting]
                return
            self.from_host(raw, headers)

    def offline(self) -> None:
        """main went away: what the host sends waits until `set_servers` (main attached again) or
        `unreachable`."""
        self.servers_known = False

    def unreachable(self, why: str) -> None:
        """The servers cannot be known (main is not reachable): each waiting request is answered."""
        waiting, self._waiting = self._waiting, []
        for raw, _ in waiting:
            self._refuse(jsonrpc.peek(raw), RpcCode.SERVER_ERROR, why)

    def lists_changed(self, server: str | None, lists: Iterable[str]) -> None:
        """main says these lists of `server` (None: of every server) may have changed."""
        wanted = [name for name in lists if name in ANNOUNCE]
        for member in self._state.members.values():
            if server is None or member.name == server:
                for name in wanted:
                    member.stale.update(ANNOUNCE[name][2])
        if server is None or server in self._state.members:
            self._listens.announce(wanted)

    def close(self) -> None:
        self._state.closed = True
        for opened in list(self._state.by_host.values()):
            if isinstance(opened, (Listen, FanOut)) and opened.timer is not None:
                opened.timer.cancel()
        for member in list(self._state.members.values()):
            member.upstream.close()
        self._state.members.clear()

    def _remove(self, member: Member, why: str) -> None:
        del self._state.members[member.name]
        self._handshake.left(member.name)
        outstanding, member.outstanding = member.outstanding, {}
        for pending in outstanding.values():
            if isinstance(pending, Routed):
                self._router.lost(member, pending, why)
            elif isinstance(pending, Part):
                self._fans.lost(member, pending.fan, why)
            else:
                self._listens.left(member, pending.listen)
        self._asks.forget(member.name, why)
        member.upstream.close()
        for method in LISTS:
            self._catalog.rebuild(method)

    # ---- from the host -------------------------------------------------------------------------

    def from_host(self, raw: bytes, headers: Headers = None) -> None:
        """One message (or a batch) as the host wrote it; `headers`: its HTTP routing headers."""
        if self._state.closed:
            return
        if not self.servers_known or self._handshake.busy:  # in order, once known / initialized
            if len(self._waiting) >= MAX_WAITING:
                self._refuse(jsonrpc.peek(raw), RpcCode.SERVER_ERROR,
                             "too many messages wait for Elicitron's main to answer" if not self.servers_known
                             else "too many messages wait for the servers' handshake")
                return
            self._waiting.append((raw, headers))
            return
        envelope = jsonrpc.peek(raw)
        if envelope.kind == "other":
            batch = jsonrpc.split_batch(raw) if jsonrpc.is_batch(raw) else None
            if batch:
                for item in batch:
                    self.from_host(item, headers)
                return
            self._not_json_rpc(raw)
            return
        try:
            if envelope.kind == "response":
                self._asks.answered(envelope, raw)
            elif envelope.kind == "notification":
                self._host_notification(envelope, raw)
            else:
                self._host_request(envelope, raw, headers)
        except (msgspec.DecodeError, RecursionError) as exc:  # params `peek` skipped are not strict JSON
            if envelope.kind == "request":
                self.to_host(jsonrpc.error_response(envelope.id if isinstance(envelope.id, (int, str)) else None,
                                                    jsonrpc.PARSE_ERROR, f"Parse error: not strict JSON ({exc})"))

    def _not_json_rpc(self, raw: bytes) -> None:
        """Never passed on (PROTOCOL.md §14, strict JSON): answered with the id a lax reader finds."""
        request_id, is_request, code, why = jsonrpc.unreadable_error(raw)
        if is_request or request_id is None:
            self.to_host(jsonrpc.error_response(request_id, code, why))

    def _host_request(self, envelope: jsonrpc.Envelope, raw: bytes, headers: Headers) -> None:
        host_id = envelope.id
        method = envelope.method
        if not isinstance(host_id, (int, str)) or not isinstance(method, str):
            self.to_host(jsonrpc.error_response(None, jsonrpc.INVALID_REQUEST, "Invalid Request: bad id"))
            return
        params = envelope.params_dict()
        modern = _PROTOCOL_KEY_BYTES in raw and isinstance(params.get("_meta"), dict) \
            and PROTOCOL_KEY in params["_meta"]
        if modern:
            if self._state.era is None:
                self._state.era = "modern"
            self._state.envelope = {key: value for key, value in params["_meta"].items() if key != "progressToken"}
        router = self._router
        if method == "initialize":
            self._handshake.initialize(host_id, params, headers)
        elif method == "ping":
            self.to_host(jsonrpc.response(host_id, shaped({}, modern)))
        elif method == "server/discover":
            self._handshake.discover(host_id, params, headers)
        elif method in LISTS:
            self._catalog.list_for_host(host_id, method, params, headers, modern)
        elif method in ("tools/call", "prompts/get"):
            router.by_name(host_id, method, raw, params, headers, "tools/list" if method == "tools/call"
                           else "prompts/list")
        elif method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            router.by_uri(host_id, method, raw, params, headers)
        elif method == "completion/complete":
            router.complete(host_id, raw, params, headers)
        elif method == "logging/setLevel":
            level = params.get("level")
            self._catalog.log_level = level if isinstance(level, str) else None
            router.everyone(host_id, method, params, headers, modern, capability="logging")
        elif method == "subscriptions/listen":
            self._listens.open(host_id, params, headers)
        elif (owner := router.task_owner(method, params)) is not None:
            router.route(owner, host_id, method, raw, headers)
        elif method == "tasks/list":
            router.task_list(host_id, params, headers, modern)
        else:
            router.unknown(host_id, method, raw, params, headers)

    def _host_notification(self, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        method = envelope.method
        if method == "notifications/initialized":
            self._handshake.initialized(raw)
        elif method == "notifications/cancelled":
            self._host_cancelled(envelope.params_dict())
        elif method == "notifications/progress":  # progress on a server's request to the host
            self._asks.progress(envelope.params_dict(), raw)
        else:  # roots/list_changed, and whatever else a host tells its servers
            for member in self._state.active():
                member.upstream.from_host(raw)

    def _host_cancelled(self, params: dict[str, Any]) -> None:
        request_id = params.get("requestId")
        opened = self._state.by_host.pop(request_id, None) if isinstance(request_id, (int, str)) else None
        if isinstance(opened, Routed):
            self._router.cancelled(opened, params.get("reason"))
        elif isinstance(opened, FanOut):
            self._fans.drop(opened, params.get("reason"))
        elif isinstance(opened, Listen):
            self._listens.end(opened, None, reason=params.get("reason"))
        elif isinstance(opened, Deferred):
            opened.cancelled = True

    def _refuse(self, envelope: jsonrpc.Envelope, code: int, why: str) -> None:
        if envelope.kind == "request" and isinstance(envelope.id, (int, str)):
            self.to_host(jsonrpc.error_response(envelope.id, code, why))

    # ---- from a server -------------------------------------------------------------------------

    def from_server(self, server: str, raw: bytes) -> None:
        """One message of server `server`'s session (what it wrote, or main for it)."""
        member = self._state.members.get(server)
        if member is None or self._state.closed:
            return
        envelope = jsonrpc.peek(raw)
        try:
            if envelope.kind == "response":
                self._server_answered(member, envelope, raw)
            elif envelope.kind == "request":
                self._asks.forward(member, envelope, raw)
            elif envelope.kind == "notification":
                self._server_notification(member, envelope, raw)
        except (msgspec.DecodeError, RecursionError) as exc:  # values `peek` skipped are not strict JSON
            logger.warning("dropped a message of %s that is not strict JSON: %s", server, exc)
            return
        if envelope.kind == "other":
            batch = jsonrpc.split_batch(raw) if jsonrpc.is_batch(raw) else None
            for item in batch or ():
                self.from_server(server, item)
            if not batch:
                logger.warning("dropped a message of %s that is not JSON-RPC", server)

    def _server_answered(self, member: Member, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        upstream_id = envelope.id
        pending = member.outstanding.pop(upstream_id, None) if isinstance(upstream_id, (int, str)) else None
        if isinstance(pending, Routed):
            self._router.answered(member, pending, envelope, raw)
        elif isinstance(pending, Part):
            self._fans.answered(member, pending.fan, envelope)
        elif isinstance(pending, ListenPart):
            self._listens.answered(member, pending.listen, envelope)
        else:
            logger.debug("dropped an answer of %s to %r: nobody waits on it", member.name, upstream_id)

    def _server_notification(self, member: Member, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        method = envelope.method
        if _SUBSCRIPTION_KEY_BYTES in raw and self._listens.event(member, envelope):
            return
        if method == "notifications/cancelled":  # the server withdraws one of its requests
            params = envelope.params_dict()
            request_id = params.get("requestId")
            if not isinstance(request_id, (int, str)) or self._asks.withdrawn(member, method, params, request_id):
                return
            part = member.outstanding.get(request_id)
            if isinstance(part, ListenPart):  # its listen stream is over
                del member.outstanding[request_id]
                self._listens.lost(member, part.listen, params.get("reason"))
            return
        if method in CHANGED:
            member.stale.update(CHANGED[method])
        elif method == "notifications/tasks/status":
            self._state.note_task(member, envelope.params_dict())
        self.to_host(raw)
