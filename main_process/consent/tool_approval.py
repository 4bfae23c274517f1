"""Tool-call approval: a host's `tools/call` in its relayed session (the `elicitron serve` gateway's,
relay.py) goes through the config's policy files (policy/: a `forbid` or `permit` decides, the audit
names `policy:<id>`), then config rules, then the server's `toolApproval` policy, then user rules
(consent.py keeps them all), and otherwise becomes an approval request (`approvals`) a window
answers; calls from the CLI or a window's call panel never come here. Every denial the host gets
is denial.py's `Denial`: who said no (the person and their window, a rule, the config, a policy),
why, and whether asking again may help.

A config rule with a `quorum` asks too: its card needs that many approvers (pending.py counts them).

A user rule is a grant (grants.py): it decides only calls with the arguments it covers, and a
single-use one decides one call: a stored one only once this main took it from the store.

A call waiting for its server to start is decided once it is ready, so a rule revoked meanwhile
never lets it through. The host may take its call back at whichever stage it is.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from main_process.consent import approvals
from main_process.consent.consent import Consent, rule_decision
from main_process.consent.denial import TOOL_APPROVAL_ID, Denial
from main_process.consent.long_wait import HostWait, LongWaits, SharedCard
from main_process.consent.pending import Elicitation, PendingRequest, PendingRequests, RequestOptions
from main_process.consent.rules import Rule
from main_process.policy import hook as policy_hook
from main_process.policy.engine import Verdict
from main_process.servers.server_era import READY_TIMEOUT_S
from main_process.servers.server_faults import cancelled_reply, error_reply
from main_process.servers.servers import ManagedServer
from main_process.wire.peer_calls import Cancel
from main_process.wire.peers import Peer
from main_process.wire.topic_routes import ReplyTo
from shared.errors import RpcCode, UndeliverableRequestError
from shared.messages import (
    ApprovalDecision,
    ApprovalInfo,
    ChannelReply,
    ElicitationRequest,
    ElicitationResult,
    QuorumInfo,
)

logger = logging.getLogger(__name__)


class _Notices(Protocol):
    def publish_notice(self, level: str, message: str, server: str | None) -> None: ...


class ToolApproval:
    """Decides each host's tool call with the consent layer's rules; approval cards open in `pending`."""

    def __init__(self, consent: Consent, pending: PendingRequests, notices: _Notices,
                 waits: LongWaits | None = None) -> None:
        """`waits`: what a call whose card takes longer than its host waits gets (long_wait.py)."""
        self._consent = consent
        self._pending = pending
        self._notices = notices
        self._waits = waits
        self._tasks: set[asyncio.Task[None]] = set()

    def may_ask(self, server: ManagedServer) -> bool:
        """Whether a host's call of `server` can wait on a card: its toolApproval (or an override)
        asks, or a config rule asks a quorum. A server whose calls never wait is relayed as it is:
        main declares and holds no tasks for it (the gateway stays transparent)."""
        return approvals.may_ask(server.config) or self._consent.book.asks_quorum(server.name)

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def call_in_relay(self, server: ManagedServer, tool: str, arguments: dict[str, Any], host: Peer,
                      send_on: Callable[[], None], reply: ReplyTo, wait: HostWait | None = None) -> Cancel | None:
        """A `tools/call` in a host's relayed session: send it on, deny it, or ask a window first.
        `send_on` passes it to the server; `reply` instead answers the host (a denial, or why it
        could not be decided), once; `wait`: its session and progress token, for a card the host
        may wait on longer than it waits. Returns how to take it back while it waits (for its
        server, or for an approval), None once decided."""
        return self._approve(_HostCall(server, tool, arguments, host, reply, send_on, wait))

    def needs_decision(self, server: ManagedServer) -> bool:
        """False when every call of this server is allowed without looking (the common case)."""
        config = server.config
        return config.tool_approval != "allow" or bool(config.tool_approval_overrides) \
            or self._consent.book.has_tool_rules(server.name) or self._consent.policies.active

    def _approve(self, call: "_HostCall") -> Cancel | None:
        server = call.server
        if not self.needs_decision(server):
            call.run()
            return None
        if server.ready:
            self._decide(call)
            return call.cancel
        task = asyncio.create_task(self._decide_when_ready(call))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda done: _answer_if_cancelled_unstarted(call, done))
        call.stage(task.cancel)
        return call.cancel

    async def _decide_when_ready(self, call: "_HostCall") -> None:
        # The decision waits for the server: its tool list carries the annotations, and a rule
        # revoked meanwhile must not let the call through.
        server = call.server
        try:
            ready = await server.wait_ready(READY_TIMEOUT_S)
        except asyncio.CancelledError:
            if call.cancelled:
                call.reply(cancelled_reply())
                return
            raise
        if not ready:
            call.reply(error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} did not become ready within "
                                                         f"{READY_TIMEOUT_S:.0f} s (status {server.status})"))
            return
        self._decide(call)

    def _decide(self, call: "_HostCall") -> None:
        server, host, reply = call.server, call.host, call.reply
        tool = call.tool
        listed = server.listed.get(tool)

        def annotations() -> dict[str, Any] | None:
            if listed is None or listed.annotations is None:
                return None
            return listed.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)

        verdict = self._consent.policies.host_call(host.name or host.window, server.name, tool, call.arguments,
                                                   annotations)  # dumped only if a policy reads them
        if verdict is not None and verdict.policy is not None:  # policy files come first (policy/)
            self._by_policy(call, verdict)
            return
        rule = self._consent.tool_rule(server.name, tool, call.arguments, host.window)
        quorum = None
        if rule is not None and rule.source == "config" and rule.quorum is not None:  # asked, of several people
            quorum = QuorumInfo(needed=rule.quorum, approvers=list(rule.approvers), approved=[])
        elif rule is not None and rule.source == "config":
            self._by_rule(call, rule)
            return
        policy = "ask" if quorum is not None else approvals.policy_for(server.config, tool, annotations)
        if policy == "allow":
            call.run()
        elif policy == "deny":
            logger.info("host %r: %s/%s denied by toolApproval", host.name, server.name, tool)
            reply(ChannelReply(result=Denial(server.name, tool, "config", id=TOOL_APPROVAL_ID).result()))
        elif rule is not None and quorum is None:
            self._by_rule(call, rule)
        else:
            info = ApprovalInfo(server=server.name, tool=tool, arguments=call.arguments,
                                title=listed.title if listed is not None else None,
                                description=listed.description if listed is not None else None,
                                annotations=annotations(),
                                grants=None if quorum is not None else approvals.grant_offer(call.arguments))
            if self._waits is not None and call.wait is not None:  # its host may give up before the person answers
                self._waits.ask(call, lambda card: self._ask(card, info, quorum))
            else:
                self._ask(call, info, quorum)

    def _by_policy(self, call: "_HostCall", verdict: Verdict) -> None:
        policy = verdict.policy
        assert policy is not None  # _decide checked it
        if verdict.decision == "permit":
            self._record(call, "allow-once", policy_hook.audit_id(policy))
            call.run()
            return
        row = self._record(call, "deny", policy_hook.audit_id(policy), reason=policy.reason)
        logger.info("host %r: %s/%s denied by policy %s", call.host.name or call.host.window, call.server.name,
                    call.tool, policy.id)
        call.reply(ChannelReply(result=Denial(call.server.name, call.tool, "policy", id=policy.id,
                                              reason=policy.reason, context=row).result()))

    def _by_rule(self, call: "_HostCall", rule: Rule) -> None:
        taking = self._consent.use(rule)  # a single-use grant decides this call only
        if taking is None:
            self._decided_by_rule(call, rule)
            return
        task = asyncio.create_task(self._take_then_decide(call, rule, taking))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda done: _answer_if_cancelled_unstarted(call, done))
        call.stage(task.cancel)

    async def _take_then_decide(self, call: "_HostCall", rule: Rule,
                                taking: Callable[[], Awaitable[bool | None]]) -> None:
        """A stored single-use grant decides the call only if this main took it from the store; else
        (another main used it first, or the store could not be asked) the call is decided again."""
        try:
            taken = await taking()
        except asyncio.CancelledError:
            if call.cancelled:
                call.reply(cancelled_reply())
                return
            raise
        if taken:
            self._decided_by_rule(call, rule)
            return
        logger.info("single-use grant %s: %s; %s/%s is decided again", rule.id,
                    "used on another main first" if taken is False else "the store could not be asked",
                    call.server.name, call.tool)
        self._decide(call)

    def _decided_by_rule(self, call: "_HostCall", rule: Rule) -> None:
        decision = rule_decision(rule)
        row = self._record(call, decision, rule.id)
        if approvals.allowed(decision):
            call.run()
        else:
            logger.info("host %r: %s/%s denied by rule %s", call.host.name or call.host.window, call.server.name,
                        call.tool, rule.id)
            call.reply(ChannelReply(result=Denial(call.server.name, call.tool,
                                                  "config" if rule.source == "config" else "rule",
                                                  id=rule.id, context=row).result()))

    def _record(self, call: "_HostCall", decision: ApprovalDecision, by: str, reason: str | None = None) -> str:
        """The audit row of a call decided without a card, `by` a rule or a policy; its id."""
        server, host = call.server, call.host
        host_name = host.name or host.window
        asked = ElicitationRequest(server=server.name, params={
            "mode": "form", "message": f"{host_name} wants to call {server.name}/{call.tool}",
            "requestedSchema": approvals.APPROVAL_SCHEMA})
        return self._pending.decided.record_decided_call(
            asked, ApprovalInfo(server=server.name, tool=call.tool, arguments=call.arguments), decision, by,
            timeout_s=server.config.elicitation_timeout_s, origin=host.window, via=host_name, reason=reason)

    def _ask(self, call: "_HostCall | SharedCard", info: ApprovalInfo, quorum: QuorumInfo | None = None) -> None:
        server, host, reply = call.server, call.host, call.reply
        tool = call.tool
        host_name = host.name or host.window
        pending = self._pending
        asked: list[PendingRequest] = []  # the card's request, once open (an answer comes later)

        def resolve(answer: ElicitationResult) -> None:
            if call.cancelled:  # the host took its call back while the card was up
                reply(cancelled_reply())
                return
            decision = approvals.decision_of(answer)
            if approvals.allowed(decision):
                call.run()
                return
            reply(ChannelReply(result=_denial_by_card(server.name, tool, asked[0], answer).result()))

        try:
            opened = pending.open(
                Elicitation.read(server.name, approvals.approval_params(host_name, info)),
                RequestOptions(timeout_s=server.config.elicitation_timeout_s, origin=host.window,
                               owner=host.routing_id, max_bytes=server.config.max_request_bytes, kind="approval",
                               via=host_name, approval=info, quorum=quorum),
                resolve)
        except UndeliverableRequestError as exc:
            self._notices.publish_notice("warning", f"an approval for {server.name}/{tool} could not be shown: "
                                                 f"{exc}", server.name)
            reply(error_reply(RpcCode.INVALID_PARAMS, f"the approval request for {server.name}/{tool} "
                                                      f"could not be shown: {exc}"))
            return
        asked.append(opened)
        call.stage(lambda: pending.withdraw(opened, "host-gone"))  # the host cancelled its call, or left
        logger.info("host %r: asking to approve %s/%s (%s)", host_name, server.name, tool, opened.channel)


def _denial_by_card(server: str, tool: str, asked: PendingRequest, answer: ElicitationResult) -> Denial:
    """A card's deny (Deny, decline, Esc) names the person's window and their reason; a card nobody
    answered in time (or that ended unanswered) is nobody's decision."""
    person = asked.answered_by
    if person is None:
        return Denial(server, tool, "nobody", context=asked.channel)
    return Denial(server, tool, "person", window=person.name, device=person.device.name if person.device else None,
                  reason=answer.reason, context=asked.channel)


