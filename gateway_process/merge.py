"""MergedSession: one host's MCP session with every server at once (`elicitron serve`, `/mcp`).

The host speaks JSON-RPC with one server, Elicitron; behind it, one relayed session per configured
server (`RelayedSession`: the host's own connection to that server, through main) does the work.
What goes where, as a transparent aggregating proxy does it (MetaMCP, mcp-proxy):

- the handshake: the host's `initialize` goes to every server as the host sent it; the host gets
  one answer once all answered or HANDSHAKE_TIMEOUT_S passed (a server that failed is left out; one
  that answers late joins then, and the host hears its lists changed): the capabilities are the
  union, `serverInfo` is Elicitron's, the instructions every server's. The protocol version is the
  host's when every server that answered agreed to it, else the one most of them chose (the newest
  of those on a tie). 2026-07-28: `server/discover` likewise (the versions every server supports; a
  server that cannot answer it counts as speaking the handshake era only, so the host falls back to
  it and reaches every server);
- lists: every page of every server, one page for the host, names `<server>__<name>` (tools,
  prompts, resources' `name`; URIs unchanged). A name two servers would both produce (server `a`'s
  `b__c`, server `a__b`'s `c`) is left out, with a warning in the log and to the host (a log
  message, at listing time, where the host takes warnings): never routed to the wrong one;
- requests with a name (`tools/call`, `prompts/get`, a prompt's completion) go to the server the
  prefix names, without it; by URI (`resources/read`, `subscribe`, `unsubscribe`, a resource's
  completion) to the server that listed it, else whose template matches it most specifically
  (templates are looked at only with every server's lists current, so a catch-all never takes a
  URI another server lists); by
  task id (`tasks/*`) to the server that created the task; `logging/setLevel` to every server;
  `ping` is answered here; anything else by its `name` when it has a prefixed one, else by every
  server, the first result winning;
- the host's request keeps its id toward the one server it goes to; requests to several servers
  get fresh ids. A server's requests (sampling, roots, elicitation, ping) get fresh ids toward the
  host, and the host's answer goes back under the server's own; cancellations follow both ways;
- `subscriptions/listen` (2026-07-28) opens one stream per server that can honor part of it and
  merges them into the host's stream: one acknowledgement first, then every server's events.

Errors of a server reach the host as the server wrote them; Elicitron's own (an unknown prefix, no
server for a URI) are -32602 naming the problem. Sans-IO: messages in, messages out, and a timer
(`call_later`); the server sessions are given by `open_server` (in tests: plain fakes).
"""

import asyncio
import importlib.util
import logging
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import count
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Literal, Protocol

import msgspec

from gateway_process.handshake import HANDSHAKE_VERSIONS, negotiated_version, server_info
from gateway_process.names import SEPARATOR, Exposure, clash_notice, combined_instructions
from shared import jsonrpc
from shared.errors import RpcCode
from shared.messages import ServerInfo

logger = logging.getLogger(__name__)

Headers = dict[str, str] | None
Id = jsonrpc.Id

HANDSHAKE_TIMEOUT_S: Final = 20.0  # a server slower than this to answer initialize joins once it does
REQUEST_TIMEOUT_S: Final = 60.0  # a request to several servers: one that does not answer is left out
LISTEN_ACK_TIMEOUT_S: Final = 10.0  # a listen stream is acknowledged without a server that is this slow
MAX_PAGES: Final = 100  # per server and list: a paginator that never ends cannot hang the host
MAX_WAITING: Final = 1000  # host messages held until the servers are known
MAX_TASKS: Final = 10_000
MODERN_VERSIONS: Final = ("2026-07-28",)  # mcp_types.version.MODERN_PROTOCOL_VERSIONS, without loading mcp
PROTOCOL_KEY: Final = "io.modelcontextprotocol/protocolVersion"
SUBSCRIPTION_KEY: Final = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"
_LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
UNSUPPORTED_VERSION: Final = -32022
LEFT_OUT_STATUSES: Final = ("failed", "stopped")

_PROTOCOL_KEY_BYTES: Final = PROTOCOL_KEY.encode()
_SUBSCRIPTION_KEY_BYTES: Final = SUBSCRIPTION_KEY.encode()


@dataclass(frozen=True)
class _ListKind:
    key: str  # the result's key for its items
    capability: str  # the server capability that offers it
    kind: str  # what an item is called in messages


_LISTS: Final = {
    "tools/list": _ListKind("tools", "tools", "tool"),
    "prompts/list": _ListKind("prompts", "prompts", "prompt"),
    "resources/list": _ListKind("resources", "resources", "resource"),
    "resources/templates/list": _ListKind("resourceTemplates", "resources", "resource template"),
}
_CHANGED: Final = {  # a server's list_changed -> the listings it makes stale
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}
_ANNOUNCE: Final = {  # main's ListName -> (the host's notification, the listen filter key, listings)
    "tools": ("notifications/tools/list_changed", "toolsListChanged", ("tools/list",)),
    "prompts": ("notifications/prompts/list_changed", "promptsListChanged", ("prompts/list",)),
    "resources": ("notifications/resources/list_changed", "resourcesListChanged",
                  ("resources/list", "resources/templates/list")),
}
_LISTEN_CAPABILITY: Final = {"toolsListChanged": "tools", "promptsListChanged": "prompts",
                             "resourcesListChanged": "resources"}
_TASK_METHODS: Final = ("tasks/get", "tasks/update", "tasks/cancel", "tasks/result")


class Upstream(Protocol):
    """One server's relayed session (RelayedSession): the host's messages for it go in here; its
    messages come back through `MergedSession.from_server`."""

    def from_host(self, raw: bytes, headers: Headers = None) -> None: ...

    def close(self) -> None: ...


class Timer(Protocol):
    def cancel(self) -> None: ...


CallLater = Callable[[float, Callable[[], None]], Timer]


def _loop_call_later(delay: float, callback: Callable[[], None]) -> Timer:
    return asyncio.get_running_loop().call_later(delay, callback)


# ---- what a host request became ----------------------------------------------------------------


@dataclass(eq=False)
class _Routed:
    """A host request at one server."""

    host_id: Id
    server: str
    upstream_id: Id
    method: str


@dataclass(eq=False)
class _FanOut:
    """One request to several servers (or the merger's own, `host_id` None)."""

    method: str
    host_id: Id | None
    params: dict[str, Any]
    headers: Headers
    done: Callable[["_FanOut"], None]
    key: str | None = None  # a list: its items' key (every page is fetched)
    first: bool = False  # done with the first result
    waiting: dict[str, Id] = field(default_factory=dict)  # server -> the id of its request in flight
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # in the order they came
    errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    timed_out: list[str] = field(default_factory=list)
    pages: dict[str, int] = field(default_factory=dict)
    sealed: bool = False
    finished: bool = False
    timer: Timer | None = None


@dataclass(eq=False)
class _Part:
    fan: _FanOut


@dataclass(eq=False)
class _Listen:
    """A host's `subscriptions/listen`: one stream per server that honors part of it."""

    host_id: Id
    requested: dict[str, Any]
    own: dict[str, Any]  # what the merger honors itself (the lists it announces)
    parts: dict[str, Id] = field(default_factory=dict)  # server -> the id of its listen
    honored: dict[str, dict[str, Any]] = field(default_factory=dict)  # server -> its acknowledged filter
    unacked: set[str] = field(default_factory=set)
    buffer: list[bytes] = field(default_factory=list)  # events before the host's acknowledgement
    acknowledged: bool = False
    ended: bool = False
    timer: Timer | None = None


@dataclass(eq=False)
class _ListenPart:
    listen: _Listen


