"""Relayed MCP sessions: a host's own session with one server, through main (extension msgMcpRelay).

A host peer (a gateway) opens a session by naming a server in its first `msgMcpRelay`; main starts
that host's own connection to the server (`upstream.py`: the server's command, as the host itself
would have started it) and from then on passes every JSON-RPC message both ways as the bytes it is:
sampling, roots, logging, completions, subscriptions, progress, cancellation, tasks, either era's
methods, and methods Elicitron has never heard of. The host and the server negotiate the protocol
between themselves, so what the host sees is what it would see direct. Only consent is decided:

- the host's `initialize`: the server is told the client answers elicitation in form and URL mode
  (the windows answer what the host cannot), so it offers what it would offer such a client;
- a `tools/call` goes on once the consent layer allows it (rules, `toolApproval`, an approval card);
  a denial is answered to the host as the denied tool result. While it waits the host may cancel it;
  while a card waits, a host that sent a progressToken hears main's progress (progress.py), one
  that speaks tasks gets a task (host_tasks.py; `tasks/*` about main's tasks are answered here),
  and one with neither is told at a deadline to retry (consent/long_wait.py);
- a server's `elicitation/create` is decided by the gate (elicitation_gate.py): a rule may answer
  it at once; else it goes where the server's `elicitationRoute` says: to the windows (main answers
  the server; the host never sees it), to the host (its answer goes to the server as it sent it;
  the audit records it), or to both, first answer winning (a window's answer cancels the host's
  copy with `notifications/cancelled`). A host that did not declare the request's mode never gets
  it: the windows answer;
- a 2026-07-28 server's `input_required` result is a round of such elicitations, decided the same
  way, each session's rounds held by its `InputRounds` (input_rounds.py) until the request goes on.

    opening ──► open ──► closed     (the host closed it, went away, or the server's process ended)

One class per session, owning no sockets (`RelaySession`); `Relay` keeps them per peer, starts and
stops their server connections, and ties them to the consent layer, the lifecycle and the session's
host side: the broker (`msgMcpRelay` to the peer) or the host's own pipes, which a local `serve`
handed main (host_pipes.py). A session opened with server EVERY_SERVER is the host's session with
every server at once: `merged` (merged_relay.py) runs it, one session here per server.
"""

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec

from main_process.config import HttpServerConfig
from main_process.consent.elicitation_gate import (
    Answered,
    Decision,
    ElicitationGate,
    HostModes,
    Read,
    Refused,
)
from main_process.consent.long_wait import HostWait, LongWaits
from main_process.consent.pending import (
    Elicitation,
    PendingRequest,
    PendingRequests,
    RequestOptions,
    Unanswered,
)
from main_process.relay.call_progress import CallProgress
from main_process.relay.host_cancels import HostCancels
from main_process.relay.host_tasks import CAPABILITY as TASK_CAPABILITY
from main_process.relay.host_tasks import EXTENSION as TASKS_EXTENSION
from main_process.relay.host_tasks import METHODS as TASK_METHODS
from main_process.relay.host_tasks import HostTasks
from main_process.relay.input_rounds import (
    Headers,
    InputRounds,
    ModernRequest,
    elicit_result,
    read_elicitation,
    result_json,
)
from main_process.relay.merged_relay import MergedRelays
from main_process.relay.progress import HostProgress
from main_process.relay.upstream import StdioUpstream, UpstreamError
from main_process.relay.upstream_http import HttpUpstream
from main_process.servers.servers import ManagedServer
from main_process.wire.peer_calls import Cancel
from main_process.wire.peers import Peer
from shared import channels, jsonrpc
from shared.codec import encode
from shared.errors import RpcCode, UndeliverableRequestError
from shared.messages import (
    EVERY_SERVER,
    MAX_ID_CHARS,
    CallError,
    ChannelReply,
    ElicitationResult,
    McpClose,
    McpRelay,
    ServerInfo,
)

if TYPE_CHECKING:
    from main_process.consent.tool_approval import ToolApproval

logger = logging.getLogger(__name__)

MAX_SESSIONS: Final = 128  # server connections for hosts, all peers together (each is a process, ~3 descriptors)
MAX_SESSIONS_PER_PEER: Final = 32  # a host through `serve` holds one per configured server
_ELICITATION_CAPABILITY: Final[dict[str, dict[str, Any]]] = {"form": {}, "url": {}}
_CANCELLED_REASON: Final = "answered in Elicitron"
_PROTOCOL_KEY: Final = "io.modelcontextprotocol/protocolVersion"  # in a 2026-07-28 request's _meta
_PROTOCOL_KEY_BYTES: Final = _PROTOCOL_KEY.encode()
_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
_CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
_INPUT_REQUIRED: Final = b"input_required"
_MAX_WITHDRAWN: Final = 1000  # server requests withdrawn for a host that stopped waiting, whose cancel may follow
RETRY_FULL_S: Final = 0.02  # a peer's full queue is tried again this often (ZeroMQ says nothing when it drains)


class RelayPorts(Protocol):
    """What a session needs from main."""

    def to_host(self, session: "RelaySession", raw: bytes) -> None: ...

    def needs_decision(self, session: "RelaySession") -> bool:
        """False when every tools/call of this server goes on without a look (no rule, no policy)."""

    def decide_call(self, session: "RelaySession", tool: str, arguments: dict[str, Any], send_on: Callable[[], None],
                    reply: Callable[[ChannelReply], None], wait: HostWait | None) -> Cancel | None:
        """The consent layer's decision on a tools/call; None when it was decided at once. `wait`:
        the call's session and progress token, for a card that takes longer than the host waits."""

    def decide(self, session: "RelaySession", read: Read, host: HostModes) -> Decision:
        """The gate's decision on one of the server's elicitations (rules, route, screening)."""

    def record(self, session: "RelaySession", elicitation: Elicitation, answered: Answered,
               then: Callable[[], None]) -> None:
        """An answer the gate gave, audited if a rule's; then `then`."""

    def ask_windows(self, session: "RelaySession", elicitation: Elicitation,
                    resolve: Callable[[ElicitationResult], None]) -> PendingRequest:
        """Open a request in the windows. Raises UndeliverableRequestError when it cannot be shown."""

    def record_for_host(self, session: "RelaySession", elicitation: Elicitation) -> PendingRequest | None:
        """A request the host itself answers: audited, shown to no window."""

    def answered_by_host(self, session: "RelaySession", pending: PendingRequest, answer: ElicitationResult) -> None:
        ...

    def withdraw(self, pending: PendingRequest, reason: Unanswered) -> None:
        """Close a card nobody answered: the server withdrew it ("cancelled"), the host stopped
        waiting ("host-gone"), or the server's connection ended ("server-closed")."""

    def calls_changed(self, session: "RelaySession", delta: int) -> None: ...

    def elicitation_complete(self, session: "RelaySession", elicitation_id: str) -> None: ...

    def note_host(self, session: "RelaySession", client_info: Any) -> None:
        """The host said who it is (`clientInfo`)."""


