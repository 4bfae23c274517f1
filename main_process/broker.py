"""The ROUTER side of the wire contract, put together: main's sockets, who is attached, what each
topic does, and the ports the rest of main is given.

Each job is its own module: router_sockets.py (frames in and out, the drain), attachments.py (who
is attached, sends, liveness, the `peers` list), greeter.py (hello and welcome), inbound.py (every
message to what acts on it), topic_routes.py and the *_topics.py handler groups (what each topic
does, by area), replies.py (answers on response channels), broker_ports.py (what servers, consent
and relayed sessions are given). The pending requests themselves live in `pending.PendingRequests`.
"""

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, Protocol

from main_process.attachments import PEERS_COALESCE_S, Attachments
from main_process.audit_writer import AuditWriter
from main_process.broker_ports import ConsentSide, Publisher, RelaySide, ServerSide
from main_process.call_topics import CallPorts, CallTopics
from main_process.clock import MONOTONIC, Clock
from main_process.consent_topics import RulePorts, RuleTopics
from main_process.control_topics import ControlPorts, ControlTopics
from main_process.elicitation_gate import ElicitationGate
from main_process.greeter import Greeter
from main_process.inbound import Inbound
from main_process.peer_topics import PeerTopics
from main_process.peers import PEER_SLOTS, Peer, RateLimiter
from main_process.pending import WELCOME_PENDING_BYTES, PendingRequests
from main_process.question_topics import QuestionPorts, QuestionTopics
from main_process.relay_topics import RelayTopicPorts, RelayTopics
from main_process.replies import Replies
from main_process.router_sockets import DRAIN_BUDGET, ZAP_DOMAIN, Listener, RouterSockets
from main_process.store.interface import AuditTable
from main_process.topic_routes import ProgressTo, ReplyTo, Route, bind, routes
from shared.codec import DEFAULT_MAX_BODY_BYTES
from shared.event_loop import describe as describe_loop
from shared.messages import (
    HttpGatewayStatus,
    ListenerStatus,
    NotifyStatus,
    PeerInfo,
    Role,
    ServerInfo,
    StatusReport,
    WebWindowStatus,
)

__all__ = ["DRAIN_BUDGET", "PEERS_COALESCE_S", "TOPICS", "ZAP_DOMAIN", "Broker", "BrokerPorts", "Listener",
           "ProgressTo", "ReplyTo"]

# Every topic a peer sends, with its handler: every *_topics module is imported above.
TOPICS: Final[dict[str, Route]] = routes()


class BrokerPorts(CallPorts, ControlPorts, RulePorts, QuestionPorts, RelayTopicPorts, Protocol):
    """The ports the broker is made with (main's app): what its topics act on, and three hooks. A
    method that acts for a peer gets it as `caller`, looked up once per message by the broker."""

    def server_infos(self) -> list[ServerInfo]: ...

    def no_window_attached(self) -> None:
        """An elicitation arrived and no renderer is attached (auto-open hook)."""

    def peer_gone(self, peer: Peer) -> None:
        """A peer detached (after its calls and requests were cancelled)."""


class Broker:
    """main's side of the wire. Made on main's running loop; `bind`, then `start` to read."""

    def __init__(
        self,
        *,
        endpoint: str,
        token: str,
        remote: Listener | None = None,
        session: str,
        ports: BrokerPorts,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        heartbeat_s: float = 1.0,
        peer_timeout_s: float = 5.0,
        audit: AuditTable | None = None,
        peer_slots: Mapping[Role, int] = PEER_SLOTS,
        limiter: RateLimiter | None = None,
        welcome_pending_bytes: int = WELCOME_PENDING_BYTES,
        clock: Clock = MONOTONIC,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.endpoint = endpoint
        self.session = session
        self._ports = ports
        self._loop = loop
        self.http_gateway_status: Callable[[], HttpGatewayStatus] | None = None  # main --mcp-http
        self.rotate_http_token: Callable[[], Awaitable[None]] | None = None  # main --mcp-http
        self.listener_status: Callable[[], list[ListenerStatus]] | None = None  # main --listen tcp://
        self.notify_status: Callable[[], list[NotifyStatus]] | None = None  # the config's `notify`
        self.web_window_status: Callable[[], WebWindowStatus] | None = None  # main --web
        self.listeners = [Listener(endpoint)] + ([remote] if remote is not None else [])
        self._sockets = RouterSockets(self.listeners, max_body_bytes=max_body_bytes, heartbeat_s=heartbeat_s,
                                      peer_timeout_s=peer_timeout_s)
        self.attachments = attachments = Attachments(
            self._sockets, detached=self._detached, clock=clock, heartbeat_s=heartbeat_s,
            peer_timeout_s=peer_timeout_s, peer_slots=peer_slots)
        self._audit = AuditWriter(audit, loop) if audit is not None else None
        self.pending = PendingRequests(attachments, loop, audit=self._audit, unseen=ports.no_window_attached,
                                       welcome_pending_bytes=welcome_pending_bytes,
                                       window_name=attachments.window_name, window_device=attachments.window_device,
                                       clock=clock)
        self.gate = ElicitationGate(self.pending)  # what becomes of every elicitation before it opens
        self.publisher = Publisher(attachments, ports.server_infos)
        self.server_ports = ServerSide(attachments, ports.server_infos, self.pending, self.gate)
        self.consent_ports = ConsentSide(attachments, ports.server_infos, self.pending)
        self.relay_ports = RelaySide(attachments, self.publisher, self.pending, self.gate)
        self._replies = replies = Replies(attachments)
        greeter = Greeter(attachments, self.pending, token=token, session=session, max_body_bytes=max_body_bytes,
                          server_infos=ports.server_infos, clock=clock)
        groups: list[object] = [
            PeerTopics(attachments), CallTopics(ports, replies),
            ControlTopics(ports, replies, status=self.status_report, rotate_http_token=lambda: self.rotate_http_token),
            RuleTopics(ports, replies), QuestionTopics(ports), RelayTopics(ports)]
        self._inbound = Inbound(attachments, greeter, self.pending, replies, routes=TOPICS, handlers=bind(TOPICS, groups),
                                limiter=limiter or RateLimiter(), max_body_bytes=max_body_bytes, clock=clock)

    def bind(self) -> None:
        self._sockets.bind()

    def start(self) -> None:
        self.attachments.start()
        self._sockets.start(self._inbound.receive)

    async def close(self) -> None:
        self._replies.close()
        self.attachments.close()
        self._sockets.close()
        if self._audit is not None:
            await self._audit.close()  # every queued row reaches the store

    def _detached(self, peer: Peer) -> None:
        self.pending.withdraw_owner(peer.routing_id)
        self._ports.peer_gone(peer)

    def peers(self) -> list[PeerInfo]:
        return self.attachments.infos()

    def host_peer(self, window: str) -> Peer | None:
        """The attached peer with that hello window, if it is a host."""
        peer = self.attachments.by_window(window)
        return peer if peer is not None and peer.role == "host" else None

    def status_report(self) -> StatusReport:
        return StatusReport(session=self.session, pid=os.getpid(), endpoint=self.endpoint,
                            servers=self._ports.server_infos(), peers=self.attachments.infos(),
                            pending=self.pending.summaries(), event_loop=describe_loop(self._loop),
                            mcp_http=None if self.http_gateway_status is None else self.http_gateway_status(),
                            listeners=[] if self.listener_status is None else self.listener_status(),
                            notify=[] if self.notify_status is None else self.notify_status(),
                            web_window=None if self.web_window_status is None else self.web_window_status())
