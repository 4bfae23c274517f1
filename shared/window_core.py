"""WindowCore: what a window does with the requests main pushes, with no Qt and no I/O.

The Qt window (renderer_process/main_window.py) and a browser page's peer (web_process/page_peer.py)
both feed it what main pushes (welcome, invoke, dismiss, peers, the refusal of an answer) and what
their user does (answer, "Answer here", close a card unanswered); it returns `Effect`s, plain values
saying what to show and what to send, and the window only renders them. So both windows show the
same cards, the same queue and the same "waiting in another window" list.

One request's life in a window (`slots`: how many cards it shows at once; the Qt window 1, a page
as many as there are):

            ┌──────────── peers: its origin window is attached ───────────► elsewhere
            │                                                                  │
 invoke ──► queued ◄──── "Answer here", or its origin window left ─────────────┘
 welcome    │   ▲
            │   └──────── main refused the answer (invalid-content, not-sent) ◄──────┐
            └── a slot is free ──► shown ──── answer ────────────────────────────► sent
                                     └── give_back: not shown here until a welcome replays it

 From any state, dismiss, a welcome that no longer lists it, or main stopped: gone (`_forget`, the
 one close path: a shown card is withdrawn saying why, an answered one closed).

Origin affinity: a request whose `origin` is another renderer window attached right now (per main's
latest `peers`; none yet counts as gone) is that window's: it waits "elsewhere", with that window's
name, until the user chooses "Answer here" (it stays here after that) or that window detaches.
Every other request (origin this window, null, a controller or host, a window that is gone) is
queued here, oldest first. A shown card is never moved elsewhere: the user may be filling it in.

Replay: a welcome lists every open channel (`pending`, and `pendingChannels` for those whose invokes
follow it); whatever the window holds that is not listed was resolved while it was away. The
welcome's `peers` (extension) places every replayed request by its origin at once. From a main
that sends `peers` only after the welcome, no card is shown until that list came, an invoke came,
or the window calls `settle()` (on its next loop turn), so a request another window is showing is
not put in front of the user; that turn can end before the list arrives (a race the extension ends).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared.card_queue import CardQueue
from shared.errors import WireCode
from shared.messages import (
    HOST_GONE,
    Action,
    ElicitationDismiss,
    ElicitationInvoke,
    ErrorNotice,
    GrantChoice,
    PeerInfo,
    QuorumInfo,
    Remember,
    Welcome,
)

NOT_SENT = "not-sent"
"""Local code (not on the wire) of the ErrorNotice a window makes when its answer could not be sent."""

REQUEUE_CODES = frozenset({WireCode.INVALID_CONTENT.value, NOT_SENT})  # still pending: ask again
NO_LONGER_OPEN = "this request is no longer open here"
ELSEWHERE_MESSAGE_CHARS = 120
_DISMISS_TEXT = {"cancelled": "cancelled by the server", "expired": "expired", "server-closed": "server closed"}


# ---- effects: what the window renders -----------------------------------------------------------


@dataclass(frozen=True)
class Show:
    """Put this request's card up."""

    invoke: ElicitationInvoke


@dataclass(frozen=True)
class Withdraw:
    """Take a shown card down unanswered; `why` is for the user ("demo: expired")."""

    invoke: ElicitationInvoke
    why: str
    brief: bool = False  # worth a glance, not a long stay (the server cancelled it)
    dismiss: ElicitationDismiss | None = None  # None: a welcome no longer lists it, or main stopped


@dataclass(frozen=True)
class SendAnswer:
    """Send this answer on the request's channel (`invoke.response_channel`)."""

    invoke: ElicitationInvoke
    action: Action
    content: dict[str, Any] | None
    remember: Remember | None
    reason: str | None = None  # an approval denied: why, for the agent (shared/denial_reason.py)
    grant: GrantChoice | None = None  # an approval allowed: what the allow covers besides its call


