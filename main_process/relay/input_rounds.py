"""A relayed session's input rounds (2026-07-28): the server answers a request with `input_required`
(its `InputRequiredResult`: `inputRequests` by key, perhaps a `requestState`) and the host retries
the request with `inputResponses`.

Each elicitation of a round is decided by the gate like any other: the windows answer those routed
to them, the host the rest, keyed as the server keyed them. When every input is the windows', main
retries the request itself under the host's own id and the host just waits on it; otherwise the
host gets a round with only its own keys, and its retry is held here until the windows' answers are
in, then goes on with both. A retry with a requestState the host got continues a call that was
decided already: it is not asked about again.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import Any, Final, Protocol

from main_process.consent.elicitation_gate import Answered, Decision, Deliver, HostModes, Read, Refused
from main_process.consent.pending import Elicitation, PendingRequest, Unanswered
from shared import jsonrpc
from shared.errors import UndeliverableRequestError
from shared.messages import ElicitationResult

MAX_CONTINUATIONS: Final = 1000  # requestStates remembered per session as continuing a decided call
Headers = dict[str, str] | None  # the host's HTTP routing headers for a message (for a server over HTTP)


@dataclass(eq=False)
class ModernRequest:
    """A 2026-07-28 request on its way: what it asked and what the host declared with it."""

    method: str
    given: dict[str, Any] | bytes  # its params, or the request as sent on (read only if asked: rarely)
    host_form: bool
    host_url: bool
    headers: Headers = None  # the host's HTTP routing headers, which a retry carries too
    host_tasks: bool = False  # the host declared the tasks extension: a long wait may become a task

    @property
    def params(self) -> dict[str, Any]:
        """Raises msgspec.DecodeError when the request is not strict JSON (checked before any of
        it is passed on)."""
        if isinstance(self.given, bytes):
            params = jsonrpc.strict_object(self.given).get("params")
            self.given = params if isinstance(params, dict) else {}
        return self.given


class RoundsSession(Protocol):
    """What the rounds need of their session and, through it, of main (relay.py binds one session)."""

    @property
    def closed(self) -> bool: ...

    def decide(self, read: Read, host: HostModes) -> Decision: ...

    def record(self, elicitation: Elicitation, answered: Answered, then: Callable[[], None]) -> None: ...

    def ask_windows(self, elicitation: Elicitation, resolve: Callable[[ElicitationResult], None]) -> PendingRequest:
        """Raises UndeliverableRequestError when it cannot be shown."""

    def record_for_host(self, elicitation: Elicitation) -> PendingRequest | None: ...

    def answered_by_host(self, pending: PendingRequest, answer: ElicitationResult) -> None: ...

    def withdraw(self, pending: PendingRequest, reason: Unanswered) -> None: ...

    def to_host(self, raw: bytes) -> None: ...

    def card_opened(self) -> None:
        """A card opened: the host's calls hear main's progress while it waits."""

    def call_started(self, request_id: jsonrpc.Id) -> None:
        """The host waits on this tools/call at the server (counted once)."""

    def forget_call(self, request_id: jsonrpc.Id) -> None:
        """The host cancelled a request main held for the windows: no longer in flight."""

    def forward(self, request_id: jsonrpc.Id, request: ModernRequest) -> None:
        """To the server, as a 2026-07-28 request whose answer comes back through the session."""


@dataclass(eq=False)
class _Round:
    """A 2026-07-28 request the server answered with `input_required`: the input requests the
    windows answer (the host answers the others when it retries), until the request goes on."""

    request_id: jsonrpc.Id
    request: ModernRequest
    state: Any  # the server's requestState (None: it gave none)
    windows: dict[str, PendingRequest | None] = field(default_factory=dict)  # key -> open card (None: ruled)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> the windows' answer
    host_keys: set[str] = field(default_factory=set)
    host_audit: dict[str, PendingRequest] = field(default_factory=dict)  # "host"/"first" keys' audit rows
    retry: tuple[jsonrpc.Id, dict[str, Any], Headers] | None = None  # the host's retry, held for the windows
    building: bool = True  # a rule may answer while the round is being set up: go on only after
    cancelled: bool = False  # the host cancelled the request main holds for the windows

    @property
    def complete(self) -> bool:
        return all(key in self.answers for key in self.windows)


class InputRounds:
    """One relayed session's open input rounds, by the requestState the host got. No I/O."""

    def __init__(self, session: RoundsSession, *, name: str, server: str) -> None:
        """`name`: the session's (in the requestStates main makes up); `server`: its server's name."""
        self._session = session
        self._name = name
        self._server = server
        self._rounds: dict[str, _Round] = {}
        self._tokens = count()
        self._continuations: dict[str, None] = {}  # requestStates the host got (bounded)

    def cards_open(self) -> bool:
        return any(pending is not None for round_ in self._rounds.values() for pending in round_.windows.values())

    def is_continuation(self, state: Any) -> bool:
        """A retry with this requestState continues a call that was decided already."""
        return isinstance(state, str) and state in self._continuations

    def continues(self, state: Any) -> None:
        """The host got this requestState: its retry continues a call already decided."""
        if isinstance(state, str):
            self._continuations[state] = None
            if len(self._continuations) > MAX_CONTINUATIONS:
                self._continuations.pop(next(iter(self._continuations)))

    def input_required(self, request_id: jsonrpc.Id, request: ModernRequest, result: dict[str, Any]) -> bool:
        """The server needs input to go on: the windows answer the elicitations routed to them;
        the rest goes to the host, keyed as the server keyed it. False: nothing here is ours (the
        result goes to the host as it is)."""
        requests = result.get("inputRequests")
        if not isinstance(requests, dict):
            return False
        session = self._session
        round_ = _Round(request_id, request, result.get("requestState"))
        for key, asked in requests.items():
            params = asked.get("params") if isinstance(asked, dict) else None
            if not isinstance(asked, dict) or asked.get("method") != "elicitation/create" \
                    or not isinstance(params, dict):
                round_.host_keys.add(key)
                continue
            read = read_elicitation(self._server, {"mode": "form", **params})
            decided = session.decide(read, HostModes(request.host_form, request.host_url))
            if isinstance(decided, Deliver) and decided.to_host:
                round_.host_keys.add(key)
            if isinstance(decided, Deliver) and not decided.to_windows:
                recorded = session.record_for_host(read) if isinstance(read, Elicitation) else None
                if recorded is not None:
                    round_.host_audit[key] = recorded
                continue
            self._ask(round_, key, read, decided)
        round_.building = False
        if not round_.windows and not round_.host_audit:
            return False
        if not round_.host_keys:
            self._rounds[f"main-{next(self._tokens)}"] = round_
            if request.method == "tools/call":  # the host still waits on it
                session.call_started(request_id)
            if round_.complete:
                self._retry_ourselves(round_)
            return True
        token = round_.state if isinstance(round_.state, str) else f"elicitron-{self._name}-{next(self._tokens)}"
        self._rounds[token] = round_
        self.continues(token)
        to_host_result = {**result, "inputRequests": {key: requests[key] for key in round_.host_keys},
                          "requestState": token}
        session.to_host(jsonrpc.response(request_id, to_host_result))
        return True

    def resume(self, request_id: jsonrpc.Id, request: ModernRequest) -> bool:
        """The host's retry of a request with a round here: the windows' answers join its own
        (held until they are all in). False: not a round of ours."""
        if not self._rounds:
            return False  # the common case: no round open, and the params need not be read
        token = request.params.get("requestState")
        round_ = self._rounds.get(token) if isinstance(token, str) else None
        if round_ is None:
            return False
        responses = request.params.get("inputResponses")
        host_answers = responses if isinstance(responses, dict) else {}
        for key, pending in round_.host_audit.items():
            answer = host_answers.get(key)
            if isinstance(answer, dict) and key not in round_.answers:
                self._session.answered_by_host(pending, elicit_result(answer))
                round_.answers[key] = answer  # the host was first (elicitationRoute "first")
        params = dict(request.params)
        if round_.complete:
            self._forget(round_)
            self._send_retry(round_, request_id, params, request.headers)
        else:
            round_.retry = (request_id, params, request.headers)  # the windows' answers are still to come
        return True

    def cancel(self, request_id: jsonrpc.Id) -> None:
        """The host cancelled a request main holds while the windows answer its round: the cards go."""
        for token, round_ in list(self._rounds.items()):
            if round_.request_id == request_id and not round_.host_keys:
                del self._rounds[token]
                round_.cancelled = True
                for pending in [*(p for p in round_.windows.values() if p is not None), *round_.host_audit.values()]:
                    self._session.withdraw(pending, "host-gone")
                self._session.forget_call(request_id)

    def open_cards(self) -> list[PendingRequest]:
        """The cards and audit rows of every open round (the session is closing)."""
        cards: list[PendingRequest] = []
        for round_ in self._rounds.values():
            cards += [p for p in round_.windows.values() if p is not None]
            cards += list(round_.host_audit.values())
        return cards

    def clear(self) -> None:
        self._rounds.clear()

    def _ask(self, round_: _Round, key: str, read: Read, decided: Decision) -> None:
        if isinstance(decided, Refused):  # as one the windows cannot be sent
            round_.windows[key] = None
            round_.answers[key] = {"action": "cancel"}
            return

        def resolve(answer: ElicitationResult) -> None:
            round_.answers[key] = result_json(answer)
            round_.windows[key] = None
            if not self._session.closed and not round_.building and not round_.cancelled and round_.complete:
                self._complete(round_)

        round_.windows[key] = None
        assert isinstance(read, Elicitation)  # (refused otherwise)
        if isinstance(decided, Answered):  # a rule's (audited first) or the screening's
            self._session.record(read, decided, lambda: resolve(decided.result))
            return
        try:
            pending = self._session.ask_windows(read, resolve)
        except UndeliverableRequestError:
            round_.answers[key] = {"action": "cancel"}
            return
        round_.windows[key] = pending
        self._session.card_opened()
        if decided.to_host:
            round_.host_audit[key] = pending

    def _complete(self, round_: _Round) -> None:
        if not round_.host_keys:
            self._retry_ourselves(round_)
        elif round_.retry is not None:
            request_id, params, headers = round_.retry
            round_.retry = None
            self._forget(round_)
            self._send_retry(round_, request_id, params, headers)

    def _forget(self, round_: _Round) -> None:
        for token, known in list(self._rounds.items()):
            if known is round_:
                del self._rounds[token]

    def _retry_ourselves(self, round_: _Round) -> None:
        """Every input was the windows': main sends the request again itself, with their answers
        (and the server's requestState), under the host's own id; the host waits on that id."""
        self._forget(round_)
        params = {**round_.request.params, "inputResponses": dict(round_.answers)}
        if round_.state is not None:
            params["requestState"] = round_.state
        else:
            params.pop("requestState", None)
        self._forward(round_.request_id, round_.request, params, round_.request.headers)

    def _send_retry(self, round_: _Round, request_id: jsonrpc.Id, params: dict[str, Any], headers: Headers) -> None:
        responses = params.get("inputResponses")
        merged = {**(responses if isinstance(responses, dict) else {}), **round_.answers}
        params = {**params, "inputResponses": merged}
        if round_.state is None:
            params.pop("requestState", None)
        else:
            params["requestState"] = round_.state
        self._forward(request_id, ModernRequest(round_.request.method, params, round_.request.host_form,
                                                round_.request.host_url), params, headers)

    def _forward(self, request_id: jsonrpc.Id, request: ModernRequest, params: dict[str, Any],
                 headers: Headers) -> None:
        if self._session.closed:
            return
        self._session.forward(request_id, ModernRequest(request.method, params, request.host_form, request.host_url,
                                                        headers))


def read_elicitation(server: str, params: dict[str, Any]) -> Read:
    """A server's elicitation params read once, as they enter main (`mode` set), or why not."""
    try:
        return Elicitation.read(server, params)
    except UndeliverableRequestError as exc:
        return exc


def result_json(result: ElicitationResult) -> dict[str, Any]:
    """An elicitation's answer as the server gets it."""
    answer: dict[str, Any] = {"action": result.action}
    if result.action == "accept" and result.content is not None:
        answer["content"] = result.content
    return answer


def elicit_result(result: dict[str, Any]) -> ElicitationResult:
    """A host's answer to an elicitation, for the audit (anything else counts as cancel)."""
    action = result.get("action")
    if action not in ("accept", "decline", "cancel"):
        return ElicitationResult(action="cancel")
    content = result.get("content")
    return ElicitationResult(action=action, content=content if isinstance(content, dict) else None)
