"""The life of every request a window must answer, from open to closed. No sockets in here.

    open ──► delivered ──► answered      (a window's accept / decline / cancel)
                      ├──► expired       (nobody answered in time; the asker gets cancel)
                      ├──► cancelled     (the asker withdrew it, or went away)
                      ├──► host-gone     (the MCP host whose call it is for stopped waiting)
                      └──► server-closed (the server's connection ended)

A request is encoded and size-checked *before* it opens (`open` raises
UndeliverableRequestError), so nothing that cannot reach a window ever waits as pending, and a
welcome built from pending requests cannot fail. Every ending goes through one close path
(`_close`): dismiss it in every window it was sent to, commit its outcome to the audit log, then
hand the asker its answer. Kinds of request (a server's elicitation, later a tool-call approval or
a program's question) differ only in who asks and what `resolve` does with the answer.

The broker's attachments.py implements `Outbox`; tests drive this class with a list.

Rules answer before any window, in the gate (elicitation_gate.py): a request a rule answers never
opens here, it is only audited with the rule's id (`DecidedRows.record_by_rule`); `close_by_rule` answers an
open one when a new rule covers it. After each window's answer the consent layer (`rules`, a
`RuleHook`, given at construction when main has one) sees it (to remember it, or to keep an
approval's "allow for this session"). An approval under a config rule's quorum (`invoke.quorum`)
counts its approvers' allows (consent/quorum.py) and is sent again with the count until a deny or the
last approval needed decides it. `opened`, when main has `notify` receivers, hears of every
request that opened and whether a window got it.

On a store many mains share (PostgreSQL), `shared` (consent/shared_requests.py) is set: this
main's requests are published to the others, a window's answer becomes a claim that the store
decides in one transaction before anyone hears of it (for this main's own requests too, else two
mains' windows could both win), and other mains' requests are shown here as copies (`held_by`
names their machine) that only the store's truth closes. This main's request answered on another
main is dismissed in its windows as soon as the store says so (`dismiss_answered`), and closes
once the values are read (`answered_in_store`). A quorum approval's answers are counted
by the store (`vote`), so approvers on every main add up, and the count it reads back is shown here
(`recount_from_store`). Without it (SQLite) nothing here changes.
"""

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

import msgspec

from main_process.clock import MONOTONIC, Clock, Timer
from main_process.consent import quorum as quorums
from main_process.consent.audit_writer import AuditWriter
from main_process.consent.row_ids import RowIds
from main_process.oauth.hosts import allowance
from main_process.store.records import Approver, Claim, OutcomeRecord, QuorumVote
from shared import channels
from shared.codec import decode_peer_body, encode, encode_request
from shared.denial_reason import clean_reason
from shared.elicit_params import ElicitParams, FormParams, read_params
from shared.errors import InvalidContentError, ProtocolError, UndeliverableRequestError, WireCode
from shared.messages import (
    DECISION_PROPERTY,
    HOST_GONE,
    SIGN_IN_ALLOW_PROPERTY,
    ApprovalDecision,
    ApprovalInfo,
    AskerInfo,
    DeviceRef,
    DismissReason,
    ElicitationDismiss,
    ElicitationInvoke,
    ElicitationRequest,
    ElicitationResult,
    ErrorNotice,
    PendingSummary,
    QuorumInfo,
    Remember,
    RequestKind,
    SignInInfo,
)
from shared.schema import validate_content
from shared.window_core import quorum_text

logger = logging.getLogger(__name__)

Outcome = Literal["accept", "decline", "cancel", "expired", "cancelled", "server-closed", "host-gone"]
Unanswered = Literal["expired", "cancelled", "server-closed", "host-gone"]
Resolve = Callable[[ElicitationResult], None]

DEFAULT_MAX_REQUEST_BYTES: Final = 2 << 20  # one encoded invoke; config key maxRequestBytes
MAX_PENDING_BYTES: Final = 256 << 20  # all open requests together; past it new ones are refused
WELCOME_PENDING_BYTES: Final = 8 << 20  # invokes carried inside one welcome; the rest follow it
_REMEMBERED_CLOSED_CHANNELS: Final = 50_000
_SUMMARY_MESSAGE_CHARS: Final = 200
COPY_GRACE_S: Final = 5.0  # a copy outlives its expiry by this much when its main never said it ended


