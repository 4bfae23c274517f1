"""Whose call a server's withdrawn elicitation was for, when the server does not say (2025 era).

A 2025-era server's `elicitation/create` carries no id of the tools/call it belongs to (the MCP
SDKs keep that `related_request_id` as transport metadata: streamable HTTP sends the request on the
call's own response stream, stdio has one stream; the SDK's HTTP client transport main uses hands
messages on without saying which stream they came on), so when a host cancels one of several calls
at a server and the server then withdraws an elicitation (`notifications/cancelled`), main must
infer whose it was. Two facts are used:

- certain: an elicitation can only be for a call the server had when it asked (main notes the
  host's calls in flight at the server then). When the host has cancelled every one of them, the
  card is the host's: it closes as "host-gone" at once, without waiting for the server.
- inferred: a server's withdrawal that comes within `ATTRIBUTION_WINDOW_S` of the host cancelling
  a call the server had when it asked, not yet matched, is taken as that cancel's consequence;
  the match is used up, so one cancelled call explains one withdrawal.

The inference holds when a server withdraws an elicitation only because its call was cancelled
and a call waits on one elicitation at a time (the SDKs' `ctx.elicit` awaits its answer). It
cannot hold apart, and errs towards plain "cancelled", when: the server asked after the host's
cancel reached main (a race: the call was no longer in flight), one call had two elicitations open
at once (the second says "cancelled"), or the server's withdrawal comes later than the window. It
errs towards "host-gone" only when, within the window, a server that ignored a host's cancel
withdraws another call's elicitation of its own accord. An elicitation made outside any call is
never attributed.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from main_process.clock import MONOTONIC, Clock
from shared import jsonrpc

ATTRIBUTION_WINDOW_S: Final = 30.0  # a server withdraws at once on a cancel; later is not taken as its reply


@dataclass(eq=False)
class HostCancels:
    """Per relayed session: the server's open requests and the calls they may be for. No I/O."""

    clock: Clock = MONOTONIC
    _candidates: dict[jsonrpc.Id, frozenset[jsonrpc.Id]] = field(default_factory=dict)  # request -> calls then
    _listed: Counter[jsonrpc.Id] = field(default_factory=Counter)  # call -> open requests that may be its
    _cancelled: set[jsonrpc.Id] = field(default_factory=set)  # host-cancelled calls an open request may be for
    _unmatched: dict[jsonrpc.Id, float] = field(default_factory=dict)  # ... whose withdrawal is to come -> when

    def asked(self, request_id: jsonrpc.Id, calls_in_flight: frozenset[jsonrpc.Id]) -> None:
        """The server opened a request while these calls of the host's were at it."""
        self.forget(request_id)
        self._candidates[request_id] = calls_in_flight
        self._listed.update(calls_in_flight)

    def call_cancelled(self, call_id: jsonrpc.Id) -> list[jsonrpc.Id]:
        """The host cancelled a call at the server. Returns the open requests that can only have
        been for calls the host cancelled: they are the host's for certain."""
        if not self._listed[call_id]:
            return []  # no open request may be its: nothing to attribute
        self._cancelled.add(call_id)
        certain = [request_id for request_id, calls in self._candidates.items()
                   if call_id in calls and calls <= self._cancelled]
        if not certain:  # else the call's card is known, and the server's cancel of it explains nothing more
            self._unmatched[call_id] = self.clock.now()
        return certain

    def withdrawn(self, request_id: jsonrpc.Id) -> bool:
        """The server withdrew a request: True when a host's cancel explains it (and the request
        is forgotten either way)."""
        calls = self._candidates.get(request_id, frozenset())
        matched = sorted((self._unmatched[call], str(call), call) for call in calls if call in self._unmatched)
        certain = bool(calls) and calls <= self._cancelled
        recent = [call for when, _, call in matched if self.clock.now() - when <= ATTRIBUTION_WINDOW_S]
        explained = certain or bool(recent)
        if recent:
            del self._unmatched[recent[0]]  # the oldest: cancels reach the server in order
        elif certain and matched:
            del self._unmatched[matched[0][2]]
        self.forget(request_id)
        return explained

    def forget(self, request_id: jsonrpc.Id) -> None:
        """The request is closed (answered, withdrawn, or its session ended)."""
        calls = self._candidates.pop(request_id, None)
        if calls is None:
            return
        self._listed.subtract(calls)
        for call in calls:
            if self._listed[call] <= 0:  # no open request may be this call's any more
                del self._listed[call]
                self._cancelled.discard(call)
                self._unmatched.pop(call, None)

    def clear(self) -> None:
        self._candidates.clear()
        self._listed.clear()
        self._cancelled.clear()
        self._unmatched.clear()
