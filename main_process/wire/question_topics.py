"""Extension msgAsk: a program's questions, owned by the asking peer (questions.py)."""

from typing import Protocol

from main_process.wire.peers import Peer
from main_process.wire.topic_routes import ReplyTo, handles
from shared import channels
from shared.messages import Ask, Withdraw


class QuestionPorts(Protocol):
    """The question desk (questions.py); a question is owned by its asker's connection."""

    def ask(self, asker_id: bytes, request: Ask, reply: ReplyTo) -> None:
        """Open the question or refuse it; `reply` gets its one answer (or error)."""

    def withdraw(self, asker_id: bytes, request: Withdraw) -> None: ...

    def asker_gone(self, asker_id: bytes) -> None:
        """The peer detached: what it is still asking (not yet open) is not opened."""


class QuestionTopics:
    def __init__(self, ports: QuestionPorts) -> None:
        self._ports = ports

    @handles(channels.ASK)
    def _on_ask(self, peer: Peer, body: Ask, reply: ReplyTo) -> None:
        self._ports.ask(peer.routing_id, body, reply)

    @handles(channels.WITHDRAW)
    def _on_withdraw(self, peer: Peer, body: Withdraw) -> None:
        self._ports.withdraw(peer.routing_id, body)