@dataclass(eq=False)
class _HostAsked:
    """A server request the host has (elicitationRoute "host" or "first")."""

    pending: PendingRequest | None  # the audit row; under "first" also the windows' copy
    first: bool


@dataclass(frozen=True)
class _Declared:
    """A 2026-07-28 envelope's `_meta` as the server gets it, and what the host declared in it."""

    meta: msgspec.Raw  # with elicitation declared in both modes
    client_info: Any
    form: bool
    url: bool
    tasks: bool  # the tasks extension (SEP-2663) is in the host's capabilities


@dataclass(eq=False)
class RelaySession:
    """One host's session with one server: the consent decisions on its way, no I/O."""

    peer: Peer
    name: str  # the peer's name for the session
    server: ManagedServer
    ports: RelayPorts
    to_server: Callable[[bytes, Headers], None] = lambda raw, headers: None
    host_form: bool = False  # what the host declared in its `initialize`
    host_url: bool = False
    _held: dict[jsonrpc.Id, Cancel | None] = field(default_factory=dict)  # tools/call awaiting consent
    _calls: set[jsonrpc.Id] = field(default_factory=set)  # tools/call at the server
    _windows: dict[jsonrpc.Id, PendingRequest] = field(default_factory=dict)  # server requests in the windows
    _host_asked: dict[jsonrpc.Id, _HostAsked] = field(default_factory=dict)
    _answered_first: set[jsonrpc.Id] = field(default_factory=set)  # ... which a window answered first
    _modern: dict[jsonrpc.Id, ModernRequest] = field(default_factory=dict)  # 2026-07-28 requests at the server
    _withdrawn: dict[jsonrpc.Id, None] = field(default_factory=dict)  # cards closed as host-gone (bounded)
    _host_cancels: HostCancels = field(default_factory=HostCancels)  # whose call a server request may be for
    _modern_host: tuple[Any, bool, bool] | None = None  # the last clientInfo and modes of an envelope
    _last_meta: tuple[bytes, _Declared] | None = None  # a host sends the same `_meta` every time
    progress: HostProgress | None = None  # main's own progress to the host while a card waits (progress.py)
    _waiting: CallProgress | None = None  # the calls' progress tokens, made from `progress`
    # The host's task-augmented calls (host_tasks.py), made at construction from the session's own
    # cancel: `make_tasks(cancel_task_call)`; None: this session holds no tasks.
    make_tasks: Callable[[Callable[[jsonrpc.Id], None]], HostTasks] | None = None
    tasks: HostTasks | None = field(init=False, default=None)
    _declaring: tuple[jsonrpc.Id, str] | None = None  # the host's initialize or server/discover: its answer
    # declares main's tasks
    unreadable: int = 0  # messages refused as not strict JSON-RPC (for the log's limit)
    closed: bool = False
    _rounds: InputRounds = field(init=False, repr=False)  # 2026-07-28 input rounds (input_rounds.py)

    def __post_init__(self) -> None:
        self._rounds = InputRounds(_RoundsSide(self), name=self.name, server=self.server.name)
        self.tasks = None if self.make_tasks is None else self.make_tasks(self.cancel_task_call)

        def cards_open() -> bool:
            return bool(self._windows) or self._rounds.cards_open()

        if self.progress is not None:
            self._waiting = CallProgress(self.progress, live_calls=lambda: self._calls, cards_open=cards_open)

    # ---- host -> server ----------------------------------------------------------------

    def from_host(self, raw: bytes, headers: Headers = None) -> None:
        """`headers`: the host's HTTP routing headers for this message (for a server over HTTP)."""
        if raw[:1] != b"{" and jsonrpc.is_batch(raw):  # (an object, the usual case, is never one)
            items = jsonrpc.split_batch(raw)
            if items is None:
                self._host_unreadable(raw)
                return
            if any(self._decides(jsonrpc.peek(item)) for item in items):
                for item in items:  # consent is decided per call; the server gets them one by one
                    self._from_host_one(item, None)
                return
            self.to_server(raw, None)
            return
        self._from_host_one(raw, headers)

    @staticmethod
    def _decides(envelope: jsonrpc.Envelope) -> bool:
        return envelope.method in ("initialize", "tools/call") or envelope.kind == "response" \
            or envelope.kind == "request" or not jsonrpc.readable(envelope)

    def _from_host_one(self, raw: bytes, headers: Headers) -> None:
        envelope = jsonrpc.peek(raw)
        if not jsonrpc.readable(envelope):
            self._host_unreadable(raw)
            return
        try:
            self._from_host_read(envelope, raw, headers)
        except (msgspec.DecodeError, RecursionError) as exc:  # a value `peek` skipped is not strict JSON
            request_id = envelope.id
            if isinstance(request_id, (int, str)):
                self._modern.pop(request_id, None)
                self._held.pop(request_id, None)
            self._host_unreadable(raw, f"Parse error: not strict JSON ({exc})")

    def _host_unreadable(self, raw: bytes, why: str | None = None) -> None:
        """Never passed on: the server's parser may read what we could not (a NaN, a float id)
        and run a call no one decided. A request gets its error; anything else is dropped."""
        request_id, is_request, code, default_why = jsonrpc.unreadable_error(raw)
        if why is not None:
            code = jsonrpc.PARSE_ERROR
        _log_unreadable(self, "host", why or default_why)
        if is_request or request_id is None:
            self.ports.to_host(self, jsonrpc.error_response(request_id, code, f"{why or default_why}; not sent to the server"))

    def _from_host_read(self, envelope: jsonrpc.Envelope, raw: bytes, headers: Headers) -> None:
        method = envelope.method
        request_id = envelope.id
        # Every message of a session comes this way, so its kind is read here, not in Envelope.kind.
        if isinstance(method, str) and request_id is not msgspec.UNSET:  # a request
            assert isinstance(request_id, (int, str))
            if self.tasks is not None and method in TASK_METHODS \
                    and self.tasks.handle(request_id, method, envelope.params_dict()):
                return  # one of main's tasks: the server never hears of it
            modern: ModernRequest | None = None
            if _PROTOCOL_KEY_BYTES in raw:  # cheap first look; decided on the params below
                raw, modern = self._modern_request(raw, method, headers)
                if modern is not None:
                    if self._rounds.resume(request_id, modern):
                        return
                    self._modern[request_id] = modern
            if method == "tools/call":
                if modern is None and self.tasks is not None and b'"task"' in raw:
                    as_task = self._as_task(envelope, request_id, raw)
                    if as_task is None:
                        return
                    raw, request_id = as_task
                    envelope = jsonrpc.peek(raw)
                self._call(envelope, request_id, raw, modern, headers)
                return
            if method == "initialize":
                raw = self._initialize(raw)
            if method in ("initialize", "server/discover"):
                self._declaring = (request_id, method)
            self.to_server(raw, headers)
            return
        kind = envelope.kind
        if kind == "response":
            if not self._host_answered(envelope, raw):
                return
        elif kind == "notification" and method == "tools/call":  # (an SDK's reading of a call with a float id)
            _log_unreadable(self, "host", "a tools/call without an id is not a call; dropped")
            return
        elif kind == "notification" and envelope.method == "notifications/cancelled":
            request_id = envelope.params_dict().get("requestId")
            if isinstance(request_id, (int, str)) and request_id in self._held:
                cancel = self._held.pop(request_id)  # the server never saw it
                self._modern.pop(request_id, None)
                self._ended(request_id)
                if cancel is not None:
                    cancel()
                return
            if isinstance(request_id, (int, str)):
                self._rounds.cancel(request_id)
                hosts_cards = self._call_cancelled(request_id)
                if hosts_cards:
                    self.to_server(raw, headers)  # the server stops the call before its cards are answered
                    self._host_stopped_waiting(hosts_cards)
                    return
        self.to_server(raw, headers)

    def _initialize(self, raw: bytes) -> bytes:
        """Note what the host can answer; tell the server its client answers elicitation."""
        message = jsonrpc.strict_object(raw)  # raises for what is not strict JSON: never passed on
        params = message.get("params")
        if not isinstance(params, dict):
            return raw
        self.host_form, self.host_url = _declare_elicitation(params, "capabilities")
        self.ports.note_host(self, params.get("clientInfo"))
        return jsonrpc.encode(message)

    def _modern_request(self, raw: bytes, method: str, headers: Headers) -> tuple[bytes, ModernRequest | None]:
        """A 2026-07-28 request (its envelope names the protocol): the capabilities the server sees
        include elicitation, as for `initialize`; what the host declared is kept for its answer.

        Only the levels down to `_meta` are read and written again; the rest (the arguments, say)
        goes on as the host wrote it, and a `_meta` seen last time is not read again."""
        try:
            message = _RAW_OBJECT.decode(raw)
            params = _RAW_OBJECT.decode(message["params"])
            meta = bytes(params["_meta"])
        except (KeyError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return raw, None
        last = self._last_meta
        if last is not None and last[0] == meta:
            declared = last[1]
        else:
            found = _declared(meta)
            if found is None:
                return raw, None
            declared = found
            self._last_meta = (meta, declared)
        host = (declared.client_info, declared.form, declared.url)
        if host != self._modern_host:
            self._modern_host = host
            self.ports.note_host(self, declared.client_info)
        params["_meta"] = declared.meta
        message["params"] = msgspec.Raw(jsonrpc.encode(params))
        raw = jsonrpc.encode(message)
        return raw, ModernRequest(method, raw, declared.form, declared.url, headers, declared.tasks)

    def _call(self, envelope: jsonrpc.Envelope, request_id: jsonrpc.Id, raw: bytes, modern: ModernRequest | None,
              headers: Headers) -> None:
        if not self.ports.needs_decision(self):  # the common case: nothing to decide, nothing to read
            if self._waiting is not None and b"progressToken" in raw:
                self._waiting.note(request_id, modern.params if modern is not None else envelope.params_dict())
            self._send_on_call(request_id, raw, headers)
            return
        params = modern.params if modern is not None else envelope.params_dict()
        if self._waiting is not None:
            self._waiting.note(request_id, params)
        tool = params.get("name")
        arguments = params.get("arguments")
        state = params.get("requestState")
        if self._rounds.is_continuation(state):
            # The retry of a call that was decided already (it continues after an input round).
            self._send_on_call(request_id, raw, headers)
            return
        if not isinstance(tool, str) or not isinstance(arguments, (dict, type(None))):
            # Not passed on: a laxer server could read a tool out of what we cannot decide on.
            self._modern.pop(request_id, None)
            self._answer(request_id, jsonrpc.error_response(
                request_id, RpcCode.INVALID_PARAMS,
                "Invalid params: tools/call needs a string `name` and an object `arguments`; not sent to the server"))
            return

        def send_on() -> None:
            if request_id in self._held:  # not taken back meanwhile
                del self._held[request_id]
                self._send_on_call(request_id, raw, headers)

        def reply(answer: ChannelReply) -> None:
            if request_id not in self._held:
                return  # the host cancelled it: it expects no answer
            del self._held[request_id]
            self._modern.pop(request_id, None)
            self._ended(request_id)
            if answer.result is not None:
                result = answer.result if modern is None else {**answer.result, "resultType": "complete"}
                self._answer(request_id, jsonrpc.response(request_id, result))
            else:
                error = answer.error or CallError(code=RpcCode.INTERNAL_ERROR, message="no answer")
                self._answer(request_id, jsonrpc.error_response(request_id, error.code, error.message))

        self._held[request_id] = None
        may_be_task = self.tasks is not None and modern is not None and modern.host_tasks
        in_task = may_be_task or (self.tasks is not None and self.tasks.owns(request_id))
        tasks = self.tasks
        wait = HostWait((self.peer.routing_id, self.name), self._waiting.token(request_id), self._waiting.progress,
                        in_task=in_task, listening=lambda: tasks is None or not tasks.owns(request_id)) \
            if self._waiting is not None else None
        cancel = self.ports.decide_call(self, tool, arguments or {}, send_on, reply, wait)
        if request_id in self._held:
            self._held[request_id] = cancel
            if may_be_task and self.tasks is not None:  # still waiting on its card: a task past the threshold
                self.tasks.later(self.tasks.after_s, lambda: self._to_task(request_id))

    def _to_task(self, request_id: jsonrpc.Id) -> None:
        """A 2026-07-28 call still waiting on its card: the host gets a task for it (SEP-2663)."""
        if self.tasks is not None and request_id in self._held and not self.closed \
                and not self.tasks.owns(request_id) and self.tasks.adopt(request_id):
            self._ended(request_id)  # its request is answered: no more progress on its token

    def _as_task(self, envelope: jsonrpc.Envelope, request_id: jsonrpc.Id, raw: bytes) -> tuple[bytes, jsonrpc.Id] | None:
        """A task-augmented call: the host gets its task now, and the call goes on under the task's own
        request id, without `task` (the server need not know tasks) and without the host's progress
        token (the host stopped listening on it with the task). None: refused, the host was told."""
        assert self.tasks is not None
        requested = HostTasks.requested(envelope.params_dict())
        if requested is None:
            return raw, request_id  # not a task after all (`"task"` was in its arguments)
        call_id = self.tasks.create(request_id, requested)
        if call_id is None:
            return None
        message = jsonrpc.strict_object(raw)
        params = message["params"]
        del params["task"]
        meta = params.get("_meta")
        if isinstance(meta, dict):
            meta.pop("progressToken", None)
        message["id"] = call_id
        return jsonrpc.encode(message), call_id

    def cancel_task_call(self, call_id: jsonrpc.Id) -> None:
        """tasks/cancel (or the task's ttl): as if the host had cancelled the call itself."""
        cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": call_id, "reason": "the task was cancelled"}}
        self._from_host_one(jsonrpc.encode(cancelled), None)

    def _answer(self, request_id: jsonrpc.Id, raw: bytes) -> None:
        """The answer to a host's call: to the host, or to its task."""
        if self.tasks is not None and self.tasks.owns(request_id):
            self.tasks.finished(request_id, raw)
            return
        if self._declaring is not None and self._declaring[0] == request_id and self.tasks is not None:
            raw = _declare_tasks(raw, modern=self._declaring[1] == "server/discover")
            self._declaring = None
        self.ports.to_host(self, raw)

    def _ended(self, request_id: jsonrpc.Id) -> None:
        """A host's tools/call was answered or cancelled: no more progress on its token."""
        if self._waiting is not None:
            self._waiting.ended(request_id)

    def _send_on_call(self, request_id: jsonrpc.Id, raw: bytes, headers: Headers) -> None:
        if self.closed:
            return
        self.to_server(raw, headers)
        if request_id not in self._calls:  # after it left: the count is for `peers`, not on the call's path
            self._calls.add(request_id)
            self.ports.calls_changed(self, +1)

    def _host_answered(self, envelope: jsonrpc.Envelope, raw: bytes) -> bool:
        """The host's response to a server request: True to pass it to the server."""
        request_id = envelope.id
        if not isinstance(request_id, (int, str)):
            return True
        if request_id in self._answered_first:
            self._answered_first.discard(request_id)
            return False  # a window answered first; the server has its answer already
        asked = self._host_asked.pop(request_id, None)
        if asked is not None and asked.pending is not None:
            if request_id not in self._windows:
                self._host_cancels.forget(request_id)
            self.ports.answered_by_host(self, asked.pending, elicit_result(envelope.result_dict()))
        return True

    # ---- server -> host ----------------------------------------------------------------

    def from_server(self, raw: bytes) -> None:
        if self.closed:
            return
        envelope = jsonrpc.peek(raw)
        if not jsonrpc.readable(envelope):
            self._server_unreadable(raw)
            return
        try:
            self._from_server_read(envelope, raw)
        except (msgspec.DecodeError, RecursionError) as exc:  # a value `peek` skipped is not strict JSON
            self._server_unreadable(raw, f"Parse error: not strict JSON ({exc})")

    def _server_unreadable(self, raw: bytes, why: str | None = None) -> None:
        """Never passed on (an elicitation the host was not to see, say): a request of the server
        gets its error; an answer to the host's request becomes an error for that request."""
        request_id, is_request, code, default_why = jsonrpc.unreadable_error(raw)
        why = why or default_why
        _log_unreadable(self, "server", why)
        if is_request:
            self.to_server(jsonrpc.error_response(request_id, code, f"{why}; not passed on by Elicitron"), None)
            return
        if request_id is None:
            return
        if request_id in self._calls:
            self._calls.discard(request_id)
            self._ended(request_id)
            self.ports.calls_changed(self, -1)
        self._modern.pop(request_id, None)
        self.ports.to_host(self, jsonrpc.error_response(
            request_id, RpcCode.INTERNAL_ERROR, f"the server's answer could not be read ({why}); not passed on"))

    def _from_server_read(self, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        # Every message of the server comes this way, so a response is told here, not in Envelope.kind.
        if not isinstance(envelope.method, str) and (envelope.result is not msgspec.UNSET
                                                     or envelope.error is not msgspec.UNSET):
            request_id = envelope.id
            if isinstance(request_id, (int, str)):
                ended = request_id in self._calls
                if ended:
                    self._calls.discard(request_id)
                    self._ended(request_id)
                modern = self._modern.pop(request_id, None)
                if modern is not None and _INPUT_REQUIRED in raw:
                    result = envelope.result_dict()
                    if result.get("resultType") == "input_required":
                        if self._rounds.input_required(request_id, modern, result):
                            if ended:
                                self.ports.calls_changed(self, -1)
                            return
                        self._rounds.continues(result.get("requestState"))
                self._answer(request_id, raw)
                if ended:  # after the answer left: the count is for `peers`, not on the host's path
                    self.ports.calls_changed(self, -1)
                return
        kind = envelope.kind
        if kind == "request" and envelope.method == "elicitation/create":
            self._elicit(envelope, raw)
            return
        elif kind == "notification" and envelope.method == "notifications/cancelled":
            if not self._server_cancelled(envelope):
                return
        elif kind == "notification" and envelope.method == "notifications/progress" \
                and self.progress is not None and self.progress.spoken:
            raw = self.progress.passing(envelope.params_dict(), raw)  # values go on from main's own
        elif kind == "notification" and envelope.method == "notifications/elicitation/complete":
            elicitation_id = envelope.params_dict().get("elicitationId")
            if isinstance(elicitation_id, str):
                self.ports.elicitation_complete(self, elicitation_id)
        self.ports.to_host(self, raw)

    def _elicit(self, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        request_id = envelope.id
        assert isinstance(request_id, (int, str))
        params = envelope.params_dict()
        params.setdefault("mode", "form")
        read = read_elicitation(self.server.name, params)
        decided = self.ports.decide(self, read, HostModes(self.host_form, self.host_url))
        if isinstance(decided, Refused):
            self.to_server(jsonrpc.error_response(request_id, decided.error.code, decided.error.message), None)
            return
        if isinstance(decided, Answered):
            assert isinstance(read, Elicitation)
            self.ports.record(self, read, decided, lambda: self._windows_answered(request_id, decided.result))
            return
        if not decided.to_windows:
            recorded = self.ports.record_for_host(self, read) if isinstance(read, Elicitation) else None
            self._host_asked[request_id] = _HostAsked(recorded, first=False)
            if recorded is not None:
                self._host_cancels.asked(request_id, frozenset(self._calls))
            self.ports.to_host(self, raw)
            return
        assert isinstance(read, Elicitation)  # (refused otherwise)
        try:
            pending = self.ports.ask_windows(self, read, lambda answer: self._windows_answered(request_id, answer))
        except UndeliverableRequestError as exc:
            self.to_server(jsonrpc.error_response(request_id, RpcCode.INVALID_PARAMS, f"request not shown: {exc}"),
                           None)
            return
        self._windows[request_id] = pending
        self._host_cancels.asked(request_id, frozenset(self._calls))
        if self._waiting is not None:  # progress to the host's calls while the card waits
            self._waiting.card_opened()
        if decided.to_host:
            self._host_asked[request_id] = _HostAsked(pending, first=True)
            self.ports.to_host(self, raw)

    def _server_cancelled(self, envelope: jsonrpc.Envelope) -> bool:
        """The server withdrew one of its requests (its tool call was cancelled): its card goes too,
        as "host-gone" when a host's cancel of a call at this server explains it (host_cancels.py).
        False: only the windows had it, so the host is not told."""
        request_id = envelope.params_dict().get("requestId")
        if not isinstance(request_id, (int, str)):
            return True
        if request_id in self._withdrawn:
            del self._withdrawn[request_id]
            return False  # its card went when the host stopped waiting; the host never saw it
        reason: Unanswered = "host-gone" if self._host_cancels.withdrawn(request_id) else "cancelled"
        pending = self._windows.pop(request_id, None)
        if pending is not None:
            self.ports.withdraw(pending, reason)
        asked = self._host_asked.pop(request_id, None)
        if asked is not None and asked.pending is not None and asked.pending is not pending:
            self.ports.withdraw(asked.pending, reason)  # the audit row of a request the host had
        return pending is None or asked is not None

    def _windows_answered(self, request_id: jsonrpc.Id, answer: ElicitationResult) -> None:
        self._windows.pop(request_id, None)
        self._host_cancels.forget(request_id)
        if self.closed:
            return
        self.to_server(jsonrpc.response(request_id, result_json(answer)), None)
        if self._host_asked.pop(request_id, None) is not None:
            self._answered_first.add(request_id)
            self.ports.to_host(self, jsonrpc.notification("notifications/cancelled", {
                "requestId": request_id, "reason": _CANCELLED_REASON}))

    def _call_cancelled(self, request_id: jsonrpc.Id) -> list[jsonrpc.Id]:
        """The host cancelled a call at the server: it is no longer in flight. The server never
        answers it (MCP: no response to a cancelled request), so its answer cannot end the count;
        one that comes anyway still reaches the host, which ignores it. Returns the server's open
        requests that are the host's for certain: every one when it was the only call in flight,
        else those the server made while only calls the host has cancelled were at it (the rest
        wait for the server's own cancel, which host_cancels.py attributes)."""
        if request_id not in self._calls:
            return []
        only = len(self._calls) == 1
        self._calls.discard(request_id)
        self._modern.pop(request_id, None)
        self._ended(request_id)
        self.ports.calls_changed(self, -1)
        certain = self._host_cancels.call_cancelled(request_id)
        return list(self._windows) if only else certain

    def _host_stopped_waiting(self, request_ids: list[jsonrpc.Id]) -> None:
        """The host cancelled the call these cards are for: they close saying so rather than wait
        for the server (which may never withdraw them). The server's own cancel of one later is
        then not passed to the host, which never saw it."""
        for request_id in request_ids:
            pending = self._windows.get(request_id)
            if pending is None or request_id in self._host_asked:
                continue  # the host has it too ("first"): its own answer or the server's cancel ends it
            self._withdrawn[request_id] = None
            if len(self._withdrawn) > _MAX_WITHDRAWN:
                self._withdrawn.pop(next(iter(self._withdrawn)))
            self.ports.withdraw(pending, "host-gone")

    # ---- the end ---------------------------------------------------------------------

    def close(self, reason: Unanswered = "host-gone") -> None:
        """The session ended: what waits on it is withdrawn (`reason`: the host left, or the server
        did: "server-closed"); the host's held calls are dropped."""
        if self.closed:
            return
        self.closed = True
        if self._waiting is not None:
            self._waiting.close()
        if self.tasks is not None:
            self.tasks.close()
        for cancel in self._held.values():
            if cancel is not None:
                cancel()
        self._held.clear()
        open_cards = [*self._windows.values(), *(a.pending for a in self._host_asked.values() if a.pending)]
        open_cards += self._rounds.open_cards()
        for pending in open_cards:
            self.ports.withdraw(pending, reason)
        self._windows.clear()
        self._host_asked.clear()
        self._host_cancels.clear()
        self._rounds.clear()
        self._modern.clear()
        if self._calls:
            self.ports.calls_changed(self, -len(self._calls))
            self._calls.clear()


class _RoundsSide:
    """RoundsSession over one session: its ports with the session given, and its calls in flight."""

    def __init__(self, session: RelaySession) -> None:
        self._session = session

    @property
    def closed(self) -> bool:
        return self._session.closed

    def decide(self, read: Read, host: HostModes) -> Decision:
        return self._session.ports.decide(self._session, read, host)

    def record(self, elicitation: Elicitation, answered: Answered, then: Callable[[], None]) -> None:
        self._session.ports.record(self._session, elicitation, answered, then)

    def ask_windows(self, elicitation: Elicitation, resolve: Callable[[ElicitationResult], None]) -> PendingRequest:
        return self._session.ports.ask_windows(self._session, elicitation, resolve)

    def record_for_host(self, elicitation: Elicitation) -> PendingRequest | None:
        return self._session.ports.record_for_host(self._session, elicitation)

    def answered_by_host(self, pending: PendingRequest, answer: ElicitationResult) -> None:
        self._session.ports.answered_by_host(self._session, pending, answer)

    def withdraw(self, pending: PendingRequest, reason: Unanswered) -> None:
        self._session.ports.withdraw(pending, reason)

    def to_host(self, raw: bytes) -> None:
        self._session.ports.to_host(self._session, raw)

    def card_opened(self) -> None:
        if self._session._waiting is not None:  # progress to the host's calls while the card waits
            self._session._waiting.card_opened()

    def call_started(self, request_id: jsonrpc.Id) -> None:
        session = self._session
        if request_id not in session._calls:
            session._calls.add(request_id)
            session.ports.calls_changed(session, +1)

    def forget_call(self, request_id: jsonrpc.Id) -> None:
        session = self._session
        session._modern.pop(request_id, None)
        if request_id in session._calls:
            session._calls.discard(request_id)
            session._ended(request_id)
            session.ports.calls_changed(session, -1)

    def forward(self, request_id: jsonrpc.Id, request: ModernRequest) -> None:
        session = self._session
        session._modern[request_id] = request
        if request.method == "tools/call":
            self.call_started(request_id)
        session.to_server(jsonrpc.request(request_id, request.method, request.params), request.headers)


_RAW_OBJECT: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])  # one level of an object, values unread


_UNREADABLE_LOGGED: Final = 20  # per session and side: a peer that sends nothing else must not flood the log


def _log_unreadable(session: "RelaySession", side: str, why: str) -> None:
    session.unreadable += 1
    if session.unreadable <= _UNREADABLE_LOGGED:
        logger.warning("%s's session %s with %s: refused a message from the %s that is not strict JSON-RPC: %s%s",
                       session.peer.name, session.name, session.server.name, side, why,
                       " (no more such lines for this session)" if session.unreadable == _UNREADABLE_LOGGED else "")


def _declared(meta: bytes) -> _Declared | None:
    """A 2026-07-28 `_meta` with elicitation declared; None when it names no protocol."""
    decoded = _decode_object(meta)
    if decoded is None or _PROTOCOL_KEY not in decoded:
        return None
    capabilities = decoded.get(_CAPABILITIES_KEY)
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    tasks = isinstance(extensions, dict) and TASKS_EXTENSION in extensions
    form, url = _declare_elicitation(decoded, _CAPABILITIES_KEY)
    return _Declared(msgspec.Raw(jsonrpc.encode(decoded)), decoded.get(_CLIENT_INFO_KEY), form, url, tasks)


def _declare_tasks(raw: bytes, *, modern: bool) -> bytes:
    """The server's `initialize` (2025-11-25's `tasks`) or `server/discover` result (2026-07-28's
    extension) with main's tasks declared: main holds the hosts' tasks, whatever the server does."""
    try:
        message = jsonrpc.strict_object(raw)
    except (msgspec.DecodeError, RecursionError):
        return raw
    result = message.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("capabilities", {}), dict):
        return raw
    capabilities = result.setdefault("capabilities", {})
    if not modern:
        capabilities["tasks"] = TASK_CAPABILITY
        return jsonrpc.encode(message)
    extensions = capabilities.get("extensions")
    if not isinstance(extensions, dict):
        extensions = capabilities["extensions"] = {}
    extensions[TASKS_EXTENSION] = {}
    return jsonrpc.encode(message)


