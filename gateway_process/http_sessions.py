"""How many MCP sessions the HTTP child holds: at most MAX_PER_HOST per host (its `clientInfo`
name) and MAX_SESSIONS in all (every path; a 2026-07-28 client counts as one session), all of them
behind the one bearer token.

A host that opens sessions and never sends DELETE used to wedge the child. Now a session over a cap
takes the place of the least recently used one that is idle (no request open, no GET stream; its
host is told "session not found" next time and starts a new one, as the spec says), or is refused
with 503 and a JSON-RPC error saying what to do. Over its own cap a host's new session replaces only
one of its own idle for OWN_IDLE_S (it should end what it no longer uses); over the total cap, any
host's idle for EVICT_IDLE_S, so one greedy host or many cannot keep another out. A session idle for
IDLE_S ends anyway (`ELICITRON_MCP_HTTP_IDLE_S` sets it: a test, or a soak, of abandoned sessions
need not wait ten minutes; main's child inherits it from main's environment).
"""

import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Protocol

MAX_SESSIONS = 100
MAX_PER_HOST = 32
OWN_IDLE_S = 60.0
EVICT_IDLE_S = 10.0
IDLE_S = 10 * 60.0
IDLE_ENV = "ELICITRON_MCP_HTTP_IDLE_S"
MAX_IDLE_S = 24 * 3600.0

logger = logging.getLogger(__name__)


def idle_seconds(raw: str | None = None) -> float:
    """IDLE_S, or the seconds `ELICITRON_MCP_HTTP_IDLE_S` names (over 0, at most a day)."""
    raw = (os.environ.get(IDLE_ENV, "") if raw is None else raw).strip()
    if not raw:
        return IDLE_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= MAX_IDLE_S:  # NaN fails this too
        logger.warning("%s=%r is not a number of seconds (over 0, at most %.0f); using %.0f s", IDLE_ENV, raw,
                       MAX_IDLE_S, IDLE_S)
        return IDLE_S
    return seconds


class Counted(Protocol):
    host: str
    last_used: float

    def busy(self) -> bool:
        """A request open, or a stream the host listens on: never ended for room."""

    def end(self) -> None:
        """End the session (its owner forgets it and calls `SessionBudget.release`)."""


class SessionBudget:
    def __init__(self, max_total: int = MAX_SESSIONS, max_per_host: int = MAX_PER_HOST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_total = max_total
        self.max_per_host = max_per_host
        self.clock = clock
        self.refused = 0
        self._open: dict[Counted, None] = {}
        self._by_host: Counter[str] = Counter()

    @property
    def open(self) -> int:
        return len(self._open)

    def refusal(self, host: str) -> str | None:
        """Room for one more session of `host` (ending an idle one if need be), or why not."""
        if self._by_host[host] >= self.max_per_host and not self._evict(host, OWN_IDLE_S):
            self.refused += 1
            return (f"{host!r} already has {self.max_per_host} MCP sessions open through Elicitron's HTTP gateway: "
                    "end the ones you no longer use (HTTP DELETE with their Mcp-Session-Id), or retry in a minute, "
                    "when an idle one gives way")
        if len(self._open) >= self.max_total and not self._evict(None, EVICT_IDLE_S):
            self.refused += 1
            return (f"Elicitron's HTTP gateway has its {self.max_total} MCP sessions open and none idle: hosts should "
                    "end the ones they no longer use (HTTP DELETE with their Mcp-Session-Id); retry in a few seconds")
        return None

    def add(self, session: Counted) -> None:
        self._open[session] = None
        self._by_host[session.host] += 1

    def release(self, session: Counted) -> None:
        if session in self._open:
            del self._open[session]
            self._by_host[session.host] -= 1
            if self._by_host[session.host] <= 0:
                del self._by_host[session.host]

    def _evict(self, host: str | None, idle_s: float) -> bool:
        now = self.clock()
        idle = [session for session in self._open if (host is None or session.host == host)
                and not session.busy() and now - session.last_used >= idle_s]
        if not idle:
            return False
        oldest = min(idle, key=lambda session: session.last_used)
        oldest.end()
        self.release(oldest)
        return True
