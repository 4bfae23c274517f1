"""PeerCore: the peer side of the wire contract (shared/PROTOCOL.md §2, §3, §7) with no I/O.

No sockets, timers or event loop in here (h11's way): an adapter feeds it what main sent and the
time `now` (a float it passes, monotonic seconds), and gets back `Effect`s: bodies to send and
events to act on. Three adapters drive it, each over shared/peer_socket.py's MainSocket: the
windows' Qt one (renderer_process/qt_peer.py), asyncio's for the gateways, the asker and the web
window (shared/peer_asyncio.py), and the CLI's blocking wait loop (shared/peer_blocking.py); each
peer is its adapter plus what its role does with main's words. shared/peer_requests.py builds the
requests they send.

    idle ──attach──► connecting ──connected(info)──► hello-sent ──welcome──► attached
      ▲               ▲    ▲  │                           │                     │
      │     retry due │    │  │ connect_failed            │ refused hello,      │
      │               │    │  ▼                           │ no welcome in time  │
      │             waiting ◄─────────────────────────────┘                     │
      │                    │                                                    │
      │                    └─── a loss, at once (main silent 3 s, its bye, ─────┘
      │                         lose(), not-attached)
      └── a failure with no retry (a first attach, unless `retry_first_attach`), a loss with
          `Policy(reattach=False)`, `give_up_after` passed since the loss, `detach()`;
          `close()` from anywhere ──► closed

A loss re-reads the file at once; after `not-attached` the socket stays (a hello again at once,
on it, if the file still names the same main). Failures are retried only after a loss (or always,
for a window). Every loss tells each waiter `lost` and forgets it. Replies are routed by response
channel to the `Waiter` registered for it (a reply for a channel nobody waits on is dropped and
counted); a refusal of something sent on a result channel goes to that channel's waiter if there
is one; every other refusal is a `Refused` event. Retries back off: the first at `retry_first`
after a failure, doubling up to `retry_max`.

The adapter must call `sent(now)` after every frame that left (heartbeats are due after 1 s of
sending nothing), and `tick(now)` every `Timing.tick` seconds.
"""

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from shared import PROTOCOL_VERSION, channels
from shared.codec import DEFAULT_MAX_BODY_BYTES, decode_from_main
from shared.connection_file import ConnectionInfo
from shared.errors import ConnectionFileError, ProtocolError, WireCode
from shared.messages import (
    Body,
    Bye,
    ChannelReply,
    DeviceRef,
    ErrorNotice,
    Heartbeat,
    Hello,
    MainBody,
    Progress,
    Role,
    Welcome,
)

logger = logging.getLogger(__name__)

HEARTBEAT_AFTER_S = 1.0  # contract: a peer that has sent nothing for 1 s sends a heartbeat
MAIN_SILENT_S = 3.0  # contract: main heartbeats every second; 3 s of nothing means it is gone
# A host gateway waits longer: what it loses on a detach (requests in flight, its hosts' server
# sessions) costs more than a late notice, a busy main (ten hosts starting twenty servers on two
# cores) can fall silent for 3 s, and a local main that exits is seen at once by its pid.
HOST_MAIN_SILENT_S = 10.0
ATTACH_TIMEOUT_S = 5.0  # hello to welcome
RETRY_FIRST_S = 0.25  # a restarting main writes its file within moments
RETRY_MAX_S = 1.0  # a window finds a main that is back within a second
TICK_S = 0.25  # how often an adapter calls `tick`
MAIN_PID_CHECK_S = 1.0  # how often an idle adapter looks whether a local main's process still runs
REATTACH_GRACE_S = 10.0  # an asker's open questions wait this long for a lost main to come back


@dataclass(frozen=True)
class Timing:
    heartbeat_after: float = HEARTBEAT_AFTER_S
    main_silent: float = MAIN_SILENT_S
    attach_timeout: float = ATTACH_TIMEOUT_S
    retry_first: float = RETRY_FIRST_S
    retry_max: float = RETRY_MAX_S
    tick: float = TICK_S
    main_pid_check: float = MAIN_PID_CHECK_S
    give_up_after: float | None = None  # after a loss; None: try again for as long as it takes


