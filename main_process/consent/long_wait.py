"""Approvals that take longer than a host waits: a person deciding on a phone takes minutes, hosts
give up on a call after a minute or so (issue 36, item 4).

While a host's `tools/call` waits on its approval card:

- a host that sent a `progressToken` gets a progress notification every `progress_every_s`
  ("waiting for approval on <machine>"; relay/progress.py writes it), which keeps a host that resets
  its timeout on progress waiting;
- a host that sent none gets, at `retry_after_s`, a tool error saying the approval is still pending
  and to retry the same call. The card stays open. The retry (same session, server, tool and
  arguments, by digest) waits on that card rather than opening a second one; once the person
  answered, the decision is kept for `kept_s` and answers the retry (allowed: it runs; denied: the
  denial), once;
- a host that speaks tasks gets a task for the call instead (relay/host_tasks.py, `in_task`): no
  retry deadline, and no progress once the host holds the task.

The card itself is opened by tool_approval.py, with a `SharedCard` in place of the host's call: it
hands the answer to whichever calls wait on it then, or keeps it for the retry.
"""

import hashlib
import json
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from main_process.clock import Clock, Timer
from main_process.wire.peers import Peer
from shared.messages import ChannelReply

logger = logging.getLogger(__name__)

MAX_KEPT: Final = 1000  # decisions kept for a retry, all sessions together
SessionKey = tuple[bytes, str]  # (the host peer's routing id, its session's name)
Token = int | str


@dataclass(frozen=True)
class WaitSettings:
    progress_every_s: float = 5.0
    retry_after_s: float = 50.0  # below the 60 s most hosts give a call
    kept_s: float = 300.0
    machine: str = field(default_factory=socket.gethostname)
    tasks_per_session: int = 32  # a host's unfinished tasks (relay/host_tasks.py)
    task_after_s: float = 10.0  # a 2026-07-28 host that declared tasks gets one after this long
    task_ttl_s: float = 3600.0  # the longest a task is kept, whatever ttl the host asks

    @property
    def waiting_message(self) -> str:
        return f"waiting for approval on {self.machine}"


class Progress(Protocol):
    """A session's progress notifications to its host (relay/progress.py's HostProgress)."""

    def send(self, token: Token) -> None: ...

    def later(self, callback: Callable[[], None]) -> Timer: ...


@dataclass(frozen=True)
class HostWait:
    """What the relay says of a host's call that may wait: its session, and its progress token."""

    session: SessionKey
    token: Token | None
    progress: Progress
    in_task: bool = False  # the host holds a task for it: it waits as long as the task lives, no "retry"
    listening: Callable[[], bool] = lambda: True  # False once the host got a task for it: no more progress


class WaitingCall(Protocol):
    """A host's call as tool_approval.py holds it (`_HostCall`)."""

    server: Any  # ManagedServer (its name, for the key and the sentence)
    tool: str
    arguments: dict[str, Any]
    host: Peer
    wait: HostWait | None
    cancelled: bool

    def reply(self, answer: ChannelReply) -> None: ...

    def stage(self, cancel: Callable[[], object] | None) -> None: ...

    def run(self) -> None: ...


@dataclass(frozen=True)
class CallKey:
    """One exact call: a retry must match all of it."""

    session: SessionKey
    server: str
    tool: str
    digest: str


