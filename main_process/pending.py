"""The registry of unresolved elicitations and of channels already used."""

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from shared.messages import ElicitationInvoke, ElicitationResult

logger = logging.getLogger(__name__)

_REMEMBERED_CLOSED_CHANNELS = 50_000


@dataclass
class PendingElicitation:
    invoke: ElicitationInvoke
    future: asyncio.Future[ElicitationResult]
    sent_to: set[bytes] = field(default_factory=set)  # routing ids the invoke went to

    @property
    def channel(self) -> str:
        return self.invoke.response_channel


class PendingRegistry:
    """Unresolved requests in arrival order, plus why recently closed channels closed."""

    def __init__(self) -> None:
        self._open: dict[str, PendingElicitation] = {}
        self._closed: OrderedDict[str, str] = OrderedDict()

    def add(self, pending: PendingElicitation) -> None:
        self._open[pending.channel] = pending

    def get(self, channel: str) -> PendingElicitation | None:
        return self._open.get(channel)

    def close(self, channel: str, reason: str) -> PendingElicitation | None:
        """Remove an open request, remembering why, so a late answer gets a precise refusal."""
        pending = self._open.pop(channel, None)
        if pending is not None:
            self._closed[channel] = reason
            if len(self._closed) > _REMEMBERED_CLOSED_CHANNELS:
                self._closed.popitem(last=False)
        return pending

    def closed_reason(self, channel: str) -> str | None:
        return self._closed.get(channel)

    def all(self) -> list[PendingElicitation]:
        """Every open request, oldest first (dicts keep insertion order)."""
        return list(self._open.values())

    def __len__(self) -> int:
        return len(self._open)
