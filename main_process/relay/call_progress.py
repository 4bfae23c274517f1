"""Which of a relayed session's host calls carry a progress token, and main's progress to them
while the server's elicitation waits on a card (progress.py writes the notifications).

The server's request does not say which call it is for, so while any card of the session is open,
every call at the server that carries a token hears main's progress; a call that ends (answered,
cancelled) hears no more.
"""

from collections.abc import Callable, Collection
from typing import Any

from main_process.clock import Timer
from main_process.relay.progress import HostProgress, Token, token_of
from shared import jsonrpc


class CallProgress:
    def __init__(self, progress: HostProgress, *, live_calls: Callable[[], Collection[jsonrpc.Id]],
                 cards_open: Callable[[], bool]) -> None:
        """`live_calls`: the host's calls the server has; `cards_open`: whether a card of the
        session's server waits."""
        self.progress = progress
        self._live_calls = live_calls
        self._cards_open = cards_open
        self._tokens: dict[jsonrpc.Id, Token] = {}  # tools/call with a progress token -> it
        self._ticking: Timer | None = None
        self._closed = False

    def token(self, request_id: jsonrpc.Id) -> Token | None:
        return self._tokens.get(request_id)

    def note(self, request_id: jsonrpc.Id, params: dict[str, Any]) -> None:
        token = token_of(params)
        if token is not None:
            self._tokens[request_id] = token

    def ended(self, request_id: jsonrpc.Id) -> None:
        """A host's tools/call was answered or cancelled: no more progress on its token."""
        if self._tokens:
            token = self._tokens.pop(request_id, None)
            if token is not None:
                self.progress.forget(token)

    def card_opened(self) -> None:
        """A card of the server's opened: tick until none of the session's is open."""
        if self._ticking is None and self._tokens and not self._closed:
            self._ticking = self.progress.later(self._tick)

    def close(self) -> None:
        self._closed = True
        if self._ticking is not None:
            self._ticking.cancel()
            self._ticking = None
        self._tokens.clear()

    def _tick(self) -> None:
        self._ticking = None
        live = self._live_calls()
        tokens = [token for request_id, token in self._tokens.items() if request_id in live]
        if self._closed or not tokens or not self._cards_open():
            return
        for token in tokens:
            self.progress.send(token)
        self._ticking = self.progress.later(self._tick)
