"""ElicitationGate: the one place main decides what becomes of an elicitation, whatever asks it: a
server in main's own session with it (servers.py), a server in a host's relayed session (relay.py,
both eras), a program's question (questions.py).

    rules ──► route ──► screening ──► the windows (and/or the host)

1. **Rules** (consent.py): in a host's relayed session, a policy that forbids the server eliciting
   (action `elicit`, policy/hook.py) declines a form request; else a config rule or a remembered
   answer of that server's program (of that asker, for a question) answers it now, whatever the
   route: nothing opens, the answer is audited with the rule's or policy's id (`record`).
   URL-mode requests never get here answered.
2. **Route**, for a request in a host's relayed session: the server's `elicitationRoute` and what
   the host declared for the request's mode (params main cannot read go as a form would):
   "windows" (or a host that cannot answer it): the windows; "host": the host alone, as the server
   wrote it (no screening: the host and the server deal with it, as they would direct); "first":
   both. Every other source goes to the windows.
3. **Screening**, of what goes to the windows (the server's `screen_elicitation`): params main
   cannot read and schemas the windows cannot show are refused (the server gets the error);
   "Decline all from this server" declines; past the burst limit, cancel.

`decide` takes plain values and returns one of `Answered`, `Refused`, `Deliver`; the callers act on
it (open the request, answer the server). No sockets, no awaiting in here.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from main_process.consent.pending import Elicitation, PendingRequests, RequestOptions
from shared.elicit_params import ElicitParams, FormParams
from shared.errors import RpcCode, UndeliverableRequestError
from shared.messages import CallError, ElicitationResult

Read = Elicitation | UndeliverableRequestError  # a request's params as they entered main, or why not


class Rules(Protocol):
    """The consent layer's lookups (main_process/consent/consent.py)."""

    def answer_for(self, elicitation: Elicitation) -> tuple[str, ElicitationResult] | None:
        """(rule id, answer) for a server's form request, or None."""

    def answer_asker(self, asker: str, params: ElicitParams) -> tuple[str, ElicitationResult] | None:
        """(rule id, answer) for a program's form question, or None."""

    def policy_declines(self, server: str, host: str) -> tuple[str, str | None] | None:
        """(audit id, reason) of a policy forbidding `server` to elicit in `host`'s session, or None."""


class Routed(Protocol):
    @property
    def elicitation_route(self) -> str: ...


class Screened(Protocol):
    """The server a request comes from (servers.ManagedServer)."""

    @property
    def config(self) -> Routed: ...

    def screen_elicitation(self, params: ElicitParams) -> ElicitationResult | CallError | None: ...


@dataclass(frozen=True, slots=True)
class HostModes:
    """The elicitation modes the host of a relayed session declared it answers itself."""

    form: bool
    url: bool
    name: str | None = None  # the host's name (its clientInfo's; else its window): the policies' principal


@dataclass(frozen=True, slots=True)
class Answered:
    """Answered now, before anything opens: by a rule or a policy (`rule`, audited with its id and
    `reason`) or the screening."""

    result: ElicitationResult
    rule: str | None = None
    reason: str | None = None  # a policy's @reason


@dataclass(frozen=True, slots=True)
class Refused:
    """Not shown to anyone: the server gets this error."""

    error: CallError


@dataclass(frozen=True, slots=True)
class Deliver:
    to_host: bool  # the host of the relayed session gets the server's own request
    to_windows: bool  # a request opens for the windows


Decision = Answered | Refused | Deliver
_WINDOWS = Deliver(to_host=False, to_windows=True)
_HOST = Deliver(to_host=True, to_windows=False)
_BOTH = Deliver(to_host=True, to_windows=True)


class ElicitationGate:
    def __init__(self, pending: PendingRequests, rules: Rules | None = None) -> None:
        self._pending = pending
        self.rules = rules  # main's consent layer (None: no rule answers)

    def decide(self, read: Read, server: Screened | None = None, *, host: HostModes | None = None,
               asker: str | None = None) -> Decision:
        """`decide` below, with main's rules."""
        return decide(self.rules, read, server, host=host, asker=asker)

    def record(self, elicitation: Elicitation, answered: Answered, options: RequestOptions,
               then: Callable[[], None]) -> None:
        """Hand on an answer `decide` gave: a rule's is audited first (its row committed, with the
        rule's id), then `then` runs; the screening's is not audited (as before it opened)."""
        if answered.rule is None:
            then()
            return
        self._pending.decided.record_by_rule(elicitation, answered.result, answered.rule, options, then,
                                     reason=answered.reason)


def decide(rules: Rules | None, read: Read, server: Screened | None = None, *, host: HostModes | None = None,
           asker: str | None = None) -> Decision:
    """Rules, then the route, then the screening. `server`: the server that asks (None for a
    question); `host`: the modes the host of its relayed session declared (None: main's own
    session, or a question); `asker`: a question's asker, whose rules alone answer it."""
    if rules is not None and isinstance(read, Elicitation) and isinstance(read.params, FormParams):
        declined = rules.policy_declines(read.server, host.name) if host is not None and host.name else None
        if declined is not None:
            return Answered(ElicitationResult(action="decline"), rule=declined[0], reason=declined[1])
        ruled = rules.answer_asker(asker, read.params) if asker is not None else rules.answer_for(read)
        if ruled is not None:
            return Answered(ruled[1], rule=ruled[0])
    delivery = _WINDOWS if host is None or server is None else route(server.config.elicitation_route, read, host)
    if not delivery.to_windows:
        return delivery
    if not isinstance(read, Elicitation):
        return Refused(CallError(code=RpcCode.INVALID_PARAMS, message=f"request not shown: {read}"))
    screened = server.screen_elicitation(read.params) if server is not None else None
    if isinstance(screened, CallError):
        return Refused(screened)
    if screened is not None:
        return Answered(screened)
    return delivery


def route(elicitation_route: str, read: Read, host: HostModes) -> Deliver:
    """Where a relayed session's request goes, by the server's elicitationRoute and the host's modes."""
    url = isinstance(read, Elicitation) and read.params.mode == "url"
    if not (host.url if url else host.form) or elicitation_route == "windows":
        return _WINDOWS
    return _BOTH if elicitation_route == "first" else _HOST