@dataclass(frozen=True)
class Policy:
    reattach: bool = True  # after a loss, attach again by itself (the CLI's controller does not)
    retry_first_attach: bool = False  # a window keeps trying until a main answers; others say why at once


State = Literal["idle", "connecting", "hello-sent", "attached", "waiting", "closed"]


# ---- effects: what the adapter does -------------------------------------------------------------


@dataclass(frozen=True)
class Send:
    topic: str
    body: Body


@dataclass(frozen=True)
class Connect:
    """Read the connection file (main may have restarted with a new token), connect (or keep the
    socket if it reaches the same main), then call `connected(info)` or `connect_failed(why)`."""


@dataclass(frozen=True)
class Disconnect:
    """Close the socket."""


@dataclass(frozen=True)
class Welcomed:
    welcome: Welcome
    again: bool  # after a loss: main may have restarted, every list may differ


@dataclass(frozen=True)
class AttachFailed:
    why: str
    refusal: ErrorNotice | None = None  # main refused the hello (its code and message)
    stopping: bool = False  # the file still names the main that said bye
    retrying: bool = True  # False: the core gave up (no retry allowed)


@dataclass(frozen=True)
class Lost:
    why: str
    stopping: bool = False  # main said bye: it is stopping


@dataclass(frozen=True)
class GaveUp:
    why: str  # main did not come back within `give_up_after`


@dataclass(frozen=True)
class Pushed:
    topic: str
    body: MainBody  # an invoke, dismiss, servers, ...: no reply to a waiter


@dataclass(frozen=True)
class Refused:
    notice: ErrorNotice


Effect = Send | Connect | Disconnect | Welcomed | AttachFailed | Lost | GaveUp | Pushed | Refused


@dataclass(frozen=True)
class SocketWork:
    """The three effects only an adapter can carry out, each its own way."""

    send: Callable[[str, Body], object]
    connect: Callable[[], None]
    disconnect: Callable[[int], None]  # the linger in ms

    def do(self, effect: Effect, linger_ms: int = 0) -> bool:
        """Carry `effect` out if it is socket work; False for an event, the adapter's to act on."""
        match effect:
            case Send(topic, body):
                self.send(topic, body)
            case Connect():
                self.connect()
            case Disconnect():
                self.disconnect(linger_ms)
            case _:
                return False
        return True


class Waiter(Protocol):
    """Whoever waits on one response channel (a future, a question, a Qt signal)."""

    def reply(self, answer: ChannelReply) -> None: ...

    def progress(self, update: Progress) -> None: ...

    def refused(self, notice: ErrorNotice) -> None:
        """main refused what we sent on this (result) channel, e.g. `invalid-content`."""

    def lost(self, why: str) -> None:
        """main went away (or dropped this peer): no reply will come."""


