"""The consent layer in main: rules answer before any window, and hosts' tool calls are approved.

- **Remembered answers.** A window's answer that carries `remember` (form mode, accept or decline)
  becomes a user rule: "this session" in memory, "always" and "until a date" also in the store.
  The next time the same server asks the same question (`rules.question_key`), `answer_for`
  answers it at once: no request opens, no window is needed, the audit row names the rule. A
  program's question (`elicitron ask`) is remembered for that asker (`answer_asker`), never for a
  server of the same name, and the other way round.
- **Bound to whom it was given to** (rules.py): a server's rules to its program (`identities`,
  from the config: command and arguments, or URL), so a replaced program is asked again; "Allow
  for this session" to the host whose card it was. Rules stored before rules were bound are bound
  at load: to the program configured under their name now, or, for an answer rule of a name no
  server has, to the asker of that name (what it could only have answered since).
- **Tool-call approval** (tool_approval.py, on these rules): a host's `tools/call` in its relayed
  session goes through the config's policy files (policy/, `policies` here), then config rules,
  then the server's `toolApproval` policy, then user rules, and otherwise becomes an approval
  request a window answers.
- **Live and revocable.** Every change is pushed to the windows (`rules`); revoking removes a rule
  from memory before the next request is looked at (and from the store before the revoker hears
  it is done), and since every lookup happens at the moment a rule would be applied (a call
  waiting for its server to start is decided once it is ready), a revoked rule is never applied
  again.
- A new rule also answers the requests already open that it covers (same question, or approvals
  of the same tool): "Always allow" on one card clears its twins.
- **The store** (store/interface.py: `RuleTable`) keeps the rules that outlive main; main loads
  them once at start (`remembered_rules`) and writes each change as it happens, never waiting for
  the write before applying the change in memory.
URL-mode requests and sign-ins never have a question key, so no rule ever answers them.
"""

import asyncio
import dataclasses
import functools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, Protocol

from main_process.consent import approvals, grants
from main_process.consent.pending import Elicitation, PendingRequest, PendingRequests
from main_process.consent.rule_expiry import RuleExpiry
from main_process.consent.rules import Party, Rule, RuleBook, question_key, schema_fields
from main_process.policy import hook as policy_hook
from main_process.policy.live import Policies
from main_process.store.interface import RuleTable
from main_process.tasks import Tasks
from main_process.wire.peers import Peer
from shared.elicit_params import ElicitParams, FormParams
from shared.errors import (
    InvalidContentError,
    ProtocolError,
    RuleStoreError,
    WireCode,
)
from shared.messages import (
    DECISION_PROPERTY,
    ApprovalDecision,
    ChannelReply,
    ElicitationInvoke,
    ElicitationResult,
    GrantChoice,
    Remember,
    RevokeReport,
    RevokeRules,
    RuleInfo,
)
from shared.schema import validate_content

logger = logging.getLogger(__name__)

# A server's form request, and a program's form question (its "server" is the asker's name), can be
# answered by a remembered answer; approvals and sign-ins never are.
_REMEMBERED_KINDS: frozenset[str | None] = frozenset({None, "question"})


def _party_of(invoke: ElicitationInvoke) -> Party:
    return "asker" if invoke.kind == "question" else "server"



class ConsentPorts(Protocol):
    """The ports the consent layer is made with (the wire's ConsentSide); the requests it answers come
    with each answer (`answered`)."""

    def publish_rules(self, rules: list[RuleInfo]) -> None: ...

    def publish_notice(self, level: str, message: str, server: str | None) -> None: ...

    def peer(self, routing_id: bytes) -> Peer | None: ...


async def _reply_revoked(report: Awaitable[RevokeReport]) -> ChannelReply:
    return ChannelReply(revoked=await report)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def remembered_rules(store: RuleTable, ports: ConsentPorts) -> list[Rule]:
    """The rules the store keeps, for main's start; none (said in the log and the windows) when
    it cannot be read: main runs on, remembered rules are just not applied."""
    try:
        return await store.load(now_ms())
    except RuleStoreError as exc:
        logger.error("%s; remembered answers and approvals will not be applied", exc)
        ports.publish_notice("error", f"{exc}; remembered answers and approvals are not applied", None)
        return []


