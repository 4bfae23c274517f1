"""RelayPump: one host's MCP session with one server, relayed through main (no sockets in here).

The host's JSON-RPC messages go to main as they are (`msgMcpRelay`), the server's come back the same
way; the pump only keeps what it needs so the host is never left waiting:

- while main is not reachable yet (starting it, or attaching again after it went away), messages
  wait in order; if main cannot be reached, each waiting request is answered with an error saying so;
- the requests the host is waiting on: when the session is lost (main went away, or the server's
  process ended) each gets an error response naming the cause, since no answer will come;
- the host's `initialize` (once the server accepted it) and `notifications/initialized`: the next
  message after a loss first replays them on a new session (main opens it), so the server is
  initialized again and the host goes on; the server's answer to the replayed `initialize` is not
  passed to the host. An `initialize` the server refused is not replayed: a host in `auto` mode
  sends one after a `server/discover` it gave up on, the server (locked to the 2026-07-28 era by
  that discover) refuses it, and the host goes on in that era, which a replayed handshake would
  lock the new session out of.

    offline ──attached──► online ──lost──► offline (replay before the next message)

The pump runs in the gateway, or in main when a local `serve` handed main the host's pipes
(shared/host_pipes.py): its `watcher` then tells serve what it would need to take over.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import Protocol

import msgspec

from shared import jsonrpc
from shared.errors import RpcCode

logger = logging.getLogger(__name__)

MAX_WAITING = 1000  # messages held while main is unreachable; past it requests are answered at once
REPLAY_PREFIX = "elicitron-replay-"  # the id of a replayed `initialize` (main's merged session knows it)
Headers = dict[str, str] | None


class PumpWatcher(Protocol):
    """Who follows what the pump would need to go on elsewhere (main's host pipes tell serve)."""

    def opened(self, request_id: jsonrpc.Id, method: str) -> None: ...

    def done(self, request_id: jsonrpc.Id) -> None: ...

    def handshake(self, raw: bytes) -> None: ...


class Undeliverable(str):
    """Why `to_main` could not take a message that is itself the problem (over main's size limit, a
    value the wire cannot carry): its request is answered -32602, an error of the request's own."""


@dataclass
class RelayPump:
    server: str
    session: str
    to_main: Callable[[bytes, Headers], str | None]  # one message for main; None, or why it could not go
    to_host: Callable[[bytes], None]
    online: bool = False
    _waiting: list[tuple[bytes, Headers]] = field(default_factory=list)
    _outstanding: dict[jsonrpc.Id, str] = field(default_factory=dict)  # host request id -> method
    _initialize: bytes | None = None
    _asked_initialize: tuple[jsonrpc.Id, bytes] | None = None  # sent, not answered yet
    _initialized: bytes | None = None
    _replay: bool = False
    _replayed: set[jsonrpc.Id] = field(default_factory=set)
    _ids: "count[int]" = field(default_factory=count)
    watcher: PumpWatcher | None = None

    # ---- from the host -------------------------------------------------------------------

    def from_host(self, raw: bytes, headers: Headers = None) -> None:
        """`headers`: the HTTP routing headers the host sent with it (HTTP gateways only)."""
        envelope = jsonrpc.peek(raw)
        method = envelope.method
        watcher = self.watcher
        if isinstance(method, str) and isinstance(envelope.id, (int, str)):  # a request (inline: every message)
            self._outstanding[envelope.id] = method
            if watcher is not None:
                watcher.opened(envelope.id, method)
            if method == "initialize":
                self._asked_initialize = (envelope.id, raw)
                self._replay = False  # a host starting over: nothing to replay
        elif envelope.kind == "notification":
            if envelope.method == "notifications/initialized" and self._initialize is not None:
                self._initialized = raw
                if watcher is not None:
                    watcher.handshake(raw)
            elif envelope.method == "notifications/cancelled":
                request_id = envelope.params_dict().get("requestId")
                if isinstance(request_id, (int, str)) and self._outstanding.pop(request_id, None) is not None \
                        and watcher is not None:  # the host expects no answer now
                    watcher.done(request_id)
        if not self.online:
            if len(self._waiting) >= MAX_WAITING:
                self._refuse(envelope, "too many messages wait for Elicitron's main to come back")
                return
            self._waiting.append((raw, headers))
            return
        if self._replay:
            self._send(raw, headers)
            return
        problem = self.to_main(raw, headers)  # (what _send does with nothing to replay)
        if problem is not None:
            self._refuse(envelope, problem)

    def _send(self, raw: bytes, headers: Headers = None) -> None:
        if self._replay:
            self._replay = False
            if self._initialize is not None:
                replay_id = f"{REPLAY_PREFIX}{next(self._ids)}"
                self._replayed.add(replay_id)
                message = jsonrpc.peek(self._initialize)
                self.to_main(jsonrpc.request(replay_id, "initialize", message.params_dict()), None)
                if self._initialized is not None:
                    self.to_main(self._initialized, None)
        problem = self.to_main(raw, headers)
        if problem is not None:
            self._refuse(jsonrpc.peek(raw), problem)

    # ---- from main -------------------------------------------------------------------------

    def from_main(self, raw: bytes) -> None:
        envelope = jsonrpc.peek(raw)
        if isinstance(envelope.id, (int, str)) and not isinstance(envelope.method, str) \
                and (envelope.result is not msgspec.UNSET or envelope.error is not msgspec.UNSET):  # a response
            if envelope.id in self._replayed:
                self._replayed.discard(envelope.id)
                return
            if self._asked_initialize is not None and self._asked_initialize[0] == envelope.id:
                self._handshake_answered(envelope.result is not msgspec.UNSET)
            if self._outstanding.pop(envelope.id, None) is not None and self.watcher is not None:
                self.to_host(raw)  # the host first: a `done` without its answer would leave the host waiting
                self.watcher.done(envelope.id)
                return
        self.to_host(raw)

    def _handshake_answered(self, accepted: bool) -> None:
        assert self._asked_initialize is not None
        raw = self._asked_initialize[1]
        self._asked_initialize = None
        if accepted:
            self._initialize, self._initialized = raw, None
            if self.watcher is not None:
                self.watcher.handshake(raw)

    # ---- the link to main ------------------------------------------------------------------

    def attached(self) -> None:
        """main answers: what waited goes out, in order."""
        self.online = True
        waiting, self._waiting = self._waiting, []
        for raw, headers in waiting:
            self._send(raw, headers)

    def lost(self, why: str) -> None:
        """The session ended (main went away, or the server's process ended): the host's open
        requests fail, and the next message opens a new session with the handshake replayed."""
        self._replayed.clear()
        self._replay = self._initialize is not None
        outstanding, self._outstanding = self._outstanding, {}
        for raw, _ in self._waiting:  # not sent yet: they go to the next session, not lost
            waiting_id = jsonrpc.peek(raw).id
            if isinstance(waiting_id, (int, str)) and waiting_id in outstanding:
                self._outstanding[waiting_id] = outstanding.pop(waiting_id)
        target = repr(self.server) if self.server else "Elicitron's servers"  # (EVERY_SERVER: merged)
        for request_id, method in outstanding.items():
            self.to_host(jsonrpc.error_response(request_id, RpcCode.SERVER_ERROR,
                                                f"{method} to {target} was lost: {why}"))
            if self.watcher is not None:
                self.watcher.done(request_id)

    def restore(self, handshake: list[bytes], outstanding: dict[jsonrpc.Id, str]) -> None:
        """Take over a session another pump ran (main's, for host pipes): its handshake to replay
        and the requests still open; `detached` or `lost` answers those next."""
        for raw in handshake:
            if jsonrpc.peek(raw).method == "initialize":
                self._initialize = raw
            else:
                self._initialized = raw
        self._outstanding.update(outstanding)

    def detached(self, why: str) -> None:
        self.online = False
        self.lost(why)

    def unreachable(self, why: str) -> None:
        """main could not be reached for what waited: its requests are answered with `why`."""
        waiting, self._waiting = self._waiting, []
        for raw, _ in waiting:
            self._refuse(jsonrpc.peek(raw), why)

    def _refuse(self, envelope: jsonrpc.Envelope, why: str) -> None:
        if envelope.kind == "request" and isinstance(envelope.id, (int, str)):
            was_open = self._outstanding.pop(envelope.id, None) is not None
            code = RpcCode.INVALID_PARAMS if isinstance(why, Undeliverable) else RpcCode.SERVER_ERROR
            self.to_host(jsonrpc.error_response(envelope.id, code, str(why)))
            if was_open and self.watcher is not None:
                self.watcher.done(envelope.id)

    @property
    def waiting(self) -> int:
        return len(self._waiting)
