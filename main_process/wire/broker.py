"""The ROUTER side of the wire contract, put together: the wire (wire.py), the pending requests
and the gate, what each topic does, and the ports the rest of main is given.

Made in two steps, so that nothing is wired after it is made: `Broker(wire, ...)` makes the
requests' side (what servers, consent and relayed sessions are given: `server_ports`,
`relay_ports`), and `start(receivers)` starts reading, handing each message and event to what
main made meanwhile (its servers, consent layer, questions, relayed sessions).

Each job is its own module: router_sockets.py (frames in and out, the drain), attachments.py (who
is attached, sends, liveness, the `peers` list), greeter.py (hello and welcome), inbound.py (every
message to what acts on it), topic_routes.py and the *_topics.py handler groups (what each topic
does, by area), replies.py (answers on response channels), broker_ports.py (what servers, consent
and relayed sessions are given). The pending requests themselves live in `pending.PendingRequests`.
"""

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from main_process.consent.audit_writer import AuditWriter
from main_process.consent.elicitation_gate import ElicitationGate, Rules
from main_process.consent.pending import WELCOME_PENDING_BYTES, PendingRequest, PendingRequests, RuleHook
from main_process.store.interface import AuditTable
from main_process.wire.attachments import PEERS_COALESCE_S
from main_process.wire.audit_topics import AuditTopics
from main_process.wire.broker_ports import RelaySide, ServerSide, ServerWatcher
from main_process.wire.call_topics import CallPorts, CallTopics
from main_process.wire.consent_topics import RulePorts, RuleTopics
from main_process.wire.control_topics import ControlTopics, ServerControlPorts
from main_process.wire.greeter import Greeter
from main_process.wire.inbound import Inbound
from main_process.wire.peer_topics import PeerTopics
from main_process.wire.peers import Peer, RateLimiter
from main_process.wire.question_topics import QuestionPorts, QuestionTopics
from main_process.wire.relay_topics import RelayTopicPorts, RelayTopics
from main_process.wire.replies import Replies
from main_process.wire.router_sockets import DRAIN_BUDGET, ZAP_DOMAIN, Listener
from main_process.wire.topic_routes import ProgressTo, ReplyTo, Route, bind, routes
from main_process.wire.wire import Wire
from shared.event_loop import describe as describe_loop
from shared.messages import (
    ChannelReply,
    HttpGatewayStatus,
    ListenerStatus,
    ListName,
    NotifyStatus,
    PolicyStatus,
    ServerInfo,
    ServerPolicy,
    StatusReport,
    StoreState,
    WebWindowStatus,
)

__all__ = ["DRAIN_BUDGET", "PEERS_COALESCE_S", "TOPICS", "ZAP_DOMAIN", "Broker", "ConsentRules", "Listener",
           "ProgressTo", "Receivers", "ReplyTo", "StatusSources"]

# Every topic a peer sends, with its handler: every *_topics module is imported above.
TOPICS: Final[dict[str, Route]] = routes()


class ConsentRules(RuleHook, Rules, Protocol):
    """The consent layer as the requests see it: the gate asks it first, pending tells it each answer."""


class RelayReceiver(RelayTopicPorts, Protocol):
    def peer_gone(self, routing_id: bytes) -> None:
        """A peer detached (after its calls and requests were cancelled): its sessions end."""


class _NoWatcher:
    """Receivers with no merged sessions (tests, the bench)."""

    def servers_changed(self, servers: list[ServerInfo]) -> None:
        pass

    def lists_changed(self, server: str, lists: list[ListName]) -> None:
        pass


_NO_WATCHER: Final = _NoWatcher()


@dataclass(frozen=True)
class Receivers:
    """What the broker hands each message and event to, given at `start`: reading begins only once
    they all exist."""

    calls: CallPorts  # msgMcpCallTool, msgMcpRequest
    servers: ServerControlPorts  # msgServerControl, msgAuth, msgSignInRedirect
    server_policy: Callable[[ServerPolicy, Peer], None]  # msgServerPolicy
    reload: Callable[[str | None], Awaitable[ChannelReply]]  # msgReload
    shutdown: Callable[[], None]  # msgShutdown
    rules: RulePorts  # msgRules, msgRevokeRules
    questions: QuestionPorts  # msgAsk, msgWithdraw
    relay: RelayReceiver  # msgMcpRelay, msgMcpClose, and a detached peer's sessions
    merged: ServerWatcher = _NO_WATCHER  # main's merged sessions follow the servers


def _none_listening() -> list[ListenerStatus]:
    return []


def _no_notify() -> list[NotifyStatus]:
    return []