class Consent:
    def __init__(self, ports: ConsentPorts, store: RuleTable | None, remembered: Iterable[Rule],
                 config_rules: Iterable[Rule], loop: asyncio.AbstractEventLoop,
                 identities: Mapping[str, str] | None = None, policies: Policies | None = None,
                 now: Callable[[], int] = now_ms) -> None:
        """`store` keeps the changes that outlive main; `remembered` is what it held at start
        (`remembered_rules`); `policies` the config's policy files (reloaded in place; tool_approval.py
        asks them first); `now` the time in epoch ms (a test's settable clock). Made on main's running loop."""
        self.now = now
        self.policies = policies or Policies()
        self._ports = ports
        self._store = store
        self._identities = dict(identities or {})  # server name -> server_identity of its entry now
        self.book = RuleBook()
        self.book.set_config(config_rules)
        self._expiry = RuleExpiry(self.book, loop, now, store, self._write, self._publish)
        self._misfits: set[tuple[str, str]] = set()  # (rule id, question key) already reported
        self._writes = Tasks()  # store writes of a backend that suspended
        for rule in remembered:
            self.book.add(self._bound(rule))
        self._expiry.schedule()
        logger.info("consent: %d config rules, %d remembered rules", len(self.book.all()) - len(self.book.user_rules()),
                    len(self.book.user_rules()))

    async def close(self) -> None:
        """Stop the timers and tasks; the store's writes in flight end first (the store is app.py's)."""
        self._expiry.close()
        await self._writes.wait()

    def _write(self, write: Awaitable[bool], failed: Callable[[], None] = lambda: None) -> None:
        """A change to the store, started now; `failed` runs if it was not committed."""
        async def written() -> None:
            if not await write:
                failed()

        self._writes.start_now(written())

    # ---- reading and revoking ---------------------------------------------------------

    def infos(self) -> list[RuleInfo]:
        now = self.now()
        return [rule.info(applies=rule.applies_to(self._identities.get(rule.server)))
                for rule in self.book.all() if not rule.expired(now)]

    def rules_report(self) -> ChannelReply:
        return ChannelReply(rules=self.infos())

    def revoke_rules(self, request: RevokeRules, by: str) -> Awaitable[ChannelReply]:
        """Revoked in memory now; the reply once the store has them removed too."""
        return _reply_revoked(self.revoke(request.ids, request.revoke_all, request.server, by, asker=request.asker))

    def revoke(self, ids: Iterable[str], revoke_all: bool, server: str | None, by: str, *,
               asker: str | None = None) -> Coroutine[Any, Any, RevokeReport]:
        """Remove the rules from memory now (no request is decided by them from here on); the
        coroutine removes them from the store and says what was revoked."""
        targets: dict[str, Rule] = {}
        refused: list[str] = []
        if revoke_all:
            targets = {r.id: r for r in self.book.user_rules() if r.of(server, asker)}
        for rule_id in ids:
            rule = self.book.get(rule_id)
            if rule is None:
                refused.append(f"{rule_id}: no such rule")
            elif rule.source == "config":
                refused.append(f"{rule_id}: a config rule; edit the config file and run `elicitron reload`")
            else:
                targets[rule_id] = rule
        for rule_id in targets:
            self.book.remove(rule_id)
        stored = [rule_id for rule_id, rule in targets.items() if rule.scope != "session"]
        if targets:
            logger.info("revoked %s (asked by %s)", ", ".join(targets), by)
            self._expiry.schedule()
            self._publish()
        return self._revoked_in_store(list(targets), stored, refused)

    async def _revoked_in_store(self, revoked: list[str], stored: list[str], refused: list[str]) -> RevokeReport:
        if stored and self._store is not None and not await self._store.remove(stored):
            refused.append(f"{', '.join(stored)}: revoked until main stops, but the rule store could not be "
                           "changed: they come back when main restarts")
        return RevokeReport(revoked=revoked, refused=refused)

    def set_config_rules(self, rules: Iterable[Rule], identities: Mapping[str, str] | None = None) -> None:
        """After a reload: the config's rules replace the old ones, and `identities` (the servers'
        programs) the old ones: a rule given to a program no longer configured stops applying."""
        self.book.set_config(rules)
        if identities is not None:
            self._identities = dict(identities)
            for rule in self.book.user_rules():
                if rule.party == "server" and rule.identity is None:  # unbound until its server came
                    self.book.add(self._bound(rule))
        self._misfits.clear()
        self._publish()

    async def reload_stored(self) -> None:
        """Another main of a shared store changed the stored rules (a wake-up, consent/shared_requests.py):
        memory follows the store, so a rule remembered on any main applies here, and one revoked
        anywhere stops applying. Session rules are this main's and stay. Unreadable: kept as it was."""
        if self._store is None:
            return
        try:
            stored = {rule.id: rule for rule in await self._store.load(self.now())}
        except RuleStoreError as exc:
            logger.warning("%s; the rules in memory stay as they were", exc)
            return
        changed = False
        for rule in self.book.user_rules():
            if rule.scope != "session" and rule.id not in stored:
                self.book.remove(rule.id)
                changed = True
        for rule in stored.values():
            if self.book.get(rule.id) != rule:
                self.book.add(rule)
                changed = True
        if changed:
            logger.info("stored rules changed on another main: %d remembered rules now", len(stored))
            self._expiry.schedule()
            self._publish()

    def _bound(self, rule: Rule) -> Rule:
        """A rule stored before rules were bound (schema 1: no party, no identity), bound now: to the
        program configured under its name, or (an answer rule of a name no server has) to the
        asker of that name. A tool rule of a server not configured stays unbound (it applies to
        nothing) until a server of that name is. The binding is stored."""
        if rule.source != "user" or rule.party != "server" or rule.identity is not None:
            return rule
        identity = self._identities.get(rule.server)
        if identity is not None:
            bound = dataclasses.replace(rule, identity=identity)
        elif rule.kind == "answer":
            bound = dataclasses.replace(rule, party="asker")
        else:
            return rule
        if self._store is not None:
            self._write(self._store.add(bound), lambda: logger.warning(
                "rule %s: bound for this session only (the rule store could not be changed)", rule.id))
        logger.info("rule %s, stored before rules were bound, is bound to %s %s", rule.id,
                    "the program configured as server" if bound.party == "server" else "the asker", rule.server)
        return bound

    # ---- the gate's Rules (elicitation_gate.py), then pending's RuleHook: elicitations ----------------

    def answer_for(self, elicitation: Elicitation) -> tuple[str, ElicitationResult] | None:
        """A server's form request answered by a rule given to that server's program, or None."""
        if not self.book.has_answer_rules(elicitation.server):
            return None  # the common case: one set lookup
        return self._answer(elicitation.server, "server", elicitation.params)

    def policy_declines(self, server: str, host: str) -> tuple[str, str | None] | None:
        """(audit id, reason) of the policy that forbids `server` eliciting in `host`'s relayed session,
        or None (policy/hook.py: only a forbid decides an elicitation)."""
        policy = policy_hook.declining(self.policies.elicitation(host, server))
        return None if policy is None else (policy_hook.audit_id(policy), policy.reason)

    def answer_asker(self, asker: str, params: ElicitParams) -> tuple[str, ElicitationResult] | None:
        """A program's form question answered by a rule given to that asker (never a server's), or None."""
        if not self.book.has_answer_rules(asker, "asker"):
            return None
        return self._answer(asker, "asker", params)

    def _answer(self, name: str, party: Party, params: ElicitParams) -> tuple[str, ElicitationResult] | None:
        now = self.now()
        identity = self._identities.get(name) if party == "server" else None
        for rule in self.book.answer_candidates(name, params, party=party, identity=identity):
            if rule.expired(now):
                self._expiry.drop()
                continue
            answer = self._replay(rule, name, params)
            if answer is not None:
                logger.debug("rule %s answered %s's request with %s", rule.id, name, answer.action)
                return rule.id, answer
        return None

    def _replay(self, rule: Rule, server: str, params: ElicitParams) -> ElicitationResult | None:
        """The rule's answer checked against this request's schema; None (and a notice, once) if it
        does not fit."""
        assert rule.answer is not None
        if rule.answer.action != "accept":
            return ElicitationResult(action=rule.answer.action)
        content = dict(rule.answer.content or {})
        try:
            validate_content(params.requested_schema if isinstance(params, FormParams) else {}, content)
        except InvalidContentError as exc:
            key = (rule.id, question_key(params) or "")
            if key not in self._misfits:
                self._misfits.add(key)
                text = (f"rule {rule.id} skipped: its answer does not fit this request ({exc}); "
                        "asking in the windows instead")
                logger.warning("%s: %s", server, text)
                self._ports.publish_notice("warning", text, server)
            return None
        return ElicitationResult(action="accept", content=content)

    def check_remember(self, pending: PendingRequest, result: ElicitationResult) -> None:
        remember = result.remember
        assert remember is not None
        invoke = pending.invoke
        channel = invoke.response_channel
        if invoke.kind not in _REMEMBERED_KINDS:
            raise ProtocolError(WireCode.BAD_BODY, f"a {invoke.kind} request is not remembered this way "
                                "(approvals carry their scope in `decision`)", channel)
        if question_key(pending.params) is None:
            raise ProtocolError(WireCode.BAD_BODY, "URL-mode requests are never remembered", channel)
        if result.action == "cancel":
            raise ProtocolError(WireCode.BAD_BODY, "a cancel is not remembered: remember an accept or a decline",
                                channel)
        if remember.scope == "until":
            if remember.until is None or remember.until <= self.now():
                raise ProtocolError(WireCode.BAD_BODY, "remember.until must be a time in the future (epoch ms)",
                                    channel)
        elif remember.until is not None:
            raise ProtocolError(WireCode.BAD_BODY, "remember.until goes only with scope \"until\"", channel)

    def check_grant(self, pending: PendingRequest, result: ElicitationResult) -> None:
        """Raise ProtocolError for a `grant` main cannot make (before the answer is taken)."""
        grant = result.grant
        assert grant is not None
        invoke = pending.invoke
        channel = invoke.response_channel
        if invoke.kind != "approval" or invoke.approval is None or invoke.quorum is not None:
            raise ProtocolError(WireCode.BAD_BODY, "`grant` goes only with an approval (not a quorum's)", channel)
        decision = approvals.decision_of(result)
        if result.action != "accept" or decision not in approvals.GRANT_DECISIONS:
            raise ProtocolError(WireCode.BAD_BODY, "`grant` goes only with decision allow-session or allow-always",
                                channel)
        if (grant.duration == "session") != (decision == "allow-session"):
            raise ProtocolError(WireCode.BAD_BODY, "a session grant goes with allow-session, any other with "
                                "allow-always", channel)
        try:
            grants.coverage_of(grant, invoke.approval.arguments, self.now())
        except grants.GrantError as exc:  # the person can fix it on the card: asked again (PROTOCOL.md §11)
            raise ProtocolError(WireCode.INVALID_CONTENT, str(exc), channel) from None

    def answered(self, pending: PendingRequest, answer: ElicitationResult, remember: Remember | None,
                 routing_id: bytes, window: str, requests: PendingRequests) -> None:
        """A window's answer was taken: what it remembers becomes a rule, which also answers the
        other `requests` it covers."""
        invoke = pending.invoke
        server = invoke.request.server
        if invoke.kind == "approval":
            choice = approvals.grant_of(answer)
            if choice is not None and invoke.approval is not None:
                try:
                    self.grant(invoke, choice, self._who(routing_id, window), requests)
                except grants.GrantError as exc:  # checked before the answer was taken; a race at most
                    logger.warning("%s/%s: no grant made: %s", server, invoke.approval.tool, exc)
                    self._ports.publish_notice("warning", f"not remembered: {exc}", server)
            return
        if remember is None:
            return
        params = pending.params
        rule = self._new_rule(
            server, self._who(routing_id, window), remember.scope, remember.until,
            answer=answer, question=question_key(params), message=params.message,
            fields=schema_fields(params), party=_party_of(invoke))
        if rule.party == "asker":
            self._add(rule, requests)
        else:
            self._add_for_server(server, rule, requests)

    def grant(self, invoke: ElicitationInvoke, choice: GrantChoice, who: str, requests: PendingRequests) -> None:
        """An approval's allow that covers more than its own call (grants.py): the arguments chosen,
        for as long as chosen; a session grant covers the host whose card it was (its link id).
        Raises GrantError when the choice does not fit the call."""
        approval = invoke.approval
        assert approval is not None
        coverage = grants.coverage_of(choice, approval.arguments, self.now())
        session = choice.duration == "session"
        scope, until = {"session": ("session", None), "hour": ("until", self.now() + grants.HOUR_MS),
                        "until": ("until", choice.until), "always": ("always", None)}[choice.duration]
        self._add_for_server(invoke.request.server, self._new_rule(
            invoke.request.server, who, scope, until, tool=approval.tool, decision="allow",
            host=invoke.origin if session else None, host_name=(invoke.via or invoke.origin) if session else None,
            coverage=coverage, single_use=choice.single_use), requests)

    def tool_rule(self, server: str, tool: str, arguments: Mapping[str, Any], host: str | None) -> Rule | None:
        """The rule that decides this call of `host` (its link id), or None: one given to the
        program configured as `server` now, covering these arguments, not expired."""
        identity = self._identities.get(server)
        rule = self.book.tool_rule(server, tool, host=host, identity=identity, arguments=arguments)
        if rule is not None and rule.expired(self.now()):
            self._expiry.drop()
            rule = self.book.tool_rule(server, tool, host=host, identity=identity, arguments=arguments)
        return rule

    def use(self, rule: Rule) -> Callable[[], Awaitable[bool | None]] | None:
        """A rule is about to decide a call. None: it decides it (any rule but a single-use grant;
        a single-use grant is gone from memory from here on). For a stored single-use grant, what
        says whether this main took it from the store: only True lets it decide (False: another
        main of a shared store used it first; None: the store could not be asked)."""
        if not rule.single_use:
            return None
        if self.book.remove(rule.id) is not None:
            logger.info("single-use grant %s used", rule.id)
            self._expiry.schedule()
            self._publish()
        if self._store is None or rule.scope == "session":
            return None
        return functools.partial(self._store.take, rule.id)

    def _add_for_server(self, server: str, rule: Rule, requests: PendingRequests) -> None:
        """Add a server's rule bound to its program now; none if no server of that name is configured
        any more (a request answered after its server was removed in a reload)."""
        identity = self._identities.get(server)
        if identity is None:
            logger.warning("rule not made: server %r is no longer configured", server)
            self._ports.publish_notice("warning", "not remembered: this server is no longer configured", server)
            return
        self._add(dataclasses.replace(rule, identity=identity), requests)

    # ---- adding rules -----------------------------------------------------------------

    def _new_rule(self, server: str, who: str, scope: str, until: int | None, **what: Any) -> Rule:
        rule_id = "r-" + secrets.token_hex(4)
        while self.book.get(rule_id) is not None:
            rule_id = "r-" + secrets.token_hex(4)
        return Rule(id=rule_id, source="user", server=server, created_at=self.now(), created_by=who,
                    scope=scope, expires_at=until if scope == "until" else None, **what)  # type: ignore[arg-type]

    def _add(self, rule: Rule, requests: PendingRequests) -> None:
        replaced = self.book.add(rule)
        if self._store is not None:
            if rule.scope != "session":
                self._write(self._store.add(rule), lambda: self._ports.publish_notice(
                    "error", "the rule could not be saved; it applies until main stops", rule.server))
            if replaced is not None and replaced.scope != "session":
                self._write(self._store.remove([replaced.id]))
        logger.info("new rule %s (%s, %s) for %s, made by %s", rule.id, rule.kind, rule.scope, rule.server,
                    rule.created_by)
        self._expiry.schedule()
        self._answer_open(rule, requests)
        self._publish()

    def _answer_open(self, rule: Rule, pending: PendingRequests) -> None:
        """Answer the open requests the new rule covers."""
        for item in pending.all():
            invoke = item.invoke
            if item.server != rule.server:
                continue
            if rule.kind == "answer" and invoke.kind in _REMEMBERED_KINDS and _party_of(invoke) == rule.party \
                    and question_key(item.params) == rule.question:
                answer = self._replay(rule, rule.server, item.params)
                if answer is not None:
                    pending.close_by_rule(item, answer, rule.id)
            elif rule.kind == "tool" and invoke.kind == "approval" and invoke.approval is not None \
                    and invoke.quorum is None and invoke.approval.tool == rule.tool and rule.host in (None, invoke.origin) \
                    and not rule.single_use and rule.coverage.matches(invoke.approval.arguments):
                # (a single-use grant covers one later call, never a card already open)
                decision = rule_decision(rule)
                pending.close_by_rule(item, ElicitationResult(action="accept", content={DECISION_PROPERTY: decision}),
                                      rule.id)

    # ---- helpers ----------------------------------------------------------------------

    def _who(self, routing_id: bytes, window: str) -> str:
        peer = self._ports.peer(routing_id)
        return f"{peer.name} ({window})" if peer is not None and peer.name else window

    def _publish(self) -> None:
        self._ports.publish_rules(self.infos())


def rule_decision(rule: Rule) -> ApprovalDecision:
    if rule.decision == "deny":
        return "deny"
    return "allow-session" if rule.scope == "session" else "allow-always"
