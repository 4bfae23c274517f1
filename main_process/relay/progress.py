"""Progress main writes to a host itself: while a host's request waits on a person (an approval
card, or a card of its server's elicitation), `notifications/progress` on the request's own
`progressToken` every few seconds, so a host that resets its timeout on progress (the TypeScript
SDK's `resetTimeoutOnProgress`) keeps waiting instead of giving up after its request timeout.

MCP: the progress value must increase with each notification of a token, whoever sends it. Main's
own are one above the last the host got; the server's on a token main spoke on pass with a value
raised above main's when they would go back (and without a `total` they then exceed).
"""

from collections.abc import Callable
from typing import Any, Final

from main_process.clock import Clock, Timer
from shared import jsonrpc

Token = int | str
MAX_TOKENS: Final = 10_000  # tokens main spoke on whose request has not ended (bounded all the same)


def token_of(params: dict[str, Any]) -> Token | None:
    """The request's `_meta.progressToken`, if it has one main can use (a string or an integer)."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (int, str)) and not isinstance(token, bool) else None


class HostProgress:
    """One relayed session's progress notifications of main's own, and the values its host got."""

    def __init__(self, to_host: Callable[[bytes], None], clock: Clock, every_s: float, message: str) -> None:
        self._to_host = to_host
        self.clock = clock
        self.every_s = every_s
        self.message = message  # "waiting for approval on <machine>"
        self._last: dict[Token, float] = {}  # the last value the host got, for tokens main spoke on

    def send(self, token: Token) -> None:
        value = self._last.pop(token, 0.0) + 1
        self._last[token] = value
        if len(self._last) > MAX_TOKENS:
            self._last.pop(next(iter(self._last)))
        self._to_host(jsonrpc.notification("notifications/progress",
                                           {"progressToken": token, "progress": value, "message": self.message}))

    def later(self, callback: Callable[[], None]) -> Timer:
        """`callback` once the interval has passed (each tick sets the next)."""
        return self.clock.call_later(self.every_s, callback)

    def passing(self, params: dict[str, Any], raw: bytes) -> bytes:
        """The server's own progress notification, raised above main's last value when needed."""
        token = params.get("progressToken")
        value = params.get("progress")
        if not isinstance(token, (int, str)) or token not in self._last or not isinstance(value, (int, float)):
            return raw
        last = self._last[token]
        if value > last:
            self._last[token] = value
            return raw
        self._last[token] = last + 1
        raised = {**params, "progress": last + 1}
        total = raised.get("total")
        if isinstance(total, (int, float)) and total < last + 1:
            del raised["total"]
        return jsonrpc.notification("notifications/progress", raised)

    def forget(self, token: Token) -> None:
        """The request of `token` ended: the host reads no more progress on it."""
        self._last.pop(token, None)

    @property
    def spoken(self) -> bool:
        return bool(self._last)
