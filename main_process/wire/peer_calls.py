"""The tool calls peers make through main (`msgMcpCallTool`), each with the way to cancel it.

A peer may cancel its own call in flight (`msgCancelCall`); a window's or controller's calls run
on when it goes (their requests stay answerable in the other windows). Hosts make no such calls:
theirs travel in their relayed sessions (relay.py), which end with the peer. No sockets in here.
"""

from collections.abc import Callable
from dataclasses import dataclass

from main_process.wire.peers import Peer
from shared.messages import ChannelReply

Cancel = Callable[[], None]
ReplyTo = Callable[[ChannelReply], None]


@dataclass(eq=False)
class _Call:
    cancel: Cancel | None = None
    done: bool = False


class PeerCalls:
    """Calls in flight by peer routing id and response channel."""

    def __init__(self) -> None:
        self._calls: dict[bytes, dict[str, _Call]] = {}

    def track(self, peer: Peer, channel: str, reply: ReplyTo) -> tuple[ReplyTo, Callable[[Cancel | None], None]]:
        """Register a call; returns the reply to use instead of `reply` (it ends the tracking) and
        the function that records how to cancel the call once it has started."""
        call = _Call()
        calls = self._calls.setdefault(peer.routing_id, {})
        calls[channel] = call

        def tracked_reply(answer: ChannelReply) -> None:
            if not call.done:
                call.done = True
                if calls.get(channel) is call:
                    del calls[channel]
                    if not calls:
                        self._calls.pop(peer.routing_id, None)
            reply(answer)

        def started(cancel: Cancel | None) -> None:
            call.cancel = cancel

        return tracked_reply, started

    def cancel(self, routing_id: bytes, channel: str) -> bool:
        """Cancel one call at the server; False when there is no such call in flight."""
        call = self._calls.get(routing_id, {}).get(channel)
        if call is None or call.done or call.cancel is None:
            return False
        call.cancel()  # the call then replies (cancelled), which ends its tracking
        return True