@dataclass(frozen=True)
class StatusSources:
    """What msgStatus reports of the parts main runs beside the broker, each when main runs it."""

    http_gateway: Callable[[], HttpGatewayStatus] | None = None  # main --mcp-http
    rotate_http_token: Callable[[], Awaitable[None]] | None = None  # main --mcp-http
    listeners: Callable[[], list[ListenerStatus]] = field(default=_none_listening)  # --listen tcp://
    notify: Callable[[], list[NotifyStatus]] = field(default=_no_notify)  # the config's `notify`
    web_window: Callable[[], WebWindowStatus] | None = None  # main --web
    policies: Callable[[], PolicyStatus | None] | None = None  # the config's `policies`
    store: Callable[[], StoreState] | None = None  # main's store (store/interface.py: Store.status)


class Broker:
    """The requests' side over `wire`. Made on main's running loop; `start` to read."""

    def __init__(
        self,
        wire: Wire,
        *,
        token: str,
        session: str,
        audit: AuditTable | None = None,
        rules: ConsentRules | None = None,
        opened: Callable[[PendingRequest, bool], None] | None = None,
        unseen: Callable[[PendingRequests], None] = lambda requests: None,
        status: StatusSources = StatusSources(),
        limiter: RateLimiter | None = None,
        welcome_pending_bytes: int = WELCOME_PENDING_BYTES,
    ) -> None:
        """`rules`: the consent layer (None: no rule answers); `opened`: told of each request that
        opened for the windows (main's `notify` webhooks); `unseen`: told when one reached no window
        (auto-open)."""
        loop = asyncio.get_running_loop()
        self.wire = wire
        self.endpoint = wire.endpoint
        self.session = session
        self._token = token
        self._loop = loop
        self._status = status
        self._limiter = limiter or RateLimiter()
        attachments = wire.attachments
        self._audit = AuditWriter(audit, loop) if audit is not None else None
        self.pending = PendingRequests(attachments, loop, audit=self._audit, unseen=unseen,
                                       welcome_pending_bytes=welcome_pending_bytes,
                                       window_name=attachments.window_name, window_device=attachments.window_device,
                                       window_user=attachments.window_user,
                                       clock=wire.clock, rules=rules, opened=opened)
        self.gate = ElicitationGate(self.pending, rules)  # what becomes of every elicitation before it opens
        self.server_ports = ServerSide(attachments, wire.server_infos, wire.server_watch, self.pending, self.gate)
        self.relay_ports = RelaySide(attachments, wire.publisher, self.pending, self.gate)
        self._replies = Replies(attachments)

    def start(self, receivers: Receivers) -> None:
        """Read from now on: each topic to its handler group, over `receivers`."""
        wire, replies = self.wire, self._replies
        groups: list[object] = [
            PeerTopics(wire.attachments), CallTopics(receivers.calls, replies),
            ControlTopics(receivers.servers, replies, status=self.status_report, reload=receivers.reload,
                          shutdown=receivers.shutdown, server_policy=receivers.server_policy,
                          rotate_http_token=self._status.rotate_http_token),
            RuleTopics(receivers.rules, replies), QuestionTopics(receivers.questions), RelayTopics(receivers.relay),
            AuditTopics(self._audit, replies)]
        greeter = Greeter(wire.attachments, self.pending, token=self._token, session=self.session,
                          max_body_bytes=wire.max_body_bytes, server_infos=wire.server_infos, clock=wire.clock)
        inbound = Inbound(wire.attachments, greeter, self.pending, replies, routes=TOPICS,
                          handlers=bind(TOPICS, groups), limiter=self._limiter, max_body_bytes=wire.max_body_bytes,
                          clock=wire.clock)
        wire.server_watch.add(receivers.merged)
        wire.attachments.start(lambda peer: self._detached(peer, receivers.relay, receivers.questions))
        wire.sockets.start(inbound.receive)

    async def close(self) -> None:
        """Its tasks end and every queued audit row reaches the store (the wire is closed by its owner)."""
        self._replies.close()
        if self._audit is not None:
            await self._audit.close()

    def _detached(self, peer: Peer, relay: RelayReceiver, questions: QuestionPorts) -> None:
        self.pending.withdraw_owner(peer.routing_id, "host-gone" if peer.role == "host" else "cancelled")
        questions.asker_gone(peer.routing_id)
        relay.peer_gone(peer.routing_id)

    def status_report(self) -> StatusReport:
        status = self._status
        return StatusReport(session=self.session, pid=os.getpid(), endpoint=self.endpoint,
                            servers=self.wire.server_infos(), peers=self.wire.attachments.infos(),
                            pending=self.pending.summaries(), event_loop=describe_loop(self._loop),
                            mcp_http=None if status.http_gateway is None else status.http_gateway(),
                            listeners=status.listeners(), notify=status.notify(),
                            web_window=None if status.web_window is None else status.web_window(),
                            policies=None if status.policies is None else status.policies(),
                            store=None if status.store is None else status.store())
