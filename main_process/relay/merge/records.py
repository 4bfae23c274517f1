"""What the merged session keeps: one record per server, per host request in flight and per listen
stream, and the protocols of what it is given (a server's relayed session, a timer)."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from shared import jsonrpc

Headers = dict[str, str] | None
Id = jsonrpc.Id


class Upstream(Protocol):
    """One server's relayed session (in main: merged_relay.py): the host's messages for it go in here; its
    messages come back through `MergedSession.from_server`."""

    def from_host(self, raw: bytes, headers: Headers = None) -> None: ...

    def close(self) -> None: ...


class Timer(Protocol):
    def cancel(self) -> None: ...


CallLater = Callable[[float, Callable[[], None]], Timer]


@dataclass(eq=False)
class Routed:
    """A host request at one server."""

    host_id: Id
    server: str
    upstream_id: Id
    method: str


@dataclass(eq=False)
class FanOut:
    """One request to several servers (or the merger's own, `host_id` None)."""

    method: str
    host_id: Id | None
    params: dict[str, Any]
    headers: Headers
    done: Callable[["FanOut"], None]
    key: str | None = None  # a list: its items' key (every page is fetched)
    first: bool = False  # done with the first result
    # who hears a part that answers after its time (a late initialize: the server joins then); a
    # fan without one cancels the parts that did not answer in time
    late: Callable[["Member", jsonrpc.Envelope], None] | None = None
    waiting: dict[str, Id] = field(default_factory=dict)  # server -> the id of its request in flight
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # in the order they came
    errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    timed_out: list[str] = field(default_factory=list)
    pages: dict[str, int] = field(default_factory=dict)
    sealed: bool = False
    finished: bool = False
    timer: Timer | None = None


@dataclass(eq=False)
class Part:
    fan: FanOut


@dataclass(eq=False)
class Listen:
    """A host's `subscriptions/listen`: one stream per server that honors part of it."""

    host_id: Id
    requested: dict[str, Any]
    own: dict[str, Any]  # what the merger honors itself (the lists it announces)
    parts: dict[str, Id] = field(default_factory=dict)  # server -> the id of its listen
    honored: dict[str, dict[str, Any]] = field(default_factory=dict)  # server -> its acknowledged filter
    unacked: set[str] = field(default_factory=set)
    buffer: list[bytes] = field(default_factory=list)  # events before the host's acknowledgement
    acknowledged: bool = False
    ended: bool = False
    timer: Timer | None = None


@dataclass(eq=False)
class ListenPart:
    listen: Listen


@dataclass(eq=False)
class Deferred:
    """A host request waiting for a listing (to find where it goes)."""

    host_id: Id
    cancelled: bool = False


Pending = Routed | Part | ListenPart  # what a server's answer is awaited for
Opened = Routed | FanOut | Listen | Deferred  # what a host request in flight became


@dataclass(eq=False)
class Member:
    """One server of the merged session."""

    name: str
    upstream: Upstream
    handshake: Literal["no", "asking", "yes", "failed"] = "no"
    discovered: bool = False  # got the host's server/discover: its session serves 2026-07-28 now
    capabilities: dict[str, Any] | None = None  # None: not known (no handshake or discover yet)
    instructions: str | None = None
    version: str | None = None
    outstanding: dict[Id, Pending] = field(default_factory=dict)  # by the id the server sees
    listings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # list method -> its own items
    stale: set[str] = field(default_factory=set)

    def offers(self, capability: str) -> bool:
        """Whether this server offers `capability` (when its capabilities are not known: maybe)."""
        return self.capabilities is None or isinstance(self.capabilities.get(capability), dict)
