"""What main keeps for the calls peers make, and where a request an MCP host's call caused goes.

`PeerCalls` holds every peer's tool calls in flight, each with the way to cancel it at the server:
a peer may cancel its own call (`msgCancelCall`), and when a host peer (an `elicitron serve`
gateway) goes away, its calls are cancelled (a window's or controller's calls run on: their requests
stay answerable in the other windows). Hosts' counts are what `elicitron status` and the windows
show as calls in flight.

`plan_delivery` decides who gets a request a host's call caused, by the server's
`elicitationRoute`: "windows" (every window, as for any other request), "host" (only that host,
when it declared it can answer that mode; else the windows), "first" (the windows and that host;
the first answer wins and the others are dismissed, as between windows). No sockets in here.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from main_process.peers import Peer
from shared.messages import ChannelReply

Cancel = Callable[[], None]
ReplyTo = Callable[[ChannelReply], None]
Route = Literal["windows", "host", "first"]


@dataclass(frozen=True)
class Delivery:
    """Who a request is sent to; the optional arguments of `PendingRequests.open`."""

    recipients: list[bytes] | None  # None: every window attached now
    for_windows: bool  # windows that attach later get it too
    via: str | None  # the host whose call led to it, for the card


def plan_delivery(route: str, host: Peer | None, mode: str, renderers: list[bytes]) -> Delivery:
    """Where a request goes; `host` is the host peer whose call caused it, if one did."""
    if host is None:
        return Delivery(None, True, None)
    via = host.name or host.window
    can_answer = host.url_elicitation if mode == "url" else host.form_elicitation
    if route == "windows" or not can_answer:
        return Delivery(None, True, via)
    if route == "host":
        return Delivery([host.routing_id], False, via)
    return Delivery([*renderers, host.routing_id], True, via)


@dataclass(eq=False)
class _Call:
    cancel: Cancel | None = None
    done: bool = False


class PeerCalls:
    """Calls in flight by peer routing id and response channel."""

    def __init__(self, on_count_changed: Callable[[Peer], None]) -> None:
        self._calls: dict[bytes, dict[str, _Call]] = {}
        self._on_count_changed = on_count_changed  # a host's count is shown: publish it

    def track(self, peer: Peer, channel: str, reply: ReplyTo) -> tuple[ReplyTo, Callable[[Cancel | None], None]]:
        """Register a call; returns the reply to use instead of `reply` (it ends the tracking) and
        the function that records how to cancel the call once it has started."""
        call = _Call()
        calls = self._calls.setdefault(peer.routing_id, {})
        calls[channel] = call
        self._count(peer, +1)

        def tracked_reply(answer: ChannelReply) -> None:
            if not call.done:
                call.done = True
                if calls.get(channel) is call:
                    del calls[channel]
                    if not calls:
                        self._calls.pop(peer.routing_id, None)
                self._count(peer, -1)
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

    def cancel_all(self, routing_id: bytes) -> int:
        """Cancel every call of a peer that went away; returns how many."""
        calls = list(self._calls.get(routing_id, {}).values())
        for call in calls:
            if not call.done and call.cancel is not None:
                call.cancel()
        return len(calls)

    def _count(self, peer: Peer, delta: int) -> None:
        peer.calls += delta
        if peer.role == "host":
            self._on_count_changed(peer)