@dataclass(frozen=True)
class NotOpen:
    """An answer to a request this window does not show: nothing was sent."""

    channel: str
    why: str = NO_LONGER_OPEN


@dataclass(frozen=True)
class AnswerRefused:
    """main (or the window's own socket) refused an answer; with `again` its card is asked again."""

    invoke: ElicitationInvoke
    message: str
    again: bool


@dataclass(frozen=True)
class Closed:
    """A request this window answered is over: its dismissal came."""

    invoke: ElicitationInvoke
    dismiss: ElicitationDismiss


@dataclass(frozen=True)
class Arrived:
    """Requests that just became this window's to answer (to announce when the user is away)."""

    invokes: tuple[ElicitationInvoke, ...]


@dataclass(frozen=True)
class Elsewhere:
    """One request waiting in another window: `window` is that window's name."""

    invoke: ElicitationInvoke
    window: str


@dataclass(frozen=True)
class ElsewhereChanged:
    """The "waiting in another window" list is now `items`, oldest first."""

    items: tuple[Elsewhere, ...]


def host_gone_text(invoke: ElicitationInvoke) -> str:
    """What a card whose MCP host stopped waiting (a dismiss with cause HOST_GONE) becomes, in the
    Qt window's status line and in place of the page's card: who left, and whose request went."""
    return f"{invoke.via or 'the host'} stopped waiting: {invoke.request.server} request withdrawn"


def quorum_text(quorum: QuorumInfo) -> str:
    """ "1 of 2 approvals (ana)": what a quorum approval's card shows, the same in both windows."""
    who = f" ({', '.join(quorum.approved)})" if quorum.approved else ""
    return f"{len(quorum.approved)} of {quorum.needed} approvals{who}"


def elsewhere_text(item: Elsewhere) -> str:
    """ "demo: Pick a colour — in window “left”": one line of the list, the same in both windows."""
    message = str(item.invoke.request.params.get("message", ""))
    if len(message) > ELSEWHERE_MESSAGE_CHARS:
        message = message[: ELSEWHERE_MESSAGE_CHARS - 1] + "…"
    return f"{item.invoke.request.server}: {message} — in window “{item.window}”"


Effect = Show | Withdraw | SendAnswer | NotOpen | AnswerRefused | Closed | Arrived | ElsewhereChanged