class RuleHook(Protocol):
    """What the lifecycle needs from the consent layer (main_process/consent/consent.py)."""

    def check_remember(self, pending: "PendingRequest", result: ElicitationResult) -> None:
        """Raise ProtocolError for a `remember` main cannot keep (before the answer is taken)."""

    def check_grant(self, pending: "PendingRequest", result: ElicitationResult) -> None:
        """Raise ProtocolError for an approval's `grant` main cannot make (before the answer is taken)."""

    def answered(self, pending: "PendingRequest", answer: ElicitationResult, remember: Remember | None,
                 routing_id: bytes, window: str, requests: "PendingRequests") -> None:
        """A window's answer was taken (and handed to the asker); a rule it makes may answer other
        `requests`."""


class SharedRequests(Protocol):
    """A store many mains share, as the lifecycle sees it (consent/shared_requests.py)."""

    machine: str  # this main's

    def shares(self, pending: "PendingRequest") -> bool:
        """Whether answers to this request are decided by the store (a claim)."""

    def opened(self, pending: "PendingRequest") -> None:
        """This main opened a request for the windows: the others' windows may show it."""

    def claim(self, pending: "PendingRequest", answer: ElicitationResult, approver: Approver, decision: str | None,
              then: Callable[[Claim], None]) -> None:
        """A window's valid answer: decide it in the store, then `then(claim)`."""

    def vote(self, pending: "PendingRequest", person: str, answer: ElicitationResult, approver: Approver,
             decision: str | None, then: Callable[[QuorumVote], None]) -> None:
        """A quorum approver's answer (`answer`: what it decides, if it does): counted in the store,
        then `then(vote)`."""

    def ended(self, pending: "PendingRequest", outcome: str) -> None:
        """This main closed its request otherwise than by a claim (expired, withdrawn, a rule)."""

    def counted_here(self, pending: "PendingRequest", person: str, window: str) -> None:
        """A quorum approval of this main's request counted here (the store was away): the store
        counts it too once it is back."""


class Outbox(Protocol):
    """What the lifecycle needs from whoever owns the sockets."""

    def renderers(self) -> list[bytes]:
        """Routing ids of the attached renderer windows."""

    def send(self, routing_ids: Iterable[bytes], frames: list[bytes]) -> list[bytes]:
        """Send `frames` to each attached id among `routing_ids`; the ids it reached."""


@dataclass(frozen=True, slots=True)
class Elicitation:
    """One request as main holds it: its params read once, where it entered main (a server, a relayed
    session, a program's question, main's own approval and sign-in cards), beside their JSON as
    the windows get it, unchanged."""

    request: ElicitationRequest  # {server, params JSON}
    params: ElicitParams

    @classmethod
    def read(cls, server: str, params: dict[str, Any]) -> "Elicitation":
        """Raises UndeliverableRequestError for params that are neither a form nor a URL request."""
        return cls(ElicitationRequest(server=server, params=params), read_params(params))

    @property
    def server(self) -> str:
        return self.request.server


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """Everything about one request but the request itself: how long it waits, who may see it, and
    the invoke's optional extension fields. Made once by whoever opens the request (a server's
    elicitation, a relay, an approval, a question, a sign-in) and read as is by every layer below."""

    timeout_s: float
    origin: str | None = None  # the window of the peer whose call caused it
    max_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # the encoded invoke's limit (maxRequestBytes)
    owner: bytes | None = None  # the peer that asked (a program, a host); its leaving withdraws it
    kind: RequestKind | None = None
    via: str | None = None  # the host whose relayed session it came from (or whose call an approval is), by name
    asker: AskerInfo | None = None
    approval: ApprovalInfo | None = None
    sign_in: SignInInfo | None = None
    call: str | None = None  # the response channel of the call that caused it
    quorum: QuorumInfo | None = None  # an approval that needs several people's (consent/quorum.py)
    record_only: bool = False  # sent to no window, only kept and audited (a host answers it itself)
    asked_on: str | None = None  # a question: the asker's responseChannel (a shared store finds it by that)


def _invoke(elicitation: Elicitation, options: RequestOptions, channel: str | None = None) -> ElicitationInvoke:
    """The invoke of a request; `channel`: its id when no window will answer it (else a new reply channel)."""
    now_ms = time.time_ns() // 1_000_000
    return ElicitationInvoke(request=elicitation.request, response_channel=channel or channels.new_result_channel(),
                             created_at=now_ms, expires_at=now_ms + int(options.timeout_s * 1000), origin=options.origin,
                             kind=options.kind, via=options.via, asker=options.asker, approval=options.approval,
                             sign_in=options.sign_in, call=options.call, quorum=options.quorum)


@dataclass(frozen=True, slots=True)
class Answerer:
    """The window that answered a request, as the audit names it: its id, its name then, and the
    paired web device a web window's page answered for."""

    window: str
    name: str | None
    device: DeviceRef | None