def _decode_object(raw: bytes) -> dict[str, Any] | None:
    try:
        message = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def _declare_elicitation(holder: dict[str, Any], key: str) -> tuple[bool, bool]:
    """Make the capabilities at `holder[key]` declare elicitation in both modes; returns the
    (form, url) the host itself declared there."""
    capabilities = holder.get(key)
    if not isinstance(capabilities, dict):
        capabilities = holder[key] = {}
    declared = capabilities.get("elicitation")
    if isinstance(declared, dict):
        capabilities["elicitation"] = {**declared, **_ELICITATION_CAPABILITY}
        # An empty object is form mode (the 2025-06-18 shape).
        return "form" in declared or not declared, "url" in declared
    capabilities["elicitation"] = dict(_ELICITATION_CAPABILITY)
    return False, False


class RelayBrokerPorts(Protocol):
    """The ports `Relay` is made with (the broker's RelaySide): not to be confused with an MCP
    host, the program on the other end of a session (`HostSide`)."""

    @property
    def pending(self) -> PendingRequests: ...

    @property
    def gate(self) -> ElicitationGate: ...

    def send_to_peer(self, routing_id: bytes, frames: list[bytes], *, held_when_full: bool = False) -> bool: ...

    def peer_by_routing_id(self, routing_id: bytes) -> Peer | None: ...

    def peers_changed(self) -> None: ...

    def publish_complete(self, server: str, elicitation_id: str) -> None: ...

    def name_host(self, peer: Peer, name: str) -> None: ...