class WindowCore:
    def __init__(self, window: str, *, slots: int | None = 1) -> None:
        """`window`: this window's id (its hello's); `slots`: cards shown at once, None for all."""
        self.window = window
        self.session = ""  # main's session of the last welcome
        self._slots = slots
        self._peers: dict[str, PeerInfo] | None = None  # None: no `peers` list since main (re)started
        self._shown: dict[str, ElicitationInvoke] = {}  # in the order they were shown
        self._queue = CardQueue()
        self._elsewhere: dict[str, ElicitationInvoke] = {}
        self._sent: dict[str, ElicitationInvoke] = {}  # answered, not yet dismissed
        self._adopted: set[str] = set()  # "Answer here": stays this window's
        self._settled = True  # False from a welcome until its peers list (or `settle`)
        self._listed: tuple[Elsewhere, ...] = ()  # the elsewhere list as last told

    # ---- what the window shows ----------------------------------------------------------------

    @property
    def shown(self) -> tuple[ElicitationInvoke, ...]:
        return tuple(self._shown.values())

    @property
    def queued(self) -> tuple[ElicitationInvoke, ...]:
        return tuple(self._queue.items())

    @property
    def elsewhere(self) -> tuple[Elsewhere, ...]:
        items = sorted(self._elsewhere.values(), key=lambda item: item.created_at)
        return tuple(Elsewhere(item, self._owner(item) or "?") for item in items)

    @property
    def waiting_count(self) -> int:
        """Requests waiting for an answer here: the cards shown and the queue."""
        return len(self._shown) + len(self._queue)

    def summary(self) -> str:
        """ "2 more waiting (demo: 1, weather: 1)" besides the shown cards, or ""."""
        return self._queue.summary()

    def is_shown(self, channel: str) -> bool:
        return channel in self._shown

    def open_channels(self) -> set[str]:
        """Every request this window holds: shown, queued, elsewhere or answered."""
        return {*self._shown, *self._queue.channels(), *self._elsewhere, *self._sent}

    # ---- what main pushes ---------------------------------------------------------------------

    def welcomed(self, welcome: Welcome) -> list[Effect]:
        """Keep what main still holds (the replay), drop the rest; cards wait for `peers`/`settle`."""
        if welcome.session != self.session:  # a (re)started main: its own peers
            self.session = welcome.session
            self._peers = None
        if welcome.peers is not None:  # this main lists them in the welcome: placed by origin at once
            self._peers = {peer.window: peer for peer in welcome.peers}
        listed = welcome.pending_channels
        pending = set(listed) if listed is not None else set()
        pending |= {item.response_channel for item in welcome.pending}
        effects: list[Effect] = []
        self._sent.clear()  # main's list says what is still open; it is asked again if it is
        for channel in [*self._shown, *self._queue.channels(), *self._elsewhere]:
            if channel not in pending:
                effects += self._forget(channel, None, "request is no longer pending")
        self._adopted &= pending
        self._settled = welcome.peers is not None
        for item in welcome.pending:
            self._place(item)
        self._replace_all()
        ours = tuple(item for item in welcome.pending if item.response_channel not in self._elsewhere)
        if ours:
            effects.append(Arrived(ours))
        return effects + self._after()

    def settle(self) -> list[Effect]:
        """The welcome's turn is over (its `peers` had its chance to land): show what waits."""
        self._settled = True
        return self._after()

    def peers(self, peers: Iterable[PeerInfo]) -> list[Effect]:
        """main's list of attached peers: re-place every request by its origin's window."""
        self._peers = {peer.window: peer for peer in peers}
        self._settled = True
        self._replace_all()
        return self._after()

    def invoked(self, invoke: ElicitationInvoke) -> list[Effect]:
        channel = invoke.response_channel
        if invoke.quorum is not None and channel in self.open_channels():
            return self._recounted(invoke)
        if channel in self._sent or channel in self._shown:
            return []  # a repeat of what is answered or on screen
        self._place(invoke)
        self._settled = True  # as a Qt window always did: an invoke shows at once
        effects: list[Effect] = [] if channel in self._elsewhere else [Arrived((invoke,))]
        return effects + self._after()

    def _recounted(self, invoke: ElicitationInvoke) -> list[Effect]:
        """A quorum approval sent again with a new count (PROTOCOL.md §11): a shown card shows it;
        one this window approved comes back, with the count, until it is decided."""
        channel = invoke.response_channel
        if channel in self._shown:
            self._shown[channel] = invoke
            return [Show(invoke)]
        self._sent.pop(channel, None)
        self._queue.remove(channel)
        self._elsewhere.pop(channel, None)
        self._place(invoke)
        return self._after()

    def dismissed(self, dismiss: ElicitationDismiss) -> list[Effect]:
        return self._forget(dismiss.response_channel, dismiss, self._reason(dismiss)) + self._after()

    def refused(self, notice: ErrorNotice) -> list[Effect]:
        """main refused what was sent on `notice.topic`; only an answer of ours concerns the cards."""
        invoke = self._sent.pop(notice.topic, None) if notice.topic else None
        if invoke is None:
            return []
        again = notice.code in REQUEUE_CODES
        if again:
            self._place(invoke)
        return [AnswerRefused(invoke, notice.message, again), *self._after()]

    def cleared(self, why: str) -> list[Effect]:
        """main stopped: it cancelled every request, nothing here can be answered any more."""
        effects: list[Effect] = []
        for channel in [*self._shown, *self._queue.channels(), *self._elsewhere, *self._sent]:
            effects += self._forget(channel, None, why, per_server=False)
        return effects + self._after()

    # ---- what the user does -------------------------------------------------------------------

    def answer(self, channel: str, action: Action, content: dict[str, Any] | None = None,
               remember: Remember | None = None, reason: str | None = None,
               grant: GrantChoice | None = None) -> list[Effect]:
        invoke = self._shown.pop(channel, None)
        if invoke is None:
            return [NotOpen(channel)]
        self._sent[channel] = invoke
        return [SendAnswer(invoke, action, content, remember, reason, grant), *self._after()]

    def answer_here(self, channel: str) -> list[Effect]:
        """Make a request waiting in another window this window's (it comes in queue order)."""
        invoke = self._elsewhere.pop(channel, None)
        if invoke is None:
            return []
        self._adopted.add(channel)
        self._queue.push(invoke)
        return self._after()

    def give_back(self, channel: str) -> list[Effect]:
        """A shown card went away unanswered (a link's page reported it done): it stays pending
        for main to close, this window shows it no more (until a welcome replays it) and the next
        card takes its place."""
        self._shown.pop(channel, None)
        return self._after()

    # ---- inside -------------------------------------------------------------------------------

    def _owner(self, invoke: ElicitationInvoke) -> str | None:
        """The name of the other attached window `invoke` belongs to; None if it is ours."""
        origin = invoke.origin
        if not origin or origin == self.window or self._peers is None:
            return None
        if invoke.response_channel in self._adopted:
            return None
        peer = self._peers.get(origin)
        if peer is None or peer.role != "renderer":
            return None
        return peer.name or origin

    def _place(self, invoke: ElicitationInvoke) -> None:
        """Queue `invoke` here, or list it as waiting in its own window; a shown card stays."""
        channel = invoke.response_channel
        if channel in self._shown:
            return
        if self._owner(invoke) is not None:
            self._queue.remove(channel)
            self._elsewhere[channel] = invoke
        else:
            self._elsewhere.pop(channel, None)
            self._queue.push(invoke)

    def _replace_all(self) -> None:
        for item in [*self._elsewhere.values(), *self._queue.items()]:
            self._place(item)

    def _forget(self, channel: str, dismiss: ElicitationDismiss | None, reason: str,
                *, per_server: bool = True) -> list[Effect]:
        """The one close path: `channel` is gone from this window, whatever it was here. `reason`
        says why, after the request's server unless `per_server` is False."""
        self._adopted.discard(channel)
        self._elsewhere.pop(channel, None)
        self._queue.remove(channel)
        shown = self._shown.pop(channel, None)
        if shown is not None:
            if dismiss is not None and dismiss.cause == HOST_GONE:  # the user should learn who left
                return [Withdraw(shown, host_gone_text(shown), False, dismiss)]
            brief = dismiss is not None and dismiss.reason == "cancelled"
            why = f"{shown.request.server}: {reason}" if per_server else reason
            return [Withdraw(shown, why, brief, dismiss)]
        sent = self._sent.pop(channel, None)
        return [Closed(sent, dismiss)] if sent is not None and dismiss is not None else []

    def _after(self) -> list[Effect]:
        """Tell a changed elsewhere list (first: a request taken from it leaves it before its card
        shows) and fill the free slots, once settled."""
        effects: list[Effect] = []
        listed = self.elsewhere
        if listed != self._listed:
            self._listed = listed
            effects.append(ElsewhereChanged(listed))
        while self._settled and (self._slots is None or len(self._shown) < self._slots):
            invoke = self._queue.pop_oldest()
            if invoke is None:
                break
            self._shown[invoke.response_channel] = invoke
            effects.append(Show(invoke))
        return effects

    def _reason(self, dismiss: ElicitationDismiss) -> str:
        if dismiss.reason == "answered" and dismiss.rule is not None:
            return f"answered by rule {dismiss.rule}"
        if dismiss.reason == "answered":
            return "answered" if dismiss.by == self.window else "answered in another window"
        return _DISMISS_TEXT.get(dismiss.reason, dismiss.reason)