@dataclass(eq=False)
class PendingRequest:
    invoke: ElicitationInvoke
    params: ElicitParams  # the invoke's params, typed
    frames: list[bytes]  # the invoke, encoded once when it opened
    resolve: Resolve  # hands the asker its answer; called once, by `_close`
    owner: bytes | None = None  # the peer that asked (a program, a host); its leaving withdraws it
    sent_to: set[bytes] = field(default_factory=set)  # routing ids the invoke reached
    dismissed: set[bytes] = field(default_factory=set)  # of those, the ones dismissed before it closed
    expiry: Timer | None = None
    for_windows: bool = True  # windows get it, also those that attach later (False: a host answers it)
    answered_by: Answerer | None = None  # set as it closes with a window's (or a host's) answer
    held_by: str | None = None  # another main's request on a shared store: that main's machine (a copy)
    decided_by: str | None = None  # a quorum approval: the person whose answer decided it
    people: list[str] = field(default_factory=list)  # a quorum approval: every approver, for the audit
    asked_on: str | None = None  # a question: the asker's responseChannel (RequestOptions.asked_on)

    @property
    def channel(self) -> str:
        return self.invoke.response_channel

    @property
    def server(self) -> str:
        return self.invoke.request.server

    @property
    def size(self) -> int:
        return len(self.frames[1])


class DecidedRows:
    """The audit rows of requests decided before any opened (by a rule or a policy): no window
    hears of them, so no reply channel is minted; each row's id is a RowIds id."""

    def __init__(self, audit: AuditWriter | None) -> None:
        self._audit = audit
        self._row_ids = RowIds()

    def record_by_rule(self, elicitation: Elicitation, answer: ElicitationResult, rule_id: str,
                       options: RequestOptions, then: Callable[[], None] = lambda: None, *,
                       reason: str | None = None) -> str:
        """Audit a request a rule answered before it opened: one row, request and outcome committed
        together, then `then` hands the answer on. Nothing is sent to any window, so no reply
        channel is minted: the row's id is `RowIds`'. `reason`: why it was declined (a policy's).
        Returns the row's id."""
        invoke = _invoke(elicitation, options, self._row_ids.next())
        if self._audit is None:
            then()
            return invoke.response_channel
        self._audit.request(invoke)
        self._audit.outcome(OutcomeRecord(invoke.response_channel, answer.action, content=answer.content,
                                          rule_id=rule_id, decision=_decision(invoke, answer), reason=reason),
                            then=lambda _written: then())
        return invoke.response_channel

    def record_decided_call(self, asked: ElicitationRequest, approval: ApprovalInfo, decision: ApprovalDecision,
                            by: str, *, timeout_s: float, origin: str, via: str, reason: str | None = None) -> str:
        """Audit a host's call a rule or a policy (`by`) decided before any card opened: one full row,
        written with the next batch (within 20 ms: the decision is on disk already, as the config,
        a policy file, the store, or the allow-session answer's row), as if a window had answered
        `decision` on its approval `asked`. Nothing else is made for it: no options, no reply
        channel (its id is `RowIds`'). Returns the row's id (a denial names it)."""
        created_at = time.time_ns() // 1_000_000
        invoke = ElicitationInvoke(request=asked, response_channel=self._row_ids.next(), created_at=created_at,
                                   expires_at=created_at + int(timeout_s * 1000), origin=origin, kind="approval",
                                   via=via, approval=approval)
        if self._audit is not None:
            self._audit.decided(invoke, "accept", content={DECISION_PROPERTY: decision}, rule_id=by,
                                decision=decision, reason=reason)
        return invoke.response_channel


