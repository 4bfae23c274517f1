"""StreamSlots: how many event streams (pages, each a renderer peer of main) are open, per device
and in all. A place is taken when the stream is registered, in the same step as the check (no
await between them), and given back when its response ends however it ends (EventStream); so one
device opening pages without end fills its own share and no more, and a second device's page
still opens."""

from collections import Counter
from collections.abc import AsyncIterator, Callable

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class StreamSlots:
    def __init__(self, per_device: int, total: int) -> None:
        self.per_device = per_device
        self.total = total
        self.refused = 0
        self._by_device: Counter[str] = Counter()

    @property
    def open(self) -> int:
        return self._by_device.total()

    def take(self, device: str) -> bool:
        """A place for one more stream of `device`, taken now; False (counted): none is left."""
        if self._by_device[device] >= self.per_device or self.open >= self.total:
            self.refused += 1
            return False
        self._by_device[device] += 1
        return True

    def give_back(self, device: str) -> None:
        self._by_device[device] -= 1
        if self._by_device[device] <= 0:
            del self._by_device[device]


class EventStream(StreamingResponse):
    """A StreamingResponse of server-sent events that runs `on_end` however it ends: sent in full,
    the page gone (its body cancelled, perhaps before it started: no `finally` of the body would
    run then), or the web window stopping."""

    def __init__(self, content: AsyncIterator[str], on_end: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream", headers={"x-accel-buffering": "no"})
        self._on_end = on_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_end()
