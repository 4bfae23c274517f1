"""Liveness topics: `heartbeat` (its arrival is the point) and `bye`."""

from main_process.wire.attachments import Attachments
from main_process.wire.peers import Peer
from main_process.wire.topic_routes import handles
from shared import channels
from shared.messages import Bye, Heartbeat


class PeerTopics:
    def __init__(self, attachments: Attachments) -> None:
        self._attachments = attachments

    @handles(channels.HEARTBEAT)
    def _on_heartbeat(self, peer: Peer, body: Heartbeat) -> None:
        pass  # the broker noted the peer as alive on arrival

    @handles(channels.BYE)
    def _on_bye(self, peer: Peer, body: Bye) -> None:
        self._attachments.detach(peer, "said bye")