class PendingRequests:
    """Unresolved requests in arrival order, and why recently closed channels closed."""

    def __init__(
        self,
        outbox: Outbox,
        loop: asyncio.AbstractEventLoop,
        *,
        audit: AuditWriter | None = None,
        unseen: "Callable[[PendingRequests], None]" = lambda requests: None,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        welcome_pending_bytes: int = WELCOME_PENDING_BYTES,
        window_name: Callable[[str], str | None] = lambda _window: None,
        window_device: Callable[[str], DeviceRef | None] = lambda _window: None,
        window_user: Callable[[str], str | None] = lambda _window: None,
        clock: Clock = MONOTONIC,
        rules: RuleHook | None = None,
        opened: "Callable[[PendingRequest, bool], None] | None" = None,
    ) -> None:
        """`rules`: the consent layer (None: main runs without one). `opened`: told of each request
        that opened for the windows, and whether a window got it (main's `notify` webhooks:
        main_process/notify/); it must not wait."""
        self._outbox = outbox
        self._window_name = window_name  # an answering window's name, for the audit log
        self._window_device = window_device  # and the paired web device it answered for, if any
        self._window_user = window_user  # and a desktop window's OS user, if it said (a shared store's audit)
        self._loop = loop
        self._clock = clock  # expiry runs on it (tests move a SettableClock)
        self._audit = audit
        self.decided = DecidedRows(audit)  # the audit rows of requests decided before any opened
        self._unseen = unseen  # told when a request reached no window (auto-open hook)
        self._max_pending_bytes = max_pending_bytes
        self._welcome_pending_bytes = welcome_pending_bytes
        self._open: dict[str, PendingRequest] = {}
        self._open_bytes = 0
        self._closed: OrderedDict[str, str] = OrderedDict()
        self.rules = rules
        self.opened = opened
        self.shared: SharedRequests | None = None  # a store many mains share (set once, before any request)

    # ---- opening -----------------------------------------------------------------------

    def open(self, elicitation: Elicitation, options: RequestOptions, resolve: Resolve) -> PendingRequest:
        """Register a request and send it to every window (none when `options.record_only`);
        `resolve` gets its one answer.

        Raises UndeliverableRequestError, before anything is registered or sent, when the request
        cannot be encoded, is over `options.max_bytes`, or would take open requests past their budget."""
        invoke = _invoke(elicitation, options)
        frames = encode_request(channels.INVOKE, invoke, options.max_bytes)
        if self._open_bytes + len(frames[1]) > self._max_pending_bytes:
            raise UndeliverableRequestError(f"{len(self._open)} requests already wait "
                                            f"({self._open_bytes:,} bytes); try again once some are answered")
        pending = PendingRequest(invoke=invoke, params=elicitation.params, frames=frames, resolve=resolve,
                                 owner=options.owner, for_windows=not options.record_only, asked_on=options.asked_on)
        self._open[pending.channel] = pending
        self._open_bytes += pending.size
        record_only = options.record_only
        targets = [] if record_only else self._outbox.renderers()
        if targets:
            pending.sent_to.update(self._outbox.send(targets, frames))
        if self._audit is not None:
            self._audit.request(invoke)  # written while the windows show it
        # A timer rather than wait_for: no timeout context per request on the hot path.
        pending.expiry = self._clock.call_later(options.timeout_s, self._expire, pending)
        if not pending.sent_to and not record_only:
            self._unseen(self)
        if self.opened is not None and not record_only:
            self.opened(pending, not pending.sent_to.isdisjoint(self._outbox.renderers()))
        if self.shared is not None and not record_only:
            self.shared.opened(pending)
        return pending

    async def ask(self, elicitation: Elicitation, options: RequestOptions,
                  cancel_reason: Callable[[], Unanswered] = lambda: "cancelled") -> ElicitationResult:
        """Open a request and wait for its answer (a server's elicitation callback does this,
        once the gate let it through).

        When the caller is cancelled, the request closes with `cancel_reason()`: whether the
        server withdrew it or its connection went away."""
        answer: asyncio.Future[ElicitationResult] = self._loop.create_future()

        def resolve(result: ElicitationResult) -> None:
            if not answer.done():
                answer.set_result(result)

        pending = self.open(elicitation, options, resolve)
        try:
            return await answer
        except asyncio.CancelledError:
            self.withdraw(pending, cancel_reason())
            raise

    # ---- answering ---------------------------------------------------------------------

    def answer(self, routing_id: bytes, window: str, channel: str, raw_body: bytes) -> None:
        """A window's result on a one-time channel. Raises ProtocolError to refuse it; a refused
        result leaves its request pending. The body is decoded only for a live channel from one
        of its recipients."""
        pending = self._open.get(channel)
        if pending is None:
            closed = self._closed.get(channel)
            if closed is None:
                raise ProtocolError(WireCode.UNKNOWN_CHANNEL, "no such request", channel)
            raise ProtocolError(WireCode.ALREADY_ANSWERED, f"request is {closed}", channel)
        if routing_id not in pending.sent_to:
            raise ProtocolError(WireCode.NOT_RECIPIENT, "this request was not sent to you", channel)
        result = decode_peer_body(channel, raw_body)
        assert isinstance(result, ElicitationResult)
        content = None
        if result.action == "accept" and isinstance(pending.params, FormParams):
            content = result.content or {}
            try:
                validate_content(pending.params.requested_schema, content)
            except InvalidContentError as exc:
                raise ProtocolError(WireCode.INVALID_CONTENT, str(exc), channel) from None
        elif result.action == "accept" and pending.invoke.kind == "sign-in":
            try:  # the other hosts the user allowed on the card (main_process/oauth/hosts.py)
                content = allowance(result.content)
            except InvalidContentError as exc:
                raise ProtocolError(WireCode.INVALID_CONTENT, str(exc), channel) from None
        if result.remember is not None and self.rules is not None:
            self.rules.check_remember(pending, result)
        grant = None
        if result.grant is not None and self.rules is not None:
            self.rules.check_grant(pending, result)
            grant = result.grant  # what the allow covers besides this call (consent.py makes it a rule)
        answer = ElicitationResult(action=result.action, content=content, grant=grant)
        if result.reason is not None and _decision(pending.invoke, answer) == "deny":  # for the agent (approvals)
            answer = ElicitationResult(action=result.action, content=content, reason=clean_reason(result.reason))
        if pending.invoke.quorum is not None:
            self._answer_quorum(pending, routing_id, window, answer, result.remember)
            return
        shared = self.shared
        if shared is not None and shared.shares(pending):
            approver = Approver(window=window, machine=shared.machine, name=self._window_name(window),
                                device=self._window_device(window), user=self._window_user(window))
            shared.claim(pending, answer, approver, _decision(pending.invoke, answer),
                         lambda claim: self._claimed(pending, answer, result.remember, routing_id, window, claim))
            return
        self._close(pending, result.action, answer, by=window)
        if self.rules is not None:
            self.rules.answered(pending, answer, result.remember, routing_id, window, self)

    def _answer_quorum(self, pending: PendingRequest, routing_id: bytes, window: str, answer: ElicitationResult,
                       remember: Remember | None) -> None:
        """A listed approver's answer to a quorum approval (a valid one). On a store many mains
        share, the store counts it (every main's approvers add up) and decides it in one
        transaction; otherwise it is counted here."""
        quorum = pending.invoke.quorum
        assert quorum is not None
        device = self._window_device(window)
        names = (device.name if device is not None else None, self._window_name(window), self._window_user(window))
        person = quorums.listed_approver(quorum, names, window, pending.channel)
        shared = self.shared
        if shared is None or not shared.shares(pending):
            self._count_here(pending, person, routing_id, window, answer, remember)
            return
        decides = answer if _decision(pending.invoke, answer) == "deny" else _ALLOW_ONCE
        approver = Approver(window=window, machine=shared.machine, name=self._window_name(window),
                            device=self._window_device(window), user=self._window_user(window))
        shared.vote(pending, person, decides, approver, _decision(pending.invoke, decides),
                    lambda vote: self._voted(pending, person, (answer, decides), remember, routing_id, window, vote))

    def _count_here(self, pending: PendingRequest, person: str, routing_id: bytes, window: str,
                    answer: ElicitationResult, remember: Remember | None) -> None:
        """Count an approver's answer on this main alone (one main, or this main's own request while
        the shared store is unreachable)."""
        shared = self.shared
        if shared is not None and shared.shares(pending) and _decision(pending.invoke, answer) != "deny":
            shared.counted_here(pending, person, window)  # before `_close`: kept first, so made first
        counted = self._count(pending, person, answer)
        if counted is None:
            return  # an approval that does not decide yet: the windows show the count
        self._close(pending, counted.action, counted, by=window)
        if self.rules is not None:
            self.rules.answered(pending, counted, remember, routing_id, window, self)

    def _voted(self, pending: PendingRequest, person: str, answers: tuple[ElicitationResult, ElicitationResult],
               remember: Remember | None, routing_id: bytes, window: str, vote: QuorumVote) -> None:
        """The store counted an approver's answer (`answers`: as given, and as it decides): the new
        count goes to every window here (the others' mains read it on their wake-up), or it decided
        the request, or lost to an earlier ending, or the store was unreachable (this main's own
        request is then counted here)."""
        answer, decides = answers
        quorum = pending.invoke.quorum
        assert quorum is not None
        if vote.result == "counted":
            if self._open.get(pending.channel) is pending:
                logger.info("request %s: approved by %s, %s approved in the store", pending.channel, person,
                            len(vote.people))
                self._recount(pending, _with_people(quorum, vote.people))
        elif vote.result == "won":
            pending.decided_by, pending.people = person, list(vote.people)
            self._claimed(pending, decides, remember, routing_id, window, "won")
        elif vote.result == "unreachable" and pending.held_by is None:
            if self._open.get(pending.channel) is pending:
                self._count_here(pending, person, routing_id, window, answer, remember)
        else:
            self._claimed(pending, decides, remember, routing_id, window, vote.result)

    def recount_from_store(self, pending: PendingRequest, approved: Iterable[str]) -> None:
        """A shared store's count of a quorum approval open here (another main's approver approved):
        the windows show the new count. A count is only ever added to (a read older than the last
        count changes nothing)."""
        quorum = pending.invoke.quorum
        if quorum is None or self._open.get(pending.channel) is not pending:
            return
        counted = _with_people(quorum, approved)
        if counted is not quorum:
            self._recount(pending, counted)

    def _count(self, pending: PendingRequest, person: str, answer: ElicitationResult) -> ElicitationResult | None:
        """A quorum approval's answer from `person`: the answer that decides it (a deny, or the
        last approval needed, as allow-once: a quorum is never remembered), or None while it waits
        for more (the invoke goes out again with the count)."""
        quorum = pending.invoke.quorum
        assert quorum is not None
        channel = pending.channel
        if _decision(pending.invoke, answer) == "deny":
            pending.decided_by, pending.people = person, list(dict.fromkeys([*quorum.approved, person]))
            return answer
        counted = quorums.with_approval(quorum, person)
        if not quorums.complete(counted):
            if counted is not quorum:
                logger.info("request %s: approved by %s, %s", channel, person, quorum_text(counted))
            self._recount(pending, counted)
            return None
        pending.decided_by, pending.people = person, list(counted.approved)
        return _ALLOW_ONCE

    def _recount(self, pending: PendingRequest, quorum: QuorumInfo) -> None:
        """The invoke with the new count, sent again to every window that has it (and kept for
        those that attach later); the window that approved shows the card again, with the count."""
        invoke = msgspec.structs.replace(pending.invoke, quorum=quorum)
        frames = encode(channels.INVOKE, invoke)
        self._open_bytes += len(frames[1]) - pending.size
        pending.invoke, pending.frames = invoke, frames
        pending.sent_to.intersection_update(self._outbox.send(pending.sent_to, frames))

    def _claimed(self, pending: PendingRequest, answer: ElicitationResult, remember: Remember | None,
                 routing_id: bytes, window: str, claim: Claim) -> None:
        """The store decided a window's answer: it won (committed: now everyone may hear of it), it
        lost (another answer or ending came first: the window hears so, and the dismiss follows), or
        the store could not be asked (this main's own request is then decided here, as on one
        machine; another main's stays open and the window hears why)."""
        channel = pending.channel
        if claim == "lost" or (claim == "unreachable" and pending.held_by is not None):
            code, text = ((WireCode.ALREADY_ANSWERED, "another answer came first") if claim == "lost" else
                          (WireCode.STORE_UNREACHABLE,
                           f"the shared store is unreachable: the request of {pending.held_by} stays open; try again"))
            self._outbox.send([routing_id], encode(channels.ERROR, ErrorNotice(code=code, message=text, topic=channel)))
            return
        if self._open.get(channel) is pending:
            self._close(pending, answer.action, answer, by=window, recorded=claim == "won")
        if self.rules is not None:
            self.rules.answered(pending, answer, remember, routing_id, window, self)

    # ---- answered by a rule -------------------------------------------------------------

    def close_by_rule(self, pending: PendingRequest, answer: ElicitationResult, rule_id: str) -> None:
        """A new rule answers a request that is already open: dismissed everywhere, audited with
        the rule's id, its asker answered. Another main's request is that main's to decide."""
        if self._open.get(pending.channel) is pending and pending.held_by is None:
            self._close(pending, answer.action, answer, by=None, rule_id=rule_id)

    def answered_elsewhere(self, pending: PendingRequest, answer: ElicitationResult, by: str) -> None:
        """Answered outside the windows, by `by` (a host in a relayed session that got the server's
        own request): dismissed everywhere as answered by it, audited, its asker resolved."""
        if self._open.get(pending.channel) is pending:
            self._close(pending, answer.action, answer, by=by)

    # ---- withdrawing -------------------------------------------------------------------

    def withdraw(self, pending: PendingRequest, reason: Unanswered) -> None:
        """Close a request nobody answered; its asker gets `cancel` (if it still listens)."""
        if self._open.get(pending.channel) is pending:
            self._close(pending, reason, ElicitationResult(action="cancel"), by=None)

    def withdraw_server(self, server: str) -> None:
        """A server's connection ended: its open requests can never be answered."""
        for pending in [p for p in self._open.values() if p.server == server and p.owner is None and p.held_by is None]:
            self.withdraw(pending, "server-closed")

    def withdraw_owner(self, owner: bytes, reason: Unanswered = "cancelled") -> None:
        """A peer that asked went away: everything it left pending is withdrawn (`reason`
        "host-gone" for an MCP host's)."""
        for pending in [p for p in self._open.values() if p.owner == owner]:
            self.withdraw(pending, reason)

    # ---- a store many mains share: their requests here, this main's answered there --------

    def open_copy(self, invoke: ElicitationInvoke, machine: str, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> bool:
        """Show another main's open request to this main's windows, as a copy only the store's
        truth closes (`close_copy`). False when it is known here already, or cannot be shown (it is
        over the limits, or is no form or URL request). A copy closed because its main was thought
        gone opens again (that main's connection to the store was cut, and it is back)."""
        channel = invoke.response_channel
        if channel in self._open or self._closed.get(channel, "server-closed") != "server-closed":
            return False
        try:
            frames = encode_request(channels.INVOKE, invoke, max_bytes)
            params = read_params(invoke.request.params)
        except UndeliverableRequestError as exc:
            logger.warning("request %s of %s not shown here: %s", channel, machine, exc)
            return False
        if self._open_bytes + len(frames[1]) > self._max_pending_bytes:
            logger.warning("request %s of %s not shown here: open requests are at their budget", channel, machine)
            return False
        pending = PendingRequest(invoke=invoke, params=params, frames=frames, resolve=lambda _answer: None,
                                 held_by=machine)
        self._closed.pop(channel, None)
        self._open[channel] = pending
        self._open_bytes += pending.size
        targets = self._outbox.renderers()
        if targets:
            pending.sent_to.update(self._outbox.send(targets, frames))
        if invoke.expires_at is not None:  # its main ends it first; this only forgets a copy nobody ended
            left_s = max(0.0, (invoke.expires_at - time.time_ns() // 1_000_000) / 1000)
            pending.expiry = self._clock.call_later(left_s + COPY_GRACE_S, self._forget_copy, pending)
        return True

    def close_copy(self, pending: PendingRequest, outcome: Outcome, by: str | None) -> None:
        """Another main's request ended in the store (answered `by` a window anywhere, or
        `outcome`): its copy leaves this main's windows. Nothing else here: its main decides it."""
        if self._open.get(pending.channel) is pending and pending.held_by is not None:
            self._close(pending, outcome, ElicitationResult(action="cancel"), by=by, recorded=True)

    def dismiss_answered(self, pending: PendingRequest, by: str) -> None:
        """This main's request was answered on another main (the store committed it and said so):
        its windows get their dismiss now, without waiting for the read of the values that
        `answered_in_store` then hands its asker (it sends no second dismiss)."""
        if self._open.get(pending.channel) is pending and pending.held_by is None:
            targets = pending.sent_to - pending.dismissed
            self._outbox.send(targets, _dismiss_frames(pending.channel, "answered", by))
            pending.dismissed |= targets

    def audited_in_store(self, channel: str) -> None:
        """The shared store wrote this request's audit row as it published it: the audit writer
        does not write it again."""
        if self._audit is not None:
            self._audit.drop_request(channel)

    def answered_in_store(self, pending: PendingRequest, answer: ElicitationResult, by: str,
                          person: str | None = None) -> None:
        """This main's request was answered on another main (the store has the decision and its
        audit row): dismissed in this main's windows, its asker (the server) answered. `person`:
        a quorum approval's decider, as the asker's denial names them."""
        if self._open.get(pending.channel) is pending and pending.held_by is None:
            pending.decided_by = person
            self._close(pending, answer.action, answer, by=by, recorded=True)

    def _forget_copy(self, pending: PendingRequest) -> None:
        if self._open.get(pending.channel) is pending:
            logger.info("request %s of %s: its main never said it ended; forgotten", pending.channel, pending.held_by)
            self._close(pending, "expired", ElicitationResult(action="cancel"), by=None, recorded=True)

    def _expire(self, pending: PendingRequest) -> None:
        if self._open.get(pending.channel) is pending:
            logger.info("request %s from %r expired", pending.channel, pending.server)
            self._close(pending, "expired", ElicitationResult(action="cancel"), by=None)

    # ---- the one close path -------------------------------------------------------------

    def _close(self, pending: PendingRequest, outcome: Outcome, answer: ElicitationResult, by: str | None,
               rule_id: str | None = None, recorded: bool = False) -> None:
        """`recorded`: the shared store has the decision and its audit row already (a claim, or
        another main's answer or ending), so nothing is written here."""
        del self._open[pending.channel]
        self._open_bytes -= pending.size
        answered = by is not None or rule_id is not None
        self._closed[pending.channel] = "answered" if answered else outcome
        if len(self._closed) > _REMEMBERED_CLOSED_CHANNELS:
            self._closed.popitem(last=False)
        if pending.expiry is not None:
            pending.expiry.cancel()
        # A host that stopped waiting is "cancelled" to a v1 window; the extension `cause` says more.
        host_gone = outcome == HOST_GONE
        reason: DismissReason = "answered" if answered else "cancelled" if host_gone else outcome  # type: ignore[assignment]
        dismiss = _dismiss_frames(pending.channel, reason, by, rule_id, HOST_GONE if host_gone else None)
        self._outbox.send(pending.sent_to - pending.dismissed, dismiss)  # the windows first: they are not waiting on the disk
        answerer = None if by is None else Answerer(by, pending.decided_by or self._window_name(by),
                                                    self._window_device(by))
        pending.answered_by = answerer  # who, for the asker's resolve (a denial names the person)
        if not recorded and self.shared is not None and pending.held_by is None and pending.for_windows:
            self.shared.ended(pending, outcome)
        if self._audit is None or recorded:
            pending.resolve(answer)
            return
        # Committed before the asker hears the answer: a SIGKILL of main loses no decided outcome.
        self._audit.outcome(OutcomeRecord(pending.channel, outcome, window=by, content=answer.content, rule_id=rule_id,
                                          decision=_decision(pending.invoke, answer),
                                          window_name=(", ".join(pending.people) if pending.people else
                                                       answerer.name if answerer is not None else None),
                                          device=answerer.device if answerer is not None else None,
                                          reason=answer.reason, approvers=tuple(pending.people)),
                            then=lambda _written: pending.resolve(answer))

    # ---- delivery to a window that attaches ---------------------------------------------

    def deliver_on_attach(self, routing_id: bytes) -> tuple[list[bytes], list[PendingRequest], list[str]]:
        """What a newly welcomed window gets: the encoded invoke bodies that fit in its welcome,
        the requests to send right after it, and every open channel (oldest first). All of them
        count as sent to the window from here on."""
        in_welcome: list[bytes] = []
        after: list[PendingRequest] = []
        budget = self._welcome_pending_bytes
        for pending in self._open.values():
            if not pending.for_windows or pending.dismissed:  # (dismissed: answered elsewhere, closing)
                continue
            pending.sent_to.add(routing_id)
            if not after and pending.size <= budget:
                in_welcome.append(pending.frames[1])
                budget -= pending.size
            else:
                after.append(pending)  # keep the order: once one follows, all later ones follow
        return in_welcome, after, [channel for channel, p in self._open.items() if p.for_windows and not p.dismissed]

    # ---- reading -----------------------------------------------------------------------

    def get(self, channel: str) -> PendingRequest | None:
        return self._open.get(channel)

    def closed_reason(self, channel: str) -> str | None:
        return self._closed.get(channel)

    def all(self) -> list[PendingRequest]:
        """Every open request, oldest first (dicts keep insertion order)."""
        return list(self._open.values())

    def summaries(self) -> list[PendingSummary]:
        return [
            PendingSummary(
                response_channel=p.channel, server=p.server, mode=p.params.mode,
                message=p.params.message[:_SUMMARY_MESSAGE_CHARS],
                created_at=p.invoke.created_at, expires_at=p.invoke.expires_at, origin=p.invoke.origin,
                sent_to=len(p.sent_to),
            )
            for p in self._open.values()
        ]

    def __len__(self) -> int:
        return len(self._open)


_ALLOW_ONCE: Final = ElicitationResult(action="accept", content={DECISION_PROPERTY: "allow-once"})


def _with_people(quorum: QuorumInfo, people: Iterable[str]) -> QuorumInfo:
    """`quorum` with `people` counted too (in order, each once); `quorum` itself if none is new."""
    for person in people:
        quorum = quorums.with_approval(quorum, person)
    return quorum


def _dismiss_frames(channel: str, reason: DismissReason, by: str | None = None, rule_id: str | None = None,
                    cause: str | None = None) -> list[bytes]:
    return encode(channels.DISMISS, ElicitationDismiss(response_channel=channel, reason=reason, by=by, rule=rule_id,
                                                       cause=cause))


def _decision(invoke: ElicitationInvoke, answer: ElicitationResult) -> str | None:
    """An approval's decision for the audit log (anything but an accepted allow-* is a deny); for a
    sign-in, the other hosts the user allowed ("allow-hosts <origin> ..")."""
    if invoke.kind == "sign-in":
        allowed = answer.content.get(SIGN_IN_ALLOW_PROPERTY) if answer.content else None
        return f"allow-hosts {' '.join(allowed)}" if allowed else None
    if invoke.kind != "approval":
        return None
    decision = answer.content.get(DECISION_PROPERTY) if answer.action == "accept" and answer.content else None
    return decision if isinstance(decision, str) and decision.startswith("allow-") else "deny"