class HostSide(Protocol):
    """Where one session's messages for its host go."""

    ends_with_peer: bool  # the session ends when its peer goes away (else when its pipes close)

    def message(self, raw: bytes) -> None: ...

    def closed(self, why: str) -> None:
        """main ended the session (the server's process ended, main stops, it was refused)."""

    def hold_input(self, held: bool) -> None:
        """The server reads slower than the host writes: read nothing more of the host (True) until
        it catches up (False). A host side that cannot hold its input ignores it (the server's
        connection ends past upstream.TO_SERVER_MAX_BYTES)."""


class _BrokerSide:
    """A peer's session over the broker: `msgMcpRelay` and `msgMcpClose`.

    Backpressure: when the peer's ZeroMQ queue is full (it reads slower than the server writes),
    the messages are held here, in order, the server's output is paused (`full`), and they are sent
    again every RETRY_FULL_S until the queue takes them all; then the server is read again. What is
    held is at most what the server's last read brought."""

    ends_with_peer = True

    def __init__(self, ports: RelayBrokerPorts, routing_id: bytes, name: str, full: Callable[[bool], None]) -> None:
        self._ports = ports
        self._routing_id = routing_id
        self._name = name
        self._full = full
        self._held: list[list[bytes]] = []
        self._retry: asyncio.TimerHandle | None = None
        self.ended = False

    def message(self, raw: bytes) -> None:
        self._send(encode(channels.MCP_RELAY, McpRelay(session=self._name, message=raw)))

    def closed(self, why: str) -> None:
        self._send(encode(channels.MCP_CLOSE, McpClose(session=self._name, reason=why)))

    def hold_input(self, held: bool) -> None:
        pass  # a peer's messages come on main's one socket: nothing of one peer can be left unread

    def _send(self, frames: list[bytes]) -> None:
        if self._held or not self._ports.send_to_peer(self._routing_id, frames, held_when_full=True):
            if self.ended or self._ports.peer_by_routing_id(self._routing_id) is None:
                return  # the peer is gone: its session ends with it
            self._held.append(frames)
            if self._retry is None:
                self._full(True)
                self._retry = asyncio.get_running_loop().call_later(RETRY_FULL_S, self._send_held)

    def _send_held(self) -> None:
        self._retry = None
        if self.ended:
            self._held.clear()
            return
        while self._held and self._ports.send_to_peer(self._routing_id, self._held[0], held_when_full=True):
            del self._held[0]
        if not self._held:
            self._full(False)
        elif self._ports.peer_by_routing_id(self._routing_id) is None:
            self._held.clear()
        else:
            self._retry = asyncio.get_running_loop().call_later(RETRY_FULL_S, self._send_held)

    def end(self) -> None:
        self.ended = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self._held.clear()


