"""Which elicitation the window shows next, and how to say how many more wait. No Qt.

Oldest first (createdAt, then arrival), each response channel at most once.
"""

from collections import Counter

from shared import messages


class CardQueue:
    def __init__(self) -> None:
        self._items: list[messages.ElicitationInvoke] = []

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, channel: object) -> bool:
        return any(item.response_channel == channel for item in self._items)

    def push(self, invoke: messages.ElicitationInvoke) -> bool:
        """Add unless that channel is already queued; False if it was."""
        if invoke.response_channel in self:
            return False
        self._items.append(invoke)
        self._items.sort(key=lambda item: item.created_at)  # stable: equal times keep arrival order
        return True

    def pop_oldest(self) -> messages.ElicitationInvoke | None:
        return self._items.pop(0) if self._items else None

    def remove(self, channel: str) -> messages.ElicitationInvoke | None:
        for index, item in enumerate(self._items):
            if item.response_channel == channel:
                return self._items.pop(index)
        return None

    def items(self) -> list[messages.ElicitationInvoke]:
        """The queued requests, oldest first (a copy)."""
        return list(self._items)

    def channels(self) -> list[str]:
        return [item.response_channel for item in self._items]

    def summary(self) -> str:
        """ "2 more waiting (demo: 1, weather: 1)", or "" when nothing waits."""
        if not self._items:
            return ""
        per_server = Counter(item.request.server for item in self._items)
        groups = ", ".join(f"{server}: {count}" for server, count in per_server.items())
        return f"{len(self._items)} more waiting ({groups})"
