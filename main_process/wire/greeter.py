"""`hello` and `welcome`: the one topic a peer sends before it is attached.

A hello with the wrong protocol or token is refused, and a routing id that keeps guessing gets no
more answers for a while. A welcomed window gets the requests waiting for it (some in the welcome,
the rest right after), and every peer gets the current `peers` list right after its welcome (a
window then knows whose requests are whose before it shows a card); the coalesced list that
follows reaches the newcomer too: a peer can count on exactly two.
"""

import logging
from collections.abc import Callable
from typing import Final

from main_process.clock import Clock
from main_process.consent.pending import PendingRequests
from main_process.log_limiter import cut
from main_process.wire.attachments import Attachments
from main_process.wire.peers import Peer
from shared import PROTOCOL_VERSION, channels
from shared.codec import encode_welcome
from shared.errors import ProtocolError, WireCode
from shared.messages import Hello, ServerInfo, Welcome

logger = logging.getLogger(__name__)

_BAD_HELLO_LIMIT: Final = 3  # per routing id within _BAD_HELLO_WINDOW_S; further hellos are ignored
_BAD_HELLO_WINDOW_S: Final = 10.0


class Greeter:
    def __init__(self, attachments: Attachments, pending: PendingRequests, *, token: str, session: str,
                 max_body_bytes: int, server_infos: Callable[[], list[ServerInfo]], clock: Clock) -> None:
        self._attachments = attachments
        self._pending = pending
        self._token = token
        self._session = session
        self._max_body = max_body_bytes
        self._server_infos = server_infos
        self._clock = clock
        self._bad_hellos: dict[bytes, tuple[float, int]] = {}

    def hello(self, routing_id: bytes, hello: Hello) -> None:
        """Attach the peer and welcome it, or raise the ProtocolError to refuse it with."""
        if hello.protocol != PROTOCOL_VERSION or hello.token != self._token:
            if self._throttled(routing_id):
                return  # a guessing peer gets no more answers for a while
            if hello.protocol != PROTOCOL_VERSION:
                err = ProtocolError(WireCode.BAD_PROTOCOL, f"main speaks protocol {PROTOCOL_VERSION}", channels.HELLO)
            else:
                err = ProtocolError(WireCode.BAD_TOKEN, "the token does not match this main's connection file",
                                    channels.HELLO)
            raise err  # a welcomed peer stays attached: bad frames never detach
        peer = Peer(routing_id, hello.window, hello.name, hello.role, self._clock.now(),
                    device=hello.device if hello.role == "renderer" else None,  # only a window answers for one
                    user=hello.user if hello.role == "renderer" else None)
        attachments = self._attachments
        try:
            attachments.attach(peer)
        except ProtocolError as err:
            err.topic = channels.HELLO
            raise
        welcome = Welcome(session=self._session, window=hello.window, servers=self._server_infos(), pending=[],
                          max_message_bytes=self._max_body, peers=attachments.infos())
        delivered = 0
        if peer.role == "renderer":
            in_welcome, after, open_channels = self._pending.deliver_on_attach(routing_id)
            welcome.pending_channels = open_channels
            attachments.send_frames(routing_id, encode_welcome(welcome, in_welcome))
            for pending in after:
                attachments.send_frames(routing_id, pending.frames)
            delivered = len(open_channels)
        else:
            attachments.send_frames(routing_id, encode_welcome(welcome, []))
        attachments.send_peers(routing_id, welcome.peers or [])  # for a v1 window, which reads no welcome.peers
        attachments.flush()
        logger.info("attached %s %r (%r), %d pending delivered", peer.role, cut(peer.name), cut(peer.window),
                    delivered)
        attachments.peers_changed()

    def _throttled(self, routing_id: bytes) -> bool:
        now = self._clock.now()
        first, count = self._bad_hellos.get(routing_id, (now, 0))
        if now - first > _BAD_HELLO_WINDOW_S:
            first, count = now, 0
        self._bad_hellos[routing_id] = (first, count + 1)
        if len(self._bad_hellos) > 10_000:
            self._bad_hellos.clear()
        return count >= _BAD_HELLO_LIMIT
