"""Every message a peer sends, from the sockets to what acts on it.

Every frame is split first and its body decoded only once main knows it will act on it: a result
for a closed or foreign channel, or anything from a peer over its rate, is refused undecoded. Then
`hello` goes to the greeter, a result channel to the pending requests, and any other topic, its
sender's role checked against its row, to its handler (topic_routes.py).
"""

import logging
from collections.abc import Callable, Mapping
from typing import Protocol, cast

from main_process.clock import Clock
from main_process.consent.pending import PendingRequests
from main_process.log_limiter import RateLimitedLog, cut
from main_process.wire.attachments import Attachments
from main_process.wire.greeter import Greeter
from main_process.wire.peers import Peer, RateLimiter
from main_process.wire.replies import Replies
from main_process.wire.topic_routes import Route
from shared import channels
from shared.codec import decode_peer_body, encode, split_from_peer
from shared.errors import ProtocolError, WireCode
from shared.messages import ErrorNotice, Hello

logger = logging.getLogger(__name__)


class _Request(Protocol):
    """A body answered on its response channel (a row with `reply`)."""

    @property
    def response_channel(self) -> str: ...


class Inbound:
    def __init__(self, attachments: Attachments, greeter: Greeter, pending: PendingRequests, replies: Replies, *,
                 routes: Mapping[str, Route], handlers: Mapping[str, Callable[..., None]], limiter: RateLimiter,
                 max_body_bytes: int, clock: Clock) -> None:
        self._attachments = attachments
        self._greeter = greeter
        self._pending = pending
        self._replies = replies
        self._routes = routes
        self._handlers = handlers
        self._limiter = limiter
        self._max_body = max_body_bytes
        self._clock = clock
        self._complaints = RateLimitedLog(logger)

    def receive(self, frames: list[bytes]) -> None:
        """One message: [routing id, topic, body, ...]."""
        routing_id = frames[0]
        peer = self._attachments.get(routing_id)
        now = self._clock.now()
        if peer is not None:
            peer.last_seen = now  # any message counts, even one we refuse or drop
        # Bytes count only for a body main may read: an oversized one is refused unread.
        body_bytes = len(frames[-1]) if len(frames[-1]) <= self._max_body else 0
        if not self._limiter.allow(routing_id, body_bytes, now):
            if self._limiter.should_warn(routing_id, now):
                self._complaints.warning(("rate", routing_id.hex() if peer else "unattached"),
                                         "dropping messages from %s (%r): over its rate", routing_id.hex(),
                                         cut(peer.name) if peer else "unattached")
                self._send_error(routing_id, ProtocolError(
                    WireCode.RATE_LIMITED, "too many messages; some were dropped unread"))
            return
        try:
            topic, raw = split_from_peer(frames[1:], self._max_body)
            if topic == channels.HELLO:
                hello = decode_peer_body(topic, raw)
                assert isinstance(hello, Hello)
                self._greeter.hello(routing_id, hello)
            elif peer is None:
                raise ProtocolError(WireCode.NOT_ATTACHED, "send a valid hello first", topic)
            elif channels.is_result_channel(topic):
                self._pending.answer(routing_id, peer.window, topic, raw)
            else:
                self._dispatch(peer, topic, raw)
        except ProtocolError as err:
            self._refuse(routing_id, err)

    def _dispatch(self, peer: Peer, topic: str, raw: bytes) -> None:
        """A welcomed peer's message on a fixed topic, as its row says: decoded, checked, handled."""
        row = self._routes[topic].row
        body = decode_peer_body(topic, raw)
        if peer.role not in row.roles:
            allowed = " or ".join(f'"{role}"' for role in sorted(row.roles))
            raise ProtocolError(WireCode.BAD_BODY, f"{topic} is for peers with role {allowed}", topic)
        if row.reply:
            # First: a refused channel starts no work.
            reply = self._replies.replier(peer, topic, cast(_Request, body).response_channel)
            self._handlers[topic](peer, body, reply)
        else:
            self._handlers[topic](peer, body)

    def _refuse(self, routing_id: bytes, err: ProtocolError) -> None:
        # Unattached peers share one rate-limit key, so reconnecting per frame cannot flood the log;
        # %r and cut() keep control characters and megabytes in a peer's topic out of the log.
        who = routing_id.hex() if routing_id in self._attachments else "unattached peers"
        self._complaints.warning((err.code, who), "refused %r from %s: %r", cut(err.topic or "frame"),
                                 routing_id.hex(), cut(err.message, 200))
        self._send_error(routing_id, err)

    def _send_error(self, routing_id: bytes, err: ProtocolError) -> None:
        self._attachments.send_frames(routing_id, encode(channels.ERROR, ErrorNotice(
            code=err.code, message=err.message, topic=err.topic)))
        self._attachments.flush()