class PeerCore:
    def __init__(self, *, role: Role, name: str, window: str, timing: Timing | None = None,
                 policy: Policy | None = None, device: DeviceRef | None = None, user: str | None = None) -> None:
        self.role = role
        self.name = name
        self.window = window
        self.device = device  # a web window's page: the paired device it speaks for (hello extension)
        self.user = user  # a desktop window's OS user (hello extension): the audit names who answered
        self.timing = timing or Timing()
        self.policy = policy or Policy()
        self.state: State = "idle"
        self.welcome: Welcome | None = None
        self.info: ConnectionInfo | None = None
        self.dropped_replies = 0  # replies for channels nobody waits on
        self._waiters: dict[str, Waiter] = {}
        self._ever_welcomed = False
        self._reattaching = False  # lost since the last welcome: failures are retried
        self._lost_at = 0.0
        self._failures = 0
        self._next_attempt = 0.0
        self._connected_at = 0.0
        self._last_sent = 0.0
        self._last_heard = 0.0
        self._stopping_token = ""  # the token of the main that said bye

    # ---- queries ------------------------------------------------------------------------------

    @property
    def attached(self) -> bool:
        return self.state == "attached"

    @property
    def max_message_bytes(self) -> int:
        welcome = self.welcome
        return (welcome.max_message_bytes if welcome else None) or DEFAULT_MAX_BODY_BYTES

    def hello(self) -> Hello:
        token = self.info.token if self.info else ""
        return Hello(protocol=PROTOCOL_VERSION, token=token, window=self.window, name=self.name,
                     role=self.role, device=self.device, user=self.user)

    # ---- waiters ------------------------------------------------------------------------------

    def expect(self, channel: str, waiter: Waiter) -> None:
        self._waiters[channel] = waiter

    def forget(self, channel: str) -> None:
        self._waiters.pop(channel, None)

    # ---- driving ------------------------------------------------------------------------------

    def attach(self, now: float) -> list[Effect]:
        """Attach now (a no-op while attached or already connecting)."""
        if self.state in ("attached", "connecting", "hello-sent"):
            return []
        self.state = "connecting"
        return [Connect()]

    def connected(self, info: ConnectionInfo, now: float) -> list[Effect]:
        """The adapter read `info` and has a socket connecting to its endpoint."""
        if self.state != "connecting":
            return [Disconnect()]
        if self._stopping_token and info.token == self._stopping_token:
            return self._failed("main is stopping (its connection file is still there)", now, stopping=True)
        self._stopping_token = ""
        self.info = info
        self.state = "hello-sent"
        self._connected_at = now
        return [Send(channels.HELLO, self.hello())]

    def connect_failed(self, why: str, now: float) -> list[Effect]:
        """No main to connect to (no file, a stale pid, a file that cannot be used)."""
        if self.state != "connecting":
            return []
        return self._failed(why, now)

    def sent(self, now: float) -> None:
        self._last_sent = now

    def feed(self, frames: list[bytes], now: float) -> list[Effect]:
        """Two frames as the DEALER received them; a bad frame counts as main's word, and is skipped."""
        self._last_heard = now
        try:
            topic, body = decode_from_main(frames)
        except ProtocolError as exc:
            logger.warning("ignored a bad frame from main: %s", exc)
            return []
        return self.receive(topic, body, now)

    def receive(self, topic: str, body: MainBody, now: float) -> list[Effect]:
        self._last_heard = now
        match body:
            case Heartbeat():
                return []
            case Welcome():
                return self._welcomed(body, now)
            case Bye():
                if self.state not in ("attached", "hello-sent"):
                    return []
                self._stopping_token = self.info.token if self.info else ""
                return self._lose("main is stopping", now, stopping=True)
            case ErrorNotice():
                return self._error(body, now)
            case ChannelReply():
                waiter = self._waiters.pop(topic, None)
                if waiter is None:
                    self.dropped_replies += 1
                    logger.debug("dropped a reply on %s: nobody waits on it", topic)
                else:
                    waiter.reply(body)
                return []
            case Progress():
                waiting = self._waiters.get(body.response_channel)
                if waiting is not None:
                    waiting.progress(body)
                return []
            case _:
                return [Pushed(topic, body)]

    def tick(self, now: float) -> list[Effect]:
        timing = self.timing
        if self.state == "attached":
            if now - self._last_heard > timing.main_silent:
                return self._lose(f"main silent for {now - self._last_heard:.1f} s", now)
            if now - self._last_sent >= timing.heartbeat_after:
                self._last_sent = now
                return [Send(channels.HEARTBEAT, Heartbeat())]
        elif self.state == "hello-sent" and now - self._connected_at >= timing.attach_timeout:
            return self._failed(f"main did not answer within {timing.attach_timeout:.0f} s", now)
        elif self.state == "waiting":
            grace = timing.give_up_after
            if grace is not None and self._reattaching and now - self._lost_at >= grace:
                self._reset()
                return [GaveUp(f"main did not come back within {grace:.0f} s")]
            if now >= self._next_attempt:
                return self.attach(now)
        return []

    def lose(self, why: str, now: float) -> list[Effect]:
        """The adapter saw main go (its pid is gone): as silence would, at once."""
        if self.state not in ("attached", "hello-sent"):
            return []
        return self._lose(why, now)

    def detach(self) -> list[Effect]:
        """Say bye and stay idle until `attach`."""
        effects: list[Effect] = [Send(channels.BYE, Bye())] if self.state in ("attached", "hello-sent") else []
        self._tell_lost("this peer detached")
        self._reset()
        return [*effects, Disconnect()]

    def close(self) -> list[Effect]:
        effects = self.detach()
        self.state = "closed"
        return effects

    # ---- inside -------------------------------------------------------------------------------

    def _welcomed(self, welcome: Welcome, now: float) -> list[Effect]:
        if self.state != "hello-sent":
            return []
        again = self._ever_welcomed
        self.state = "attached"
        self.welcome = welcome
        self._ever_welcomed = True
        self._reattaching = False
        self._failures = 0
        return [Welcomed(welcome, again)]

    def _error(self, notice: ErrorNotice, now: float) -> list[Effect]:
        if notice.topic == channels.HELLO and self.state == "hello-sent":
            return self._failed(f"main refused us: {notice.code}: {notice.message}", now, refusal=notice)
        if notice.code == WireCode.NOT_ATTACHED:
            if self.state != "attached":
                return []  # refusals of what we sent before this hello: one hello answers them all
            return self._lose("main no longer has this peer attached", now, keep_socket=True)
        waiter = self._waiters.get(notice.topic or "")
        if waiter is not None and notice.topic is not None and channels.is_result_channel(notice.topic):
            waiter.refused(notice)
            return []
        return [Refused(notice)]

    def _lose(self, why: str, now: float, *, stopping: bool = False, keep_socket: bool = False) -> list[Effect]:
        logger.info("lost main: %s", why)
        self._tell_lost(why)
        effects: list[Effect] = [] if keep_socket else [Disconnect()]
        effects.append(Lost(why, stopping))
        if not self.policy.reattach:
            self._reset()
            return effects
        self._reattaching = True
        self._lost_at = now
        self._failures = 0
        self.state = "connecting"
        return [*effects, Connect()]  # at once: a restarted main may be there already

    def _failed(self, why: str, now: float, *, refusal: ErrorNotice | None = None,
                stopping: bool = False) -> list[Effect]:
        retrying = self._reattaching or self.policy.retry_first_attach
        if retrying:
            self.state = "waiting"
            self._failures += 1
            delay = self.timing.retry_first * 2 ** (self._failures - 1)
            self._next_attempt = now + min(delay, self.timing.retry_max)
        else:
            self._reset()
        return [Disconnect(), AttachFailed(why, refusal, stopping, retrying)]

    def _tell_lost(self, why: str) -> None:
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.lost(why)

    def _reset(self) -> None:
        if self.state != "closed":
            self.state = "idle"
        self._reattaching = False
        self._failures = 0


def curve_options(info: ConnectionInfo, path: str | os.PathLike[str]) -> list[tuple[int, bytes]]:
    """The socket options (before connect) a DEALER needs for the main `info` names: for a tcp file
    main's `serverKey` and the keypair `elicitron pair` wrote into it; none for an ipc file. Raises
    ConnectionFileError for a file that names main's key but holds no client keypair (main would
    never answer it)."""
    if not info.server_key:
        return []
    if not (info.client_public_key and info.client_secret_key):
        raise ConnectionFileError(f"{path} names a tcp endpoint without a client keypair; make one with "
                                  "`elicitron pair` on main's machine")
    import zmq  # only the constants; the core itself opens nothing

    return [(int(zmq.CURVE_SERVERKEY), info.server_key.encode("ascii")),
            (int(zmq.CURVE_PUBLICKEY), info.client_public_key.encode("ascii")),
            (int(zmq.CURVE_SECRETKEY), info.client_secret_key.encode("ascii"))]