def _answer_if_cancelled_unstarted(call: "_HostCall", task: "asyncio.Task[None]") -> None:
    """The host cancelled before the waiting task's first step: its own handler never ran, so
    the call is answered here (once: a task that ran returns normally after answering)."""
    if task.cancelled() and call.cancelled and not call.replied:
        call.reply(cancelled_reply())


class _HostCall:
    """One host's call on its way through the consent layer: what sends it on, and how the host may
    cancel it at whichever stage it is (waiting for its server, for an approval)."""

    def __init__(self, server: ManagedServer, tool: str, arguments: dict[str, Any], host: Peer, reply: ReplyTo,
                 runner: Callable[[], None], wait: HostWait | None = None) -> None:
        self.server, self.tool, self.arguments, self.host = server, tool, arguments, host
        self.wait = wait
        self._reply = reply
        self.replied = False
        self._runner = runner
        self.cancelled = False
        self._cancel_stage: Callable[[], object] | None = None

    def reply(self, answer: ChannelReply) -> None:
        self.replied = True
        self._reply(answer)

    def stage(self, cancel: Callable[[], object] | None) -> None:
        """`cancel` ends the current stage; what it returns is ignored (e.g. Task.cancel's bool)."""
        self._cancel_stage = cancel

    def cancel(self) -> None:
        self.cancelled = True
        if self._cancel_stage is not None:
            self._cancel_stage()

    def run(self) -> None:
        """Sent on to the server: nothing of it is ours to take back from here on."""
        self.stage(None)
        self._runner()