def key_of(call: WaitingCall, session: SessionKey) -> CallKey:
    canonical = json.dumps(call.arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return CallKey(session, call.server.name, call.tool, hashlib.sha256(canonical.encode()).hexdigest())


def still_pending_result(server: str, tool: str, machine: str) -> dict[str, Any]:
    """The tool error a host with no progress token gets at the deadline: what the model should do."""
    text = (f"The approval of {server}/{tool} is still pending: the user has not answered it yet in "
            f"Elicitron on {machine}. {server}/{tool} was not called yet. Call it again with exactly the same "
            f"arguments to get the user's decision (no new approval request is shown).")
    return {"content": [{"type": "text", "text": text}], "isError": True}


Settle = Callable[[WaitingCall], None]  # the person's decision applied to a call: run it, or answer it


@dataclass(eq=False)
class _Waiter:
    call: WaitingCall
    timer: Timer | None = None


@dataclass(eq=False)
class _Kept:
    settle: Settle
    timer: Timer


class LongWaits:
    """Every approval card host calls may wait on longer than their host does; main has one."""

    def __init__(self, settings: WaitSettings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock
        self._cards: dict[CallKey, SharedCard] = {}  # cards a retry may join (their call got "pending")
        self._kept: dict[CallKey, _Kept] = {}

    def ask(self, call: WaitingCall, open_card: Callable[["SharedCard"], None]) -> None:
        """Call `open_card` for the call, unless a decision kept for it answers it or it is the retry
        of a call whose card is still open (then it waits on that one)."""
        wait = call.wait
        assert wait is not None
        key = key_of(call, wait.session)
        kept = self._kept.pop(key, None)
        if kept is not None:
            kept.timer.cancel()
            logger.info("host %r: %s/%s answered by the decision on its earlier call", call.host.name,
                        key.server, key.tool)
            kept.settle(call)
            return
        card = self._cards.get(key)
        if card is not None:
            logger.info("host %r: the retry of %s/%s waits on its open card", call.host.name, key.server, key.tool)
            card.join(call)
            return
        card = SharedCard(self, key, call)
        card.join(call)
        open_card(card)

    def session_ended(self, session: SessionKey) -> None:
        """The host's session ended: nobody will retry there. Its open cards go, its decisions too."""
        for key in [key for key in self._kept if key.session == session]:
            self._kept.pop(key).timer.cancel()
        for key in [key for key in self._cards if key.session == session]:
            self._cards.pop(key).end()

    def _expect_retry(self, card: "SharedCard") -> None:
        self._cards[card.key] = card

    def _settled(self, card: "SharedCard", settle: Settle, keep: bool) -> None:
        if self._cards.get(card.key) is card:
            del self._cards[card.key]
        if not keep:
            return
        old = self._kept.pop(card.key, None)
        if old is not None:
            old.timer.cancel()
        if len(self._kept) >= MAX_KEPT:
            self._kept.pop(next(iter(self._kept))).timer.cancel()
        self._kept[card.key] = _Kept(settle, self.clock.call_later(self.settings.kept_s, self._forget, card.key,
                                                                   settle))

    def _forget(self, key: CallKey, settle: Settle) -> None:
        kept = self._kept.get(key)
        if kept is not None and kept.settle is settle:
            del self._kept[key]


class SharedCard:
    """Stands for the host's call where tool_approval.py opens the card (`WaitingCall`): the calls
    waiting on it get the answer; if none waits but one was told to retry, the answer is kept."""

    def __init__(self, waits: LongWaits, key: CallKey, first: WaitingCall) -> None:
        self._waits = waits
        self.key = key
        self.server, self.tool, self.arguments, self.host = first.server, first.tool, first.arguments, first.host
        self.wait = first.wait
        self._waiting: list[_Waiter] = []
        self._retry_expected = False  # a call was told "still pending": its retry will come
        self._ended = False  # the session ended: nobody will retry
        self._settled = False
        self._withdraw: Callable[[], object] | None = None

    @property
    def cancelled(self) -> bool:
        """Nobody waits for the answer (the card was withdrawn for that)."""
        return not self._waiting and (not self._retry_expected or self._ended)

    def stage(self, cancel: Callable[[], object] | None) -> None:
        self._withdraw = cancel

    def run(self) -> None:
        self._settle(lambda call: call.run())

    def reply(self, answer: ChannelReply) -> None:
        self._settle(lambda call: call.reply(answer))

    def join(self, call: WaitingCall) -> None:
        waiter = _Waiter(call)
        self._waiting.append(waiter)
        call.stage(lambda: self._left(waiter))
        wait = call.wait
        assert wait is not None
        if wait.token is not None:
            waiter.timer = wait.progress.later(lambda: self._tick(waiter))
        elif not wait.in_task:
            waiter.timer = self._waits.clock.call_later(self._waits.settings.retry_after_s, self._deadline, waiter)

    def end(self) -> None:
        self._ended = True
        if not self._waiting and self._withdraw is not None:
            self._withdraw()

    def _tick(self, waiter: _Waiter) -> None:
        wait = waiter.call.wait
        if waiter not in self._waiting or wait is None or wait.token is None or not wait.listening():
            return
        wait.progress.send(wait.token)
        waiter.timer = wait.progress.later(lambda: self._tick(waiter))

    def _deadline(self, waiter: _Waiter) -> None:
        if waiter not in self._waiting:
            return
        self._waiting.remove(waiter)
        self._retry_expected = True
        self._waits._expect_retry(self)
        call = waiter.call
        call.stage(None)  # answered: the host's cancel of it now means nothing here
        logger.info("host %r: %s/%s still waits for its approval after %.0f s; told to retry", call.host.name,
                    self.key.server, self.key.tool, self._waits.settings.retry_after_s)
        call.reply(ChannelReply(result=still_pending_result(self.key.server, self.key.tool,
                                                            self._waits.settings.machine)))

    def _left(self, waiter: _Waiter) -> None:
        """The host cancelled this call (or its session ended)."""
        if waiter not in self._waiting:
            return
        self._waiting.remove(waiter)
        if waiter.timer is not None:
            waiter.timer.cancel()
        if self.cancelled and self._withdraw is not None:
            self._withdraw()

    def _settle(self, settle: Settle) -> None:
        if self._settled:
            return
        self._settled = True
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            if waiter.timer is not None:
                waiter.timer.cancel()
            waiter.call.stage(None)
        self._waits._settled(self, settle, keep=not waiting and self._retry_expected and not self._ended)
        for waiter in waiting:
            settle(waiter.call)
