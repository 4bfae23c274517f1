"""An HTTP server's connections, bounded: nobody who connects and sends nothing holds a descriptor.
main's `--mcp-http` child (gateway_process/http_app.py) and the web window (web_process/cli.py)
both serve through it; it needs uvicorn, which only they import.

uvicorn accepts every connection and keeps one that sends nothing forever (its keep-alive timer
starts only after a first response), so ~1,000 idle sockets used to take every descriptor and lock
every host (or the paired browser) out. `guarded_protocol(guard)` is uvicorn's h11 protocol with a
`ConnectionGuard`:

- at most `max_total` open connections (sized below the descriptor limit, with a reserve for the
  child's own sockets) and `max_per_source` from one non-loopback address. A connection over a cap
  takes the place of the oldest one still waiting for its request head (one that never sent a
  request first), else it is closed at once; either way it is counted (`refused`). A connection
  serving a request or a stream is never closed for room.
- a connection waiting for its request head (new, or idle between keep-alive requests) is closed
  after `head_timeout_s`, one reading a request body after `body_timeout_s` (`timed_out`): time
  since the head, not since the last byte, so a trickle does not keep it.

With TLS the guard does the handshake itself (`loop.start_tls`) after counting the connection, so
one that never finishes it is capped and timed out like one that sends no request; uvicorn's own
TLS would count it only once the handshake is done (and asyncio waits up to 60 s for that).

Counting is O(1) per connection; the sweep once a second is O(connections).
"""

import asyncio
import logging
import ssl
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)
_LOOPBACK_SOURCES = ("127.0.0.1", "::1")
SWEEP_S = 1.0


class _Guarded(H11Protocol):
    guard: "ConnectionGuard"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source = ""
        self.waiting_since = 0.0  # since when it waits for a request head, or reads a body
        self.ever_served = False
        self.raw: asyncio.BaseTransport | None = None  # the TCP connection (under TLS, if any)
        self._handshake: asyncio.Task[None] | None = None
        self._early: list[bytes] = []  # what TLS decrypted before start_tls handed the transport over

    # what the guard needs to know, from uvicorn's own state
    def waiting_for_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def reading_body(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete and self.cycle.more_body

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        self.source = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self.raw = transport
        self.waiting_since = self.guard.clock()
        if not self.guard.admit(self):
            transport.abort()  # type: ignore[attr-defined]
            return
        if self.guard.tls is None:
            super().connection_made(transport)  # type: ignore[arg-type]
            return
        transport.pause_reading()  # type: ignore[attr-defined]  # the handshake reads first
        self._handshake = asyncio.ensure_future(self._start_tls(transport, self.guard.tls))

    async def _start_tls(self, raw: asyncio.BaseTransport, context: ssl.SSLContext) -> None:
        try:
            secure = await self.loop.start_tls(raw, self, context, server_side=True,  # type: ignore[arg-type]
                                               ssl_handshake_timeout=self.guard.head_timeout_s)
        except (OSError, ssl.SSLError, TimeoutError, EOFError) as exc:
            self.guard.gone(self)
            self.guard.failed_tls += 1
            raw.abort()  # type: ignore[attr-defined]
            logger.info("a TLS handshake from %s failed: %s", self.source, exc)
            return
        if secure is None or secure.is_closing():
            self.guard.gone(self)
            return
        super().connection_made(secure)
        early, self._early = self._early, []
        for data in early:
            super().data_received(data)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            self._early.append(data)
            return
        super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.gone(self)
        if self.transport is not None:  # None: refused, or lost during its handshake
            super().connection_lost(exc)

    def handle_events(self) -> None:
        waiting = self.waiting_for_head()
        super().handle_events()
        if waiting and not self.waiting_for_head():  # a request head arrived: its body's time starts
            self.ever_served = True
            self.waiting_since = self.guard.clock()

    def on_response_complete(self) -> None:
        self.waiting_since = self.guard.clock()  # idle from now until the next head
        super().on_response_complete()

    def close_now(self) -> None:
        transport = self.transport or self.raw
        if transport is not None and not transport.is_closing():
            transport.abort()  # type: ignore[attr-defined]


class ConnectionGuard:
    def __init__(self, max_total: int, max_per_source: int, head_timeout_s: float, body_timeout_s: float,
                 clock: Callable[[], float] = time.monotonic, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.failed_tls = 0
        self.max_total = max_total
        self.max_per_source = max_per_source
        self.head_timeout_s = head_timeout_s
        self.body_timeout_s = body_timeout_s
        self.clock = clock
        self.refused = 0  # closed at once, or closed to make room, for being over a cap
        self.timed_out = 0  # closed for sending no request head, or no body, in time
        self._open: dict[_Guarded, None] = {}  # in arrival order: the first waiting one goes first
        self._by_source: Counter[str] = Counter()

    @property
    def open(self) -> int:
        return len(self._open)

    def admit(self, conn: _Guarded) -> bool:
        """Take `conn`, making room if a cap is reached; False: it is closed now."""
        crowded = conn.source not in _LOOPBACK_SOURCES and self._by_source[conn.source] >= self.max_per_source
        if crowded and not self._evict(conn.source):
            self.refused += 1
            return False
        if len(self._open) >= self.max_total and not self._evict(None):
            self.refused += 1
            return False
        self._open[conn] = None
        self._by_source[conn.source] += 1
        return True

    def gone(self, conn: _Guarded) -> None:
        if conn in self._open:
            del self._open[conn]
            self._by_source[conn.source] -= 1
            if self._by_source[conn.source] <= 0:
                del self._by_source[conn.source]

    def _evict(self, source: str | None) -> bool:
        """Close the oldest connection (of `source`, if named) waiting for a head, one that never
        sent a request before one that did; False when none waits."""
        idle: _Guarded | None = None
        for conn in self._open:
            if (source is None or conn.source == source) and conn.waiting_for_head():
                if not conn.ever_served:
                    idle = conn
                    break
                idle = idle or conn
        if idle is None:
            return False
        self.refused += 1
        self.gone(idle)  # room now: its connection_lost comes later
        idle.close_now()
        return True

    def sweep(self) -> None:
        now = self.clock()
        for conn in list(self._open):
            late = ((conn.waiting_for_head() and now - conn.waiting_since > self.head_timeout_s)
                    or (conn.reading_body() and now - conn.waiting_since > self.body_timeout_s))
            if late:
                self.timed_out += 1
                self.gone(conn)
                conn.close_now()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            self.sweep()


def guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, bounded by `guard` (pass as `uvicorn.Config(http=...)`)."""
    return type("GuardedH11Protocol", (_Guarded,), {"guard": guard})