@dataclass(eq=False)
class _Deferred:
    """A host request waiting for a listing (to find where it goes)."""

    host_id: Id
    cancelled: bool = False


_Pending = _Routed | _Part | _ListenPart


@dataclass(eq=False)
class _Member:
    """One server of the merged session."""

    name: str
    upstream: Upstream
    handshake: Literal["no", "asking", "yes", "failed"] = "no"
    discovered: bool = False  # got the host's server/discover: its session serves 2026-07-28 now
    capabilities: dict[str, Any] | None = None  # None: not known (no handshake or discover yet)
    instructions: str | None = None
    version: str | None = None
    outstanding: dict[Id, _Pending] = field(default_factory=dict)  # by the id the server sees
    listings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # list method -> its own items
    stale: set[str] = field(default_factory=set)

    def offers(self, capability: str) -> bool:
        """Whether this server offers `capability` (when its capabilities are not known: maybe)."""
        return self.capabilities is None or isinstance(self.capabilities.get(capability), dict)


@dataclass(eq=False)
class _Template:
    text: str
    server: str
    specificity: tuple[int, int]
    parsed: Any = None
    invalid: bool = False

    def matches(self, uri: str) -> bool:
        if self.invalid:
            return False
        if self.parsed is None:
            template_class, invalid = _uri_templates()
            try:
                self.parsed = template_class.parse(self.text)
            except (invalid, ValueError):
                self.invalid = True
                return False
        return self.parsed.match(uri) is not None


_EXPRESSION = re.compile(r"\{[^}]*\}")


def _specificity(template: str) -> tuple[int, int]:
    """More literal characters, then fewer variables: the more specific template."""
    return len(_EXPRESSION.sub("", template)), -len(_EXPRESSION.findall(template))


_URI_TEMPLATE: ModuleType | None = None


def _uri_templates() -> tuple[Any, type[Exception]]:
    """mcp's RFC 6570 matcher (mcp.shared.uri_template), without loading all of mcp for it (that
    takes seconds, and serve starts in a fraction of one): the module imports only the stdlib."""
    global _URI_TEMPLATE
    module = sys.modules.get("mcp.shared.uri_template") or _URI_TEMPLATE
    if module is None:
        spec = importlib.util.find_spec("mcp")
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        path = Path(locations[0]) / "shared" / "uri_template.py" if locations else None
        loaded = importlib.util.spec_from_file_location("_elicitron_uri_template", path) if path else None
        if loaded is None or loaded.loader is None:
            module = importlib.import_module("mcp.shared.uri_template")
        else:
            module = importlib.util.module_from_spec(loaded)
            sys.modules[loaded.name] = module  # dataclasses look their module up while the class is made
            loaded.loader.exec_module(module)
        _URI_TEMPLATE = module
    return module.UriTemplate, module.InvalidUriTemplate