@dataclass(eq=False)
class _Open:
    session: RelaySession
    host: HostSide
    upstream: StdioUpstream | HttpUpstream | None = None
    backlog: list[tuple[bytes, Headers]] = field(default_factory=list)  # from the host while the server starts
    starting: asyncio.Task[None] | None = None
    host_full: bool = False  # the host reads slower than the server writes: the server's output waits

    def flow(self, full: bool) -> None:
        self.host_full = full
        if self.upstream is not None:
            if full:
                self.upstream.pause_reading()
            else:
                self.upstream.resume_reading()


class Relay:
    """Every relayed session, by (peer routing id, session name)."""

    def __init__(self, ports: RelayBrokerPorts, servers: Callable[[str], ManagedServer | None],
                 approval: "ToolApproval | None", server_infos: Callable[[], list[ServerInfo]] = list,
                 waits: LongWaits | None = None) -> None:
        """`approval`: the consent layer's tool-call approval (None: main runs without rules);
        `server_infos`: the servers as `servers` lists them (the merged sessions' members); `waits`:
        progress and the retry path for calls waiting on a card longer than their host waits."""
        self._ports = ports
        self._servers = servers
        self._approval = approval
        self._waits = waits
        self._sessions: dict[tuple[bytes, str], _Open] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._stopping = False  # main is stopping: nobody left, the open cards are just cancelled

        # every server at once (`server` EVERY_SERVER): merged in main, one session here per server
        self.merged = MergedRelays(self, server_infos)

    def __len__(self) -> int:
        return len(self._sessions)

    # ---- from the broker -------------------------------------------------------------

    def from_peer(self, peer: Peer, body: McpRelay) -> None:
        if body.server == EVERY_SERVER:
            self.merged.from_peer(peer, body)
            return

        key = (peer.routing_id, body.session)
        opened = self._sessions.get(key)
        if opened is None:
            side = _BrokerSide(self._ports, peer.routing_id, body.session, lambda full: self._flow(side, full))
            opened = self._open(peer, body.session, body.server, body.message, side)
            if opened is None:
                side.end()
                return
        if opened.upstream is None:
            opened.backlog.append((body.message, body.headers))
        else:
            opened.session.from_host(body.message, body.headers)

    def from_pipes(self, peer: Peer, session: str, server: str, raw: bytes, host: HostSide,
                   headers: Headers = None) -> None:
        """One message from a host whose pipes main holds (host_pipes.py), or of a merged session
        for one of its servers (merged_relay.py: `headers`, an HTTP host's)."""
        if server == EVERY_SERVER:
            self.merged.from_pipes(peer, session, raw, host)
            return

        opened = self._sessions.get((peer.routing_id, session))
        if opened is None:
            opened = self._open(peer, session, server, raw, host)
            if opened is None:
                return
        if opened.upstream is None:
            opened.backlog.append((raw, headers))
        else:
            opened.session.from_host(raw, headers)

    def broker_side(self, peer: Peer, session: str, full: Callable[[bool], None]) -> tuple[HostSide, Callable[[], None]]:
        """A host side over the broker for a session of `peer` (a merged one), and how to end it."""
        side = _BrokerSide(self._ports, peer.routing_id, session, full)
        return side, side.end

    def host_full(self, peer: Peer, session: str, full: bool) -> None:
        """A host whose pipes main holds reads slower than its server writes (True), or caught up."""
        opened = self._sessions.get((peer.routing_id, session))
        if opened is not None:
            opened.flow(full)
        else:
            self.merged.host_full(peer, session, full)

    def _flow(self, host: HostSide, full: bool) -> None:
        for opened in self._sessions.values():
            if opened.host is host:
                opened.flow(full)
                return

    def end_pipes(self, peer: Peer, session: str, why: str) -> None:
        """The host's pipes closed, or serve went away."""
        opened = self._sessions.get((peer.routing_id, session))
        if opened is not None:
            self._end(opened, why, tell_host=False)
        else:
            self.merged.end(peer, session, why)

    def close_from_peer(self, peer: Peer, body: McpClose) -> None:
        opened = self._sessions.get((peer.routing_id, body.session))
        if opened is not None:
            self._end(opened, "the host closed it", tell_host=False)
        else:
            self.merged.close_from_peer(peer, body)

    def peer_gone(self, routing_id: bytes) -> None:
        self.merged.peer_gone(routing_id)
        for key, opened in list(self._sessions.items()):
            if key[0] == routing_id and opened.host.ends_with_peer:
                self._end(opened, "the host went away", tell_host=False)

    async def close(self) -> None:
        self._stopping = True
        self.merged.close("main is stopping")
        for opened in list(self._sessions.values()):
            self._end(opened, "main is stopping", tell_host=True)
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=10)

    # ---- opening ---------------------------------------------------------------------

    def _open(self, peer: Peer, name: str, server_name: str | None, first: bytes, host: HostSide) -> _Open | None:
        problem = self._refusal(peer, server_name)
        if problem is not None:
            code, why = problem
            envelope = jsonrpc.peek(first)
            if envelope.kind == "request":
                host.message(jsonrpc.error_response(envelope.id, code, why))  # type: ignore[arg-type]
            host.closed(why)
            logger.info("refused a relayed session of %r to %r: %s", peer.name, server_name, why)
            return None
        server = self._servers(server_name or "")
        assert server is not None
        waits = self._waits
        progress = None if waits is None else HostProgress(
            host.message, waits.clock, waits.settings.progress_every_s, waits.settings.waiting_message)
        make_tasks = None
        if waits is not None and self._approval is not None and self._approval.may_ask(server):
            settings, clock = waits.settings, waits.clock

            def make_tasks(cancel: Callable[[jsonrpc.Id], None]) -> HostTasks:
                return HostTasks(clock, settings.waiting_message, host.message, cancel,
                                 cap=settings.tasks_per_session, max_ttl_s=settings.task_ttl_s,
                                 after_s=settings.task_after_s)
        session = RelaySession(peer=peer, name=name, server=server, ports=_Ports(self, host), progress=progress,
                               make_tasks=make_tasks)
        opened = _Open(session, host)
        self._sessions[(peer.routing_id, name)] = opened
        opened.starting = asyncio.ensure_future(self._start(opened))
        return opened

    def _refusal(self, peer: Peer, server_name: str | None) -> tuple[int, str] | None:
        if server_name is None:
            return RpcCode.SERVER_ERROR, "this session is not open (its first message must name the server)"
        server = self._servers(server_name)
        if server is None:
            return RpcCode.INVALID_PARAMS, f"no server named {server_name!r} is configured in Elicitron"
        if peer.role != "host":
            return RpcCode.INVALID_REQUEST, "relayed sessions are for peers with role \"host\""
        if server.status == "stopped" and not server.running:
            return RpcCode.SERVER_ERROR, (f"server {server.name!r} is stopped in Elicitron; start it with "
                                          f"`elicitron server start {server.name}`")
        if len(self._sessions) >= MAX_SESSIONS:
            return RpcCode.SERVER_ERROR, f"Elicitron already relays {MAX_SESSIONS} host sessions; close some first"
        if sum(1 for key in self._sessions if key[0] == peer.routing_id) >= MAX_SESSIONS_PER_PEER:
            return RpcCode.SERVER_ERROR, f"this host already has {MAX_SESSIONS_PER_PEER} sessions open through Elicitron"
        return None

    async def _start(self, opened: _Open) -> None:
        session = opened.session
        server = session.server
        config = server.config
        events = _Events(self, opened)
        upstream: StdioUpstream | HttpUpstream
        try:
            if isinstance(config, HttpServerConfig):
                upstream = await HttpUpstream.start(
                    config, events, auth=server.sign_in.provider if server.sign_in else None)
            else:
                upstream = await StdioUpstream.start(config, server.stderr_log, events)
        except UpstreamError as exc:
            for raw, _ in opened.backlog:
                envelope = jsonrpc.peek(raw)
                if envelope.kind == "request":
                    opened.host.message(jsonrpc.error_response(envelope.id, RpcCode.SERVER_ERROR, str(exc)))  # type: ignore[arg-type]
            self._end(opened, str(exc), tell_host=True, cards="server-closed")
            return
        if session.closed:
            self._closing_task(upstream.close())
            return
        opened.upstream = upstream
        session.to_server = upstream.send
        if opened.host_full:
            upstream.pause_reading()
        logger.info("relaying %r's session %r with %s (%s)", session.peer.name, session.name, server.name,
                    upstream.url if isinstance(upstream, HttpUpstream) else f"pid {upstream.pid}")
        backlog, opened.backlog = opened.backlog, []
        for raw, headers in backlog:
            session.from_host(raw, headers)

    # ---- closing ---------------------------------------------------------------------

    def _end(self, opened: _Open, why: str, *, tell_host: bool, cards: Unanswered = "host-gone") -> None:
        """`cards`: how the session's open cards close (by default its host stopped waiting)."""
        session = opened.session
        key = (session.peer.routing_id, session.name)
        if self._sessions.get(key) is not opened:
            return
        del self._sessions[key]
        session.close("cancelled" if self._stopping else cards)
        if self._waits is not None:
            self._waits.session_ended(key)  # cards its calls were told to retry on: nobody will
        if isinstance(opened.host, _BrokerSide):
            opened.host.end()
        if opened.upstream is not None:
            self._closing_task(opened.upstream.close())
        elif opened.starting is not None and not opened.starting.done():
            pass  # _start sees `closed` and stops what it started
        if tell_host:
            opened.host.closed(why)
        logger.info("relayed session %r of %r with %s ended: %s", session.name, session.peer.name,
                    session.server.name, why)

    def _closing_task(self, task: "asyncio.Task[None]") -> None:
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