class MergedSession:
    """One host, every server. `to_host` gets each message for the host; `open_server(name)` gives
    the relayed session with server `name`, whose messages come back through `from_server`."""

    def __init__(self, to_host: Callable[[bytes], None], open_server: Callable[[str], Upstream], *,
                 call_later: CallLater | None = None) -> None:
        self.to_host = to_host
        self._open_server = open_server
        self._call_later = call_later or _loop_call_later
        self.servers_known = False
        self._handshaking = False  # the host's initialize is at the servers: what follows waits for it
        self._joining: set[str] = set()  # servers added since, being initialized: what follows waits too
        self._members: dict[str, _Member] = {}  # in config order
        self._waiting: list[tuple[bytes, Headers]] = []
        self._closed = False
        self._ids = count(1)
        self._asks = count(1)
        self._era: Literal["handshake", "modern"] | None = None
        self._init_params: dict[str, Any] | None = None
        self._initialized: bytes | None = None  # the host's notifications/initialized
        self._host_ready = False  # the host has its handshake answer
        self._envelope: dict[str, Any] = {}  # a 2026-07-28 host's _meta, for the merger's own requests
        self._by_host: dict[Id, _Routed | _FanOut | _Listen | _Deferred] = {}
        self._asked: dict[Id, tuple[str, Id]] = {}  # host-facing id of a server's request -> (server, its id)
        self._asked_back: dict[tuple[str, Id], Id] = {}
        self._tokens: dict[object, str] = {}  # progress tokens of the servers' requests -> server
        self._routes: dict[str, dict[str, tuple[str, str]]] = {method: {} for method in _LISTS}
        self._clashes: dict[str, dict[str, list[str]]] = {method: {} for method in _LISTS}
        self._uris: dict[str, str] = {}
        self._templates: list[_Template] = []
        self._tasks: dict[str, str] = {}
        self._refreshing: dict[str, list[Callable[[], None]]] = {}
        self._warned: set[tuple[str, str]] = set()
        self._notices: list[str] = []  # for the host: names left out since it last heard
        self._log_level: str | None = None  # the host's logging/setLevel (handshake era)

    # ---- the servers ---------------------------------------------------------------------------

    @property
    def servers(self) -> list[str]:
        return list(self._members)

    def set_servers(self, servers: Iterable[ServerInfo]) -> None:
        """The configured servers, in config order (main's welcome or `servers` push); failed and
        stopped ones are left out. The first call lets the host's waiting messages go."""
        wanted = [info.name for info in servers if info.status not in LEFT_OUT_STATUSES]
        changed = False
        for name in [name for name in self._members if name not in wanted]:
            self._remove(self._members[name], f"server {name!r} is no longer served (stopped, failed or removed)")
            changed = True
        for name in wanted:
            if name not in self._members and not self._closed:
                member = self._members[name] = _Member(name, self._open_server(name))
                changed = True
                if self._init_params is not None:
                    self._join(member)
        if list(self._members) != wanted:  # config order, as the host sees the servers
            self._members = {name: self._members[name] for name in wanted if name in self._members}
        if changed and self.servers_known:
            self._announce(_ANNOUNCE)
        if not self.servers_known:
            self.servers_known = True
            self._let_waiting_go()

    def _let_waiting_go(self) -> None:
        waiting, self._waiting = self._waiting, []
        for n, (raw, headers) in enumerate(waiting):
            if self._handshaking or self._joining or not self.servers_known:  # the rest wait again
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
            envelope = jsonrpc.peek(raw)
            if envelope.kind == "request" and isinstance(envelope.id, (int, str)):
                self.to_host(jsonrpc.error_response(envelope.id, RpcCode.SERVER_ERROR, why))

    def lists_changed(self, server: str | None, lists: Iterable[str]) -> None:
        """main says these lists of `server` (None: of every server) may have changed."""
        wanted = [name for name in lists if name in _ANNOUNCE]
        for member in self._members.values():
            if server is None or member.name == server:
                for name in wanted:
                    member.stale.update(_ANNOUNCE[name][2])
        if server is None or server in self._members:
            self._announce(wanted)

    def close(self) -> None:
        self._closed = True
        for opened in list(self._by_host.values()):
            if isinstance(opened, (_Listen, _FanOut)) and opened.timer is not None:
                opened.timer.cancel()
        for member in list(self._members.values()):
            member.upstream.close()
        self._members.clear()

    # ---- from the host -------------------------------------------------------------------------

    def from_host(self, raw: bytes, headers: Headers = None) -> None:
        """One message (or a batch) as the host wrote it; `headers`: its HTTP routing headers."""
        if self._closed:
            return
        if not self.servers_known or self._handshaking or self._joining:  # in order, once known / initialized
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
                self._host_answered(envelope, raw)
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
            if self._era is None:
                self._era = "modern"
            self._envelope = {key: value for key, value in params["_meta"].items() if key != "progressToken"}
        if method == "initialize":
            self._initialize(host_id, params, headers)
        elif method == "ping":
            self.to_host(jsonrpc.response(host_id, self._shaped({}, modern)))
        elif method == "server/discover":
            self._discover(host_id, params, headers)
        elif method in _LISTS:
            self._list_for_host(host_id, method, params, headers, modern)
        elif method in ("tools/call", "prompts/get"):
            self._by_name(host_id, method, raw, params, headers, "tools/list" if method == "tools/call"
                          else "prompts/list")
        elif method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            self._by_uri(host_id, method, raw, params, headers)
        elif method == "completion/complete":
            self._complete(host_id, raw, params, headers)
        elif method == "logging/setLevel":
            level = params.get("level")
            self._log_level = level if isinstance(level, str) else None
            self._everyone(host_id, method, params, headers, modern, capability="logging")
        elif method == "subscriptions/listen":
            self._listen(host_id, params, headers)
        elif method in _TASK_METHODS and isinstance(params.get("taskId"), str) \
                and params["taskId"] in self._tasks and self._tasks[params["taskId"]] in self._members:
            self._route(self._members[self._tasks[params["taskId"]]], host_id, method, raw, headers)
        elif method == "tasks/list":
            self._task_list(host_id, params, headers, modern)
        else:
            self._unknown(host_id, method, raw, params, headers)

    def _host_notification(self, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        method = envelope.method
        if method == "notifications/initialized":
            self._initialized = raw
            for member in self._active():
                member.upstream.from_host(raw)
        elif method == "notifications/cancelled":
            self._host_cancelled(envelope.params_dict())
        elif method == "notifications/progress":  # progress on a server's request to the host
            server = self._tokens.get(_hashable(envelope.params_dict().get("progressToken")))
            if server in self._members:
                self._members[server].upstream.from_host(raw)
        else:  # roots/list_changed, and whatever else a host tells its servers
            for member in self._active():
                member.upstream.from_host(raw)

    def _host_answered(self, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        """The host's answer to a server's request: back to that server, under its own id."""
        asked = self._asked.pop(envelope.id, None) if isinstance(envelope.id, (int, str)) else None
        if asked is None:
            logger.debug("dropped the host's answer to %r: no server asks that", envelope.id)
            return
        server, original = asked
        self._asked_back.pop(asked, None)
        member = self._members.get(server)
        if member is not None:
            member.upstream.from_host(jsonrpc.with_id(raw, original))

    def _host_cancelled(self, params: dict[str, Any]) -> None:
        request_id = params.get("requestId")
        opened = self._by_host.pop(request_id, None) if isinstance(request_id, (int, str)) else None
        if isinstance(opened, _Routed):
            member = self._members.get(opened.server)
            if member is not None and member.outstanding.get(opened.upstream_id) is opened:
                del member.outstanding[opened.upstream_id]
                member.upstream.from_host(_cancelled(opened.upstream_id, params.get("reason")))
        elif isinstance(opened, _FanOut):
            self._drop_fan(opened, params.get("reason"))
        elif isinstance(opened, _Listen):
            self._end_listen(opened, None, reason=params.get("reason"))
        elif isinstance(opened, _Deferred):
            opened.cancelled = True

    # ---- from a server -------------------------------------------------------------------------

    def from_server(self, server: str, raw: bytes) -> None:
        """One message of server `server`'s session (what it wrote, or main for it)."""
        member = self._members.get(server)
        if member is None or self._closed:
            return
        envelope = jsonrpc.peek(raw)
        try:
            if envelope.kind == "response":
                self._server_answered(member, envelope, raw)
            elif envelope.kind == "request":
                self._server_request(member, envelope, raw)
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

    def _server_answered(self, member: _Member, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        upstream_id = envelope.id
        pending = member.outstanding.pop(upstream_id, None) if isinstance(upstream_id, (int, str)) else None
        if isinstance(pending, _Routed):
            if self._by_host.get(pending.host_id) is pending:
                del self._by_host[pending.host_id]
            try:
                if b"task" in raw:
                    self._note_task(member, envelope.result_dict())
                answer = raw if pending.upstream_id == pending.host_id else jsonrpc.with_id(raw, pending.host_id)
            except (msgspec.DecodeError, RecursionError) as exc:  # the host still gets an answer for its id
                answer = jsonrpc.error_response(pending.host_id, RpcCode.INTERNAL_ERROR,
                                                f"{member.name}'s answer could not be read ({exc}); not passed on")
            self.to_host(answer)
        elif isinstance(pending, _Part):
            self._part_answered(member, pending.fan, envelope)
        elif isinstance(pending, _ListenPart):
            self._listen_answered(member, pending.listen, envelope)
        else:
            logger.debug("dropped an answer of %s to %r: nobody waits on it", member.name, upstream_id)

    def _server_request(self, member: _Member, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        original = envelope.id
        assert isinstance(original, (int, str))
        host_facing = next(self._asks)
        self._asked[host_facing] = (member.name, original)
        self._asked_back[(member.name, original)] = host_facing
        if b"progressToken" in raw:
            meta = envelope.params_dict().get("_meta")
            if isinstance(meta, dict) and "progressToken" in meta:
                self._tokens[_hashable(meta["progressToken"])] = member.name
        self.to_host(jsonrpc.with_id(raw, host_facing))

    def _server_notification(self, member: _Member, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        method = envelope.method
        if _SUBSCRIPTION_KEY_BYTES in raw and self._listen_event(member, envelope):
            return
        if method == "notifications/cancelled":  # the server withdraws one of its requests
            params = envelope.params_dict()
            request_id = params.get("requestId")
            if not isinstance(request_id, (int, str)):
                return
            host_facing = self._asked_back.pop((member.name, request_id), None)
            if host_facing is not None:
                self._asked.pop(host_facing, None)
                self.to_host(jsonrpc.notification(method, {**params, "requestId": host_facing}))
            elif isinstance(member.outstanding.get(request_id), _ListenPart):  # its listen stream is over
                part = member.outstanding.pop(request_id)
                assert isinstance(part, _ListenPart)
                self._listen_lost(member, part.listen, params.get("reason"))
            return
        if method in _CHANGED:
            member.stale.update(_CHANGED[method])
        elif method == "notifications/tasks/status":
            self._note_task(member, envelope.params_dict())
        self.to_host(raw)

    # ---- the handshake -------------------------------------------------------------------------

    def _initialize(self, host_id: Id, params: dict[str, Any], headers: Headers) -> None:
        self._era = "handshake"
        self._init_params = params
        self._host_ready = False
        members = list(self._members.values())
        for member in members:
            member.handshake = "asking"
            if member.discovered:
                # A host whose server/discover went unanswered in its own time (mcp's Client waits
                # 10 s) falls back to the handshake; a session that answered discover refuses an
                # initialize, so that server gets a fresh session for it.
                member.discovered = False
                member.outstanding.clear()
                member.upstream.close()
                member.upstream = self._open_server(member.name)
        self._handshaking = True
        self._fan_out("initialize", params, members, host_id=host_id, headers=headers,
                      timeout=HANDSHAKE_TIMEOUT_S, done=self._initialize_done)

    def _initialize_done(self, fan: _FanOut) -> None:
        for name, member in self._members.items():
            if name in fan.results:
                self._handshake_from(member, fan.results[name])
            elif name in fan.errors:
                member.handshake = "failed"
                logger.warning("server %s is left out: its initialize failed: %s", name,
                               fan.errors[name].get("message"))
        for name in fan.timed_out:
            logger.warning("server %s did not answer initialize within %.0f s: left out until it does",
                           name, HANDSHAKE_TIMEOUT_S)
        ready = [member for member in self._members.values() if member.handshake == "yes"]
        requested = fan.params.get("protocolVersion")
        result: dict[str, Any] = {
            "protocolVersion": self._version(requested, ready),
            "capabilities": self._union([member.capabilities or {} for member in ready]),
            "serverInfo": server_info(Exposure()),
        }
        instructions = self._instructions(ready)
        if instructions is not None:
            result["instructions"] = instructions
        self._host_ready = True
        self._handshaking = False
        if fan.host_id is not None:
            self.to_host(jsonrpc.response(fan.host_id, result))
        self._let_waiting_go()

    def _handshake_from(self, member: _Member, result: dict[str, Any]) -> None:
        member.handshake = "yes"
        capabilities = result.get("capabilities")
        member.capabilities = capabilities if isinstance(capabilities, dict) else {}
        instructions = result.get("instructions")
        member.instructions = instructions if isinstance(instructions, str) else None
        version = result.get("protocolVersion")
        member.version = version if isinstance(version, str) else None

    @staticmethod
    def _version(requested: object, ready: list[_Member]) -> str:
        """The host's version when every server agreed to it; else the one most servers chose (the
        newest of those on a tie); with no server, what Elicitron itself would answer."""
        versions = [member.version for member in ready if member.version is not None]
        if not versions:
            return negotiated_version(requested if isinstance(requested, str) else "")
        if all(version == requested for version in versions):
            return versions[0]
        tally = Counter(versions)
        top = max(tally.values())
        chosen = max(version for version, n in tally.items() if n == top)
        logger.warning("the servers answered the host's %s with different versions (%s); the host is told %s",
                       requested, ", ".join(f"{m.name} {m.version}" for m in ready), chosen)
        return chosen

    def _join(self, member: _Member) -> None:
        """A server added after the host's handshake: initialized as the others were."""
        assert self._init_params is not None
        member.handshake = "asking"
        self._joining.add(member.name)
        self._fan_out("initialize", self._init_params, [member], host_id=None, headers=None,
                      timeout=HANDSHAKE_TIMEOUT_S, done=lambda fan: self._joined(member, fan))

    def _joined(self, member: _Member, fan: _FanOut) -> None:
        self._joining.discard(member.name)
        if member.name in fan.results:
            self._late_handshake(member, fan.results[member.name])
        elif member.name in fan.errors:
            member.handshake = "failed"
            logger.warning("server %s is left out: its initialize failed: %s", member.name,
                           fan.errors[member.name].get("message"))
        if not self._joining:
            self._let_waiting_go()

    def _late_handshake(self, member: _Member, result: dict[str, Any]) -> None:
        if self._members.get(member.name) is not member:
            return
        self._handshake_from(member, result)
        logger.info("server %s answered its initialize: it joins the session", member.name)
        if self._initialized is not None:
            member.upstream.from_host(self._initialized)
        if self._host_ready:
            self._announce(_ANNOUNCE)

    def _discover(self, host_id: Id, params: dict[str, Any], headers: Headers) -> None:
        members = list(self._members.values())
        for member in members:
            member.discovered = True
        self._fan_out("server/discover", params, members, host_id=host_id, headers=headers,
                      timeout=HANDSHAKE_TIMEOUT_S, done=self._discover_done)

    def _discover_done(self, fan: _FanOut) -> None:
        answered: list[_Member] = []
        supported: list[list[str]] = []
        for name, member in self._members.items():
            if name in fan.results:
                answer = fan.results[name]
                capabilities = answer.get("capabilities")
                member.capabilities = capabilities if isinstance(capabilities, dict) else {}
                instructions = answer.get("instructions")
                member.instructions = instructions if isinstance(instructions, str) else None
                listed = answer.get("supportedVersions")
                supported.append([v for v in listed if isinstance(v, str)] if isinstance(listed, list) else [])
                answered.append(member)
            elif name in fan.errors:
                error = fan.errors[name]
                data = error.get("data")
                named = data.get("supported") if error.get("code") == UNSUPPORTED_VERSION and isinstance(data, dict) \
                    else None
                # A server that cannot answer discover speaks the handshake era (at most): so does the host.
                supported.append([v for v in named if isinstance(v, str)] if isinstance(named, list)
                                 else list(HANDSHAKE_VERSIONS))
                logger.info("server %s did not answer server/discover (%s): it counts as speaking %s", name,
                            error.get("message"), ", ".join(supported[-1]) or "no version")
        for name in fan.timed_out:
            logger.warning("server %s did not answer server/discover within %.0f s: left out", name,
                           HANDSHAKE_TIMEOUT_S)
        if supported:
            versions = [v for v in supported[0] if all(v in other for other in supported[1:])]
        else:
            versions = [*HANDSHAKE_VERSIONS, *MODERN_VERSIONS]
        result: dict[str, Any] = {
            "supportedVersions": versions,
            "capabilities": self._union([member.capabilities or {} for member in answered]),
            **self._cache_fields(fan.results.values()),
        }
        instructions = self._instructions(answered)
        if instructions is not None:
            result["instructions"] = instructions
        if fan.host_id is not None:
            self.to_host(jsonrpc.response(fan.host_id, self._shaped(result, True)))

    @staticmethod
    def _union(capabilities: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Every server's capabilities in one: objects merged, flags OR-ed, the first value otherwise.
        A list any server offers is declared `listChanged`: the merger announces changes to the set
        of servers (and main's notices of restarts) whatever each server says of itself."""
        merged: dict[str, Any] = {}
        for one in capabilities:
            _deep_merge(merged, one)
        for name in ("tools", "prompts", "resources"):
            if isinstance(merged.get(name), dict):
                merged[name] = {**merged[name], "listChanged": True}
        return merged

    def _instructions(self, members: list[_Member]) -> str | None:
        known = {member.name: ServerInfo(name=member.name, status="ready", tools=[],
                                         instructions=member.instructions) for member in members}
        return combined_instructions(Exposure(), known) if members else None

    # ---- lists ---------------------------------------------------------------------------------

    def _list_for_host(self, host_id: Id, method: str, params: dict[str, Any], headers: Headers,
                       modern: bool) -> None:
        if params.get("cursor") is not None:  # every item came on the first page
            self.to_host(jsonrpc.error_response(host_id, RpcCode.INVALID_PARAMS,
                                                f"invalid cursor: {method} gives every item on one page"))
            return
        self._list(method, params, headers, host_id=host_id, modern=modern)

    def _list(self, method: str, params: dict[str, Any], headers: Headers, *, host_id: Id | None,
              modern: bool) -> None:
        listing = _LISTS[method]
        targets = [member for member in self._active() if member.offers(listing.capability)]
        self._fan_out(method, params, targets, host_id=host_id, headers=headers, key=listing.key,
                      done=lambda fan: self._listed(fan, modern))

    def _listed(self, fan: _FanOut, modern: bool) -> None:
        method = fan.method
        key = _LISTS[method].key
        for name in fan.timed_out:
            member = self._members.get(name)
            if member is not None:
                member.listings.pop(method, None)
        for name, member in self._members.items():
            if name in fan.results:
                member.listings[method] = fan.results[name][key]
                member.stale.discard(method)
            elif name in fan.errors:
                member.listings.pop(method, None)
                logger.info("%s of %s left out: %s", method, name, fan.errors[name].get("message"))
        items = self._rebuild(method)
        self._tell_notices(fan.params, modern)
        for waiter in self._refreshing.pop(method, []) if fan.host_id is None else ():
            waiter()
        if fan.host_id is not None:
            result: dict[str, Any] = {key: items}
            if modern:
                result.update(self._cache_fields(fan.results.values()))
            self.to_host(jsonrpc.response(fan.host_id, self._shaped(result, modern)))

    def _rebuild(self, method: str) -> list[dict[str, Any]]:
        """The host's listing from every server's last one, and where each name leads."""
        kind = _LISTS[method]
        found: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
        unnamed: list[dict[str, Any]] = []
        for member in self._active():
            for item in member.listings.get(method, ()):
                own = item.get("name")
                if isinstance(own, str):
                    found.setdefault(f"{member.name}{SEPARATOR}{own}", []).append((member.name, own, item))
                else:
                    unnamed.append(item)
        items: list[dict[str, Any]] = []
        routes: dict[str, tuple[str, str]] = {}
        clashes: dict[str, list[str]] = {}
        for public, entries in found.items():
            owners = list(dict.fromkeys(server for server, _, _ in entries))
            if len(owners) > 1:
                clashes[public] = owners
                if (method, public) not in self._warned:
                    self._warned.add((method, public))
                    notice = clash_notice(kind.kind, public, [(server, own) for server, own, _ in entries])
                    logger.warning("%s", notice)
                    self._notices.append(notice)
                continue
            for server, own, item in entries:
                items.append({**item, "name": public})
                routes[public] = (server, own)
        items += unnamed
        self._routes[method], self._clashes[method] = routes, clashes
        if method == "resources/list":
            uris: dict[str, str] = {}
            for item in items:
                uri = item.get("uri")
                route = routes.get(item.get("name", ""))
                if isinstance(uri, str) and route is not None:
                    if uri in uris and uris[uri] != route[0] and ("uri", uri) not in self._warned:
                        self._warned.add(("uri", uri))
                        logger.warning("resource %s is listed by %s and %s: reads go to %s", uri, uris[uri],
                                       route[0], uris[uri])
                    uris.setdefault(uri, route[0])
            self._uris = uris
        elif method == "resources/templates/list":
            self._templates = [_Template(item["uriTemplate"], routes[item["name"]][0],
                                         _specificity(item["uriTemplate"]))
                               for item in items if isinstance(item.get("uriTemplate"), str) and item.get("name") in routes]
        return items

    def _tell_notices(self, params: dict[str, Any], modern: bool) -> None:
        """What the merger left out, as a warning log message for the host, where the host takes
        warnings: in 2026-07-28 when the listing's request opted in to that level (as servers
        must), before it unless its logging/setLevel is above warning."""
        notices, self._notices = self._notices, []
        if modern:
            meta = params.get("_meta")
            level = meta.get(LOG_LEVEL_KEY) if isinstance(meta, dict) else None
        else:
            level = self._log_level or "warning"
        if level not in _LOG_LEVELS or _LOG_LEVELS.index(level) > _LOG_LEVELS.index("warning"):
            return
        for notice in notices:
            self.to_host(jsonrpc.notification("notifications/message",
                                              {"level": "warning", "logger": "elicitron", "data": notice}))

    def _refresh(self, methods: Sequence[str], then: Callable[[], None]) -> None:
        """List again (the merger's own requests), then `then`."""
        left = set(methods)

        def one_done(method: str) -> None:
            left.discard(method)
            if not left:
                then()

        for method in methods:
            waiters = self._refreshing.get(method)
            start = waiters is None
            if waiters is None:
                waiters = self._refreshing[method] = []
            waiters.append(partial(one_done, method))
            if start:
                self._list(method, self._own_params(), None, host_id=None, modern=self._era == "modern")

    def _own_params(self) -> dict[str, Any]:
        return {"_meta": dict(self._envelope)} if self._envelope else {}

    def _fresh_listing(self, method: str, members: Iterable[_Member]) -> bool:
        return all(method in member.listings and method not in member.stale for member in members)

    # ---- routed requests -----------------------------------------------------------------------

    def _by_name(self, host_id: Id, method: str, raw: bytes, params: dict[str, Any], headers: Headers,
                 list_method: str, *, refreshed: bool = False) -> None:
        public = params.get("name")
        if not isinstance(public, str):
            self.to_host(jsonrpc.error_response(host_id, RpcCode.INVALID_PARAMS, f"{method} needs a name"))
            return
        found = self._resolve(list_method, public, refreshed)
        if found is None:  # not in the last listing: look again once
            self._defer(host_id, [list_method], lambda: self._by_name(host_id, method, raw, params, headers,
                                                                       list_method, refreshed=True))
            return
        if isinstance(found, str):
            self.to_host(jsonrpc.error_response(host_id, RpcCode.INVALID_PARAMS, found))
            return
        member, own = found
        logger.debug("%s %s -> %s %s", method, public, member.name, own)
        self._route(member, host_id, method, _with_params(raw, {**params, "name": own}), _unnamed(headers))

    def _resolve(self, list_method: str, public: str, refreshed: bool) -> tuple[_Member, str] | str | None:
        """(server, its name) for a public name; a str saying why there is none; None: list first."""
        kind = _LISTS[list_method].kind
        clash = self._clashes[list_method].get(public)
        if clash is not None:
            return (f"{kind} {public!r} is ambiguous: servers {' and '.join(repr(s) for s in clash)} would both "
                    f"have it; Elicitron leaves it out")
        route = self._routes[list_method].get(public)
        active = {member.name: member for member in self._active()}
        if route is not None and route[0] in active:
            return active[route[0]], route[1]
        owners = sorted((member for name, member in active.items()
                         if public.startswith(name + SEPARATOR) and len(public) > len(name) + len(SEPARATOR)),
                        key=lambda member: len(member.name), reverse=True)
        if not owners:
            names = ", ".join(active) or "none are configured"
            return (f"unknown {kind} {public!r}: names here are <server>{SEPARATOR}<{kind}>, "
                    f"with <server> one of: {names}")
        if not refreshed and not self._fresh_listing(list_method, owners):
            return None
        for member in owners:
            if list_method not in member.listings:  # it could not list them: the server decides
                return member, public[len(member.name) + len(SEPARATOR):]
        member = owners[0]
        own = public[len(member.name) + len(SEPARATOR):]
        listing = [item.get("name") for item in member.listings.get(list_method, ())]
        shown = ", ".join(f"{member.name}{SEPARATOR}{name}" for name in listing[:20] if isinstance(name, str))
        return (f"unknown {kind} {public!r}: server {member.name!r} has no {kind} {own!r} "
                f"(its {_LISTS[list_method].key}: {shown or 'none'})")

    def _by_uri(self, host_id: Id, method: str, raw: bytes, params: dict[str, Any], headers: Headers, *,
                refreshed: bool = False) -> None:
        uri = params.get("uri")
        if not isinstance(uri, str):
            self._unknown(host_id, method, raw, params, headers)
            return
        member = self._resource_owner(uri, refreshed)
        if member is None:
            self._defer(host_id, ["resources/list", "resources/templates/list"],
                        lambda: self._by_uri(host_id, method, raw, params, headers, refreshed=True))
        elif isinstance(member, str):
            self.to_host(jsonrpc.error_response(host_id, RpcCode.INVALID_PARAMS, member))
        else:
            self._route(member, host_id, method, raw, headers)

    def _resource_owner(self, uri: str, refreshed: bool) -> "_Member | str | None":
        active = {member.name: member for member in self._active()}
        owner = self._uris.get(uri)
        if owner in active:
            return active[owner]
        offering = [member for member in active.values() if member.offers("resources")]
        if not refreshed and not (self._fresh_listing("resources/list", offering)
                                  and self._fresh_listing("resources/templates/list", offering)):
            # Templates only from every server's current lists: a server that lists the URI wins
            # over any template (else a catch-all elsewhere answers a read meant for it), and a
            # template added since the host last listed may be the more specific one.
            return None
        best: _Template | None = None
        for template in self._templates:
            if template.server not in active:
                continue
            if template.text == uri:  # a template itself (a completion's ref/resource)
                return active[template.server]
            if template.matches(uri) and (best is None or template.specificity > best.specificity):
                best = template
        if best is not None:
            return active[best.server]
        return f"unknown resource {uri!r}: no server lists it or a template matching it"

    def _complete(self, host_id: Id, raw: bytes, params: dict[str, Any], headers: Headers, *,
                  refreshed: bool = False) -> None:
        ref = params.get("ref")
        ref = ref if isinstance(ref, dict) else {}
        if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            found = self._resolve("prompts/list", ref["name"], refreshed)
            if found is None:
                self._defer(host_id, ["prompts/list"],
                            lambda: self._complete(host_id, raw, params, headers, refreshed=True))
            elif isinstance(found, str):
                self.to_host(jsonrpc.error_response(host_id, RpcCode.INVALID_PARAMS, found))
            else:
                member, own = found
                self._route(member, host_id, "completion/complete",
                            _with_params(raw, {**params, "ref": {**ref, "name": own}}), _unnamed(headers))
        elif ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
            owner = self._resource_owner(ref["uri"], refreshed)
            if owner is None:
                self._defer(host_id, ["resources/list", "resources/templates/list"],
                            lambda: self._complete(host_id, raw, params, headers, refreshed=True))
            elif isinstance(owner, str):
                self.to_host(jsonrpc.error_response(host_id, RpcCode.INVALID_PARAMS, owner))
            else:
                self._route(owner, host_id, "completion/complete", raw, headers)
        else:
            self.to_host(jsonrpc.error_response(host_id, RpcCode.INVALID_PARAMS,
                                                "completion/complete needs a ref: ref/prompt with a name, or "
                                                "ref/resource with a uri"))

    def _defer(self, host_id: Id, methods: Sequence[str], then: Callable[[], None]) -> None:
        deferred = self._by_host[host_id] = _Deferred(host_id)

        def go_on() -> None:
            if self._by_host.get(host_id) is deferred:
                del self._by_host[host_id]
            if not deferred.cancelled and not self._closed:
                then()

        self._refresh(methods, go_on)

    def _route(self, member: _Member, host_id: Id, method: str, raw: bytes, headers: Headers) -> None:
        """The host's request to one server, under the host's id (unless that server has a request
        of ours with that id in flight)."""
        upstream_id = host_id
        if upstream_id in member.outstanding:
            upstream_id = self._fresh(member)
            raw = jsonrpc.with_id(raw, upstream_id)
        routed = _Routed(host_id, member.name, upstream_id, method)
        member.outstanding[upstream_id] = routed
        self._by_host[host_id] = routed
        member.upstream.from_host(raw, headers)

    def _everyone(self, host_id: Id, method: str, params: dict[str, Any], headers: Headers, modern: bool, *,
                  capability: str) -> None:
        """One request for every server that offers `capability`; `{}` once all answered."""
        targets = [member for member in self._active() if member.offers(capability)]

        def done(fan: _FanOut) -> None:
            if fan.results or not fan.errors:
                self.to_host(jsonrpc.response(host_id, self._shaped({}, modern)))
            else:
                self._answer_error(host_id, next(iter(fan.errors.values())))

        self._fan_out(method, params, targets, host_id=host_id, headers=headers, done=done)

    def _unknown(self, host_id: Id, method: str, raw: bytes, params: dict[str, Any], headers: Headers) -> None:
        """A method Elicitron does not know: by its prefixed `name` if it has one, else to every
        server, the first result winning (or the first error, if every server fails)."""
        name = params.get("name")
        if isinstance(name, str):
            owners = sorted((member for member in self._active()
                             if name.startswith(member.name + SEPARATOR) and len(name) > len(member.name) + 2),
                            key=lambda member: len(member.name), reverse=True)
            if owners:
                own = name[len(owners[0].name) + len(SEPARATOR):]
                self._route(owners[0], host_id, method, _with_params(raw, {**params, "name": own}),
                            _unnamed(headers))
                return

        def done(fan: _FanOut) -> None:
            if fan.results:
                member_name, result = next(iter(fan.results.items()))
                self._note_task(self._members.get(member_name), result)
                self.to_host(jsonrpc.response(host_id, result))
            elif fan.errors:
                self._answer_error(host_id, next(iter(fan.errors.values())))
            else:
                self.to_host(jsonrpc.error_response(host_id, RpcCode.METHOD_NOT_FOUND,
                                                    f"Method not found: {method} (no server answered it)"))

        self._fan_out(method, params, self._active(), host_id=host_id, headers=headers, first=True, done=done)

    def _task_list(self, host_id: Id, params: dict[str, Any], headers: Headers, modern: bool) -> None:
        def done(fan: _FanOut) -> None:
            if not fan.results and fan.errors:
                self._answer_error(host_id, next(iter(fan.errors.values())))
                return
            tasks: list[Any] = []
            for name, result in fan.results.items():
                for task in result.get("tasks") or ():
                    if isinstance(task, dict):
                        self._note_task(self._members.get(name), task)
                        tasks.append(task)
            self.to_host(jsonrpc.response(host_id, self._shaped({"tasks": tasks}, modern)))

        params = {key: value for key, value in params.items() if key != "cursor"}
        self._fan_out("tasks/list", params, self._active(), host_id=host_id, headers=headers, key="tasks",
                      done=done)

    def _note_task(self, member: _Member | None, result: dict[str, Any]) -> None:
        """Remember which server a task is at (a CreateTaskResult, a task's status)."""
        if member is None:
            return
        task_id = result.get("taskId")
        if not isinstance(task_id, str) and isinstance(result.get("task"), dict):
            task_id = result["task"].get("taskId")
        if isinstance(task_id, str) and (result.get("resultType") == "task" or "status" in result
                                         or isinstance(result.get("task"), dict)):
            if len(self._tasks) >= MAX_TASKS:
                self._tasks.pop(next(iter(self._tasks)))
            self._tasks[task_id] = member.name

    # ---- fanning out ---------------------------------------------------------------------------

    def _fan_out(self, method: str, params: dict[str, Any], targets: Sequence[_Member], *, host_id: Id | None,
                 headers: Headers, done: Callable[[_FanOut], None], key: str | None = None, first: bool = False,
                 timeout: float = REQUEST_TIMEOUT_S) -> _FanOut:
        fan = _FanOut(method, host_id, params, headers, done, key=key, first=first)
        if host_id is not None:
            self._by_host[host_id] = fan
        sends = [(member, self._ask(member, fan, params)) for member in targets]
        if sends:
            fan.timer = self._call_later(timeout, lambda: self._timed_out(fan))
        for member, raw in sends:
            if fan.waiting.get(member.name) is not None and not fan.finished:
                member.upstream.from_host(raw, headers)
            elif fan.finished:  # done already (the first result came at once): not sent at all
                member.outstanding.pop(jsonrpc.peek(raw).id, None)  # type: ignore[arg-type]
        fan.sealed = True
        self._maybe_finish(fan)
        return fan

    def _ask(self, member: _Member, fan: _FanOut, params: dict[str, Any]) -> bytes:
        upstream_id = self._fresh(member)
        member.outstanding[upstream_id] = _Part(fan)
        fan.waiting[member.name] = upstream_id
        return jsonrpc.request(upstream_id, fan.method, params)

    def _fresh(self, member: _Member) -> str:
        while True:
            upstream_id = f"elicitron-{next(self._ids)}"
            if upstream_id not in member.outstanding:
                return upstream_id

    def _part_answered(self, member: _Member, fan: _FanOut, envelope: jsonrpc.Envelope) -> None:
        if fan.waiting.get(member.name) != envelope.id:
            return
        del fan.waiting[member.name]
        if fan.finished:  # after the host got its answer
            if fan.method == "initialize" and member.name in fan.timed_out:
                if envelope.result is not msgspec.UNSET:
                    self._late_handshake(member, envelope.result_dict())
                else:
                    member.handshake = "failed"
                    logger.warning("server %s is left out: its late initialize failed: %s", member.name,
                                   envelope.error_dict().get("message"))
            return
        if envelope.error is not msgspec.UNSET:
            fan.errors[member.name] = envelope.error_dict()
        else:
            result = envelope.result_dict()
            if fan.key is not None:
                items = result.get(fan.key)
                items = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
                got = fan.results.get(member.name)
                if got is None:
                    got = fan.results[member.name] = {**result, fan.key: items}
                else:
                    got[fan.key].extend(items)
                pages = fan.pages[member.name] = fan.pages.get(member.name, 1) + 1
                cursor = result.get("nextCursor")
                got.pop("nextCursor", None)
                if isinstance(cursor, str) and cursor:
                    if pages <= MAX_PAGES:
                        member.upstream.from_host(self._ask(member, fan, {**fan.params, "cursor": cursor}),
                                                  fan.headers)
                        return
                    logger.warning("%s of %s: stopped after %d pages", fan.method, member.name, MAX_PAGES)
            else:
                fan.results[member.name] = result
                if fan.first:
                    self._finish(fan)
                    return
        self._maybe_finish(fan)

    def _maybe_finish(self, fan: _FanOut) -> None:
        if fan.sealed and not fan.waiting and not fan.finished:
            self._finish(fan)

    def _finish(self, fan: _FanOut) -> None:
        fan.finished = True
        if fan.timer is not None:
            fan.timer.cancel()
        if fan.host_id is not None and self._by_host.get(fan.host_id) is fan:
            del self._by_host[fan.host_id]
        fan.done(fan)

    def _timed_out(self, fan: _FanOut) -> None:
        if fan.finished:
            return
        fan.timed_out = list(fan.waiting)
        if fan.method != "initialize":  # a late initialize still counts: the server joins then
            for name, upstream_id in list(fan.waiting.items()):
                logger.warning("%s: server %s did not answer within its time; left out", fan.method, name)
                member = self._members.get(name)
                if member is not None and member.outstanding.pop(upstream_id, None) is not None:
                    member.upstream.from_host(_cancelled(upstream_id, "Elicitron stopped waiting"))
            fan.waiting.clear()
        self._finish(fan)

    def _drop_fan(self, fan: _FanOut, reason: object) -> None:
        """The host cancelled it: every server's part is cancelled, and no answer goes out."""
        fan.finished = True
        if fan.timer is not None:
            fan.timer.cancel()
        for name, upstream_id in fan.waiting.items():
            member = self._members.get(name)
            if member is not None and member.outstanding.pop(upstream_id, None) is not None:
                member.upstream.from_host(_cancelled(upstream_id, reason))
        fan.waiting.clear()

    def _answer_error(self, host_id: Id, error: dict[str, Any]) -> None:
        code = error.get("code")
        message = error.get("message")
        self.to_host(jsonrpc.error_response(host_id, code if isinstance(code, int) else RpcCode.INTERNAL_ERROR,
                                            message if isinstance(message, str) else "the server failed",
                                            error.get("data")))

    # ---- subscriptions/listen (2026-07-28) ------------------------------------------------------

    def _listen(self, host_id: Id, params: dict[str, Any], headers: Headers) -> None:
        requested = params.get("notifications")
        requested = requested if isinstance(requested, dict) else {}
        own = {key: True for key in _LISTEN_CAPABILITY if requested.get(key) is True}
        listen = _Listen(host_id, requested, own)
        self._by_host[host_id] = listen
        sends: list[tuple[_Member, bytes]] = []
        for member in self._active():
            wanted = self._listen_filter(member, requested)
            if wanted:
                upstream_id = self._fresh(member)
                member.outstanding[upstream_id] = _ListenPart(listen)
                listen.parts[member.name] = upstream_id
                listen.unacked.add(member.name)
                sends.append((member, jsonrpc.request(upstream_id, "subscriptions/listen",
                                                      {**params, "notifications": wanted})))
        if sends:
            listen.timer = self._call_later(LISTEN_ACK_TIMEOUT_S, lambda: self._acknowledge(listen))
        for member, raw in sends:
            if not listen.ended and member.name in listen.parts:
                member.upstream.from_host(raw, headers)
        if not listen.unacked:
            self._acknowledge(listen)

    def _listen_filter(self, member: _Member, requested: dict[str, Any]) -> dict[str, Any]:
        """The part of a listen filter this server can honor."""
        wanted: dict[str, Any] = {}
        capabilities = member.capabilities
        for key, value in requested.items():
            if key in _LISTEN_CAPABILITY:
                offered = capabilities.get(_LISTEN_CAPABILITY[key]) if capabilities is not None else {}
                if value is True and isinstance(offered, dict) \
                        and (capabilities is None or offered.get("listChanged") is True):
                    wanted[key] = True
            elif key == "resourceSubscriptions":
                resources = capabilities.get("resources") if capabilities is not None else {}
                if not isinstance(resources, dict) or (capabilities is not None and resources.get("subscribe") is not True):
                    continue
                uris = []
                for uri in value if isinstance(value, list) else ():
                    owner = self._resource_owner(uri, True) if isinstance(uri, str) else None
                    if owner is member or not isinstance(owner, _Member):
                        uris.append(uri)
                if uris:
                    wanted[key] = uris
            elif key == "taskIds" and isinstance(value, list):
                ids = [task for task in value if self._tasks.get(task, member.name) == member.name]
                if ids:
                    wanted[key] = ids
            elif value is not None and value is not False:
                wanted[key] = value  # an extension's key: each server honors it or not
        return wanted

    def _listen_event(self, member: _Member, envelope: jsonrpc.Envelope) -> bool:
        """A frame of one of the server's listen streams (True), re-stamped for the host's stream."""
        params = envelope.params_dict()
        meta = params.get("_meta")
        subscription = meta.get(SUBSCRIPTION_KEY) if isinstance(meta, dict) else None
        part = member.outstanding.get(subscription) if isinstance(subscription, (int, str)) else None
        if not isinstance(part, _ListenPart):
            return False
        listen = part.listen
        assert isinstance(meta, dict)
        if envelope.method == "notifications/subscriptions/acknowledged":
            honored = params.get("notifications")
            listen.honored[member.name] = honored if isinstance(honored, dict) else {}
            listen.unacked.discard(member.name)
            if not listen.unacked:
                self._acknowledge(listen)
            return True
        if envelope.method in _CHANGED:
            member.stale.update(_CHANGED[envelope.method])
        event = jsonrpc.notification(str(envelope.method),
                                     {**params, "_meta": {**meta, SUBSCRIPTION_KEY: listen.host_id}})
        if listen.acknowledged:
            self.to_host(event)
        else:
            listen.buffer.append(event)
        return True

    def _acknowledge(self, listen: _Listen) -> None:
        if listen.acknowledged or listen.ended:
            return
        listen.acknowledged = True
        if listen.timer is not None:
            listen.timer.cancel()
        for name in listen.unacked:
            logger.warning("server %s did not acknowledge subscriptions/listen in time; the stream goes on "
                           "without its acknowledgement", name)
        listen.unacked.clear()
        honored: dict[str, Any] = dict(listen.own)
        for one in listen.honored.values():
            for key, value in one.items():
                if isinstance(value, list):
                    honored[key] = list(dict.fromkeys([*honored.get(key, []), *value]))
                elif value is True or key not in honored:
                    honored[key] = value
        self.to_host(jsonrpc.notification("notifications/subscriptions/acknowledged", {
            "notifications": honored, "_meta": {SUBSCRIPTION_KEY: listen.host_id}}))
        buffered, listen.buffer = listen.buffer, []
        for event in buffered:
            self.to_host(event)

    def _listen_answered(self, member: _Member, listen: _Listen, envelope: jsonrpc.Envelope) -> None:
        """One server's listen ended: before its acknowledgement, it honors nothing (left out); after
        it, the host's stream ends too (the host listens again, as it would with that server)."""
        listen.parts.pop(member.name, None)
        if listen.ended:
            return
        if member.name in listen.unacked:
            listen.unacked.discard(member.name)
            logger.info("server %s refused subscriptions/listen: %s", member.name,
                        envelope.error_dict().get("message") if envelope.error is not msgspec.UNSET else "ended")
            if not listen.unacked:
                self._acknowledge(listen)
            return
        self._end_listen(listen, envelope)

    def _listen_lost(self, member: _Member, listen: _Listen, reason: object) -> None:
        """A server tore its listen stream down: so is the host's (it listens again)."""
        listen.parts.pop(member.name, None)
        if listen.ended:
            return
        if member.name in listen.unacked:
            listen.unacked.discard(member.name)
            if not listen.unacked:
                self._acknowledge(listen)
            return
        self._end_listen(listen, None, reason=reason)
        self.to_host(_cancelled(listen.host_id, reason if isinstance(reason, str) else
                                f"server {member.name!r} ended its subscription"))

    def _end_listen(self, listen: _Listen, ending: jsonrpc.Envelope | None, reason: object = None) -> None:
        """Every server's stream of this listen is cancelled; the host is answered unless it
        cancelled (`ending` None)."""
        if listen.ended:
            return
        listen.ended = True
        if listen.timer is not None:
            listen.timer.cancel()
        if self._by_host.get(listen.host_id) is listen:
            del self._by_host[listen.host_id]
        for name, upstream_id in listen.parts.items():
            member = self._members.get(name)
            if member is not None and member.outstanding.pop(upstream_id, None) is not None:
                member.upstream.from_host(_cancelled(upstream_id, reason or "the subscription ended"))
        listen.parts.clear()
        if ending is None:
            return
        if ending.error is not msgspec.UNSET:
            self._answer_error(listen.host_id, ending.error_dict())
        else:
            self.to_host(jsonrpc.response(listen.host_id, {"_meta": {SUBSCRIPTION_KEY: listen.host_id},
                                                           "resultType": "complete"}))

    # ---- announcing changes --------------------------------------------------------------------

    def _announce(self, lists: Iterable[str]) -> None:
        """Tell the host these lists changed: notifications in the handshake era, events on its
        listen streams in 2026-07-28."""
        names = [name for name in lists if name in _ANNOUNCE]
        for name in names:
            for member in self._members.values():
                member.stale.update(_ANNOUNCE[name][2])
        if self._era == "handshake" and self._host_ready:
            for name in names:
                self.to_host(jsonrpc.notification(_ANNOUNCE[name][0], {}))
        for listen in [opened for opened in self._by_host.values() if isinstance(opened, _Listen)]:
            for name in names:
                method, key, _ = _ANNOUNCE[name]
                if listen.own.get(key):
                    event = jsonrpc.notification(method, {"_meta": {SUBSCRIPTION_KEY: listen.host_id}})
                    if listen.acknowledged:
                        self.to_host(event)
                    else:
                        listen.buffer.append(event)

    # ---- bits ----------------------------------------------------------------------------------

    def _active(self) -> list[_Member]:
        """The servers a request goes to: in the handshake era those whose initialize succeeded."""
        if self._era == "handshake":
            return [member for member in self._members.values() if member.handshake == "yes"]
        return list(self._members.values())

    def _remove(self, member: _Member, why: str) -> None:
        del self._members[member.name]
        self._joining.discard(member.name)
        outstanding, member.outstanding = member.outstanding, {}
        for pending in outstanding.values():
            if isinstance(pending, _Routed):
                if self._by_host.get(pending.host_id) is pending:
                    del self._by_host[pending.host_id]
                self.to_host(jsonrpc.error_response(pending.host_id, RpcCode.SERVER_ERROR,
                                                    f"{pending.method} to {member.name!r} was lost: {why}"))
            elif isinstance(pending, _Part):
                fan = pending.fan
                if fan.waiting.pop(member.name, None) is not None and not fan.finished:
                    fan.errors[member.name] = {"code": RpcCode.SERVER_ERROR, "message": why}
                    self._maybe_finish(fan)
            else:
                listen = pending.listen
                listen.parts.pop(member.name, None)
                if member.name in listen.unacked:
                    listen.unacked.discard(member.name)
                    if not listen.unacked:
                        self._acknowledge(listen)
        for key in [key for key in self._asked_back if key[0] == member.name]:
            host_facing = self._asked_back.pop(key)
            self._asked.pop(host_facing, None)
            self.to_host(jsonrpc.notification("notifications/cancelled", {"requestId": host_facing, "reason": why}))
        member.upstream.close()
        for method in _LISTS:
            self._rebuild(method)

    def _shaped(self, result: dict[str, Any], modern: bool) -> dict[str, Any]:
        """A result the merger writes itself; 2026-07-28 results say `resultType` and who answers."""
        if not modern:
            return result
        meta = result.get("_meta")
        return {**result, "resultType": result.get("resultType", "complete"),
                "_meta": {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_KEY: server_info(Exposure())}}

    @staticmethod
    def _cache_fields(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """A merged 2026-07-28 answer is cacheable as long as its least cacheable part."""
        ttls: list[int] = []
        public = True
        for result in results:
            ttl = result.get("ttlMs")
            ttls.append(ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl >= 0 else 0)
            public = public and result.get("cacheScope") == "public"
        return {"ttlMs": min(ttls, default=0), "cacheScope": "public" if public and ttls else "private"}

    def _refuse(self, envelope: jsonrpc.Envelope, code: int, why: str) -> None:
        if envelope.kind == "request" and isinstance(envelope.id, (int, str)):
            self.to_host(jsonrpc.error_response(envelope.id, code, why))


def _deep_merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        mine = into.get(key)
        if isinstance(mine, dict) and isinstance(value, dict):
            _deep_merge(mine, value)
        elif isinstance(value, dict):
            if key not in into or mine is None:
                into[key] = {}
                _deep_merge(into[key], value)
        elif isinstance(value, bool) and (isinstance(mine, bool) or key not in into):
            into[key] = bool(mine) or value
        elif key not in into:
            into[key] = value


def _with_params(raw: bytes, params: dict[str, Any]) -> bytes:
    message = msgspec.json.decode(raw)
    message["params"] = params
    return jsonrpc.encode(message)


def _unnamed(headers: Headers) -> Headers:
    """The host's HTTP routing headers without its `Mcp-Name` (the public name): a server over HTTP
    gets the one its own name makes (main_process/upstream_http.py derives it from the message)."""
    if not headers:
        return headers
    return {key: value for key, value in headers.items() if key.lower() != "mcp-name"}


def _cancelled(request_id: Id, reason: object) -> bytes:
    params: dict[str, Any] = {"requestId": request_id}
    if isinstance(reason, str):
        params["reason"] = reason
    return jsonrpc.notification("notifications/cancelled", params)


def _hashable(value: object) -> object:
    return value if isinstance(value, (int, str)) else repr(value)