class _Events:
    """One session's server connection, as seen from the relay."""

    def __init__(self, relay: Relay, opened: _Open) -> None:
        self._relay = relay
        self._opened = opened
        # Every message of the server: straight to its session (which drops it once closed).
        self.on_message: Callable[[bytes], None] = opened.session.from_server

    def on_closed(self, why: str) -> None:
        self._relay._end(self._opened, f"server {self._opened.session.server.name!r}: {why}", tell_host=True,
                         cards="server-closed")

    def on_server_full(self, full: bool) -> None:
        self._opened.host.hold_input(full)


class _Ports:
    """RelayPorts over main: the session's host side, the consent layer, the lifecycle."""

    def __init__(self, relay: Relay, host: HostSide) -> None:
        self._relay = relay
        self._to_host = host.message  # every server message takes this path

    def to_host(self, session: RelaySession, raw: bytes) -> None:
        self._to_host(raw)

    def needs_decision(self, session: RelaySession) -> bool:
        approval = self._relay._approval
        return approval is not None and approval.needs_decision(session.server)

    def decide_call(self, session: RelaySession, tool: str, arguments: dict[str, Any], send_on: Callable[[], None],
                    reply: Callable[[ChannelReply], None], wait: HostWait | None) -> Cancel | None:
        approval = self._relay._approval
        if approval is None:
            send_on()
            return None
        return approval.call_in_relay(session.server, tool, arguments, session.peer, send_on, reply, wait)

    def decide(self, session: RelaySession, read: Read, host: HostModes) -> Decision:
        named = HostModes(host.form, host.url, session.peer.name or session.peer.window)  # the policies' principal
        return self._relay._ports.gate.decide(read, session.server, host=named)

    def record(self, session: RelaySession, elicitation: Elicitation, answered: Answered,
               then: Callable[[], None]) -> None:
        self._relay._ports.gate.record(elicitation, answered, _options(session), then)

    def ask_windows(self, session: RelaySession, elicitation: Elicitation,
                    resolve: Callable[[ElicitationResult], None]) -> PendingRequest:
        return self._relay._ports.pending.open(elicitation, _options(session), resolve)

    def record_for_host(self, session: RelaySession, elicitation: Elicitation) -> PendingRequest | None:
        server = session.server
        peer = session.peer
        try:
            return self._relay._ports.pending.open(
                elicitation,
                RequestOptions(timeout_s=server.config.elicitation_timeout_s, origin=peer.window,
                               max_bytes=server.config.max_request_bytes, via=peer.name or None,
                               record_only=True),
                lambda _answer: None)
        except UndeliverableRequestError as exc:
            logger.info("%s: a request for host %r is not audited: %s", server.name, peer.name, exc)
            return None

    def answered_by_host(self, session: RelaySession, pending: PendingRequest, answer: ElicitationResult) -> None:
        self._relay._ports.pending.answered_elsewhere(pending, answer, by=session.peer.window)

    def withdraw(self, pending: PendingRequest, reason: Unanswered) -> None:
        self._relay._ports.pending.withdraw(pending, reason)

    def calls_changed(self, session: RelaySession, delta: int) -> None:
        session.peer.calls = max(0, session.peer.calls + delta)
        self._relay._ports.peers_changed()

    def elicitation_complete(self, session: RelaySession, elicitation_id: str) -> None:
        self._relay._ports.publish_complete(session.server.name, elicitation_id)

    def note_host(self, session: RelaySession, client_info: Any) -> None:
        info = client_info if isinstance(client_info, dict) else {}
        name = info.get("title") or info.get("name")
        self._relay._ports.name_host(session.peer, str(name)[:MAX_ID_CHARS] if name else "MCP host")


def _options(session: RelaySession) -> RequestOptions:
    """A relayed session's request for the windows: its host's window as origin, its name as `via`."""
    server, peer = session.server, session.peer
    return RequestOptions(timeout_s=server.config.elicitation_timeout_s, origin=peer.window,
                          max_bytes=server.config.max_request_bytes, via=peer.name or None)
