"""One event loop driving a running main: tool calls from a controller, answers from renderers that
attach and detach at random, and a record of everything each peer saw.

Each call `book_table(restaurant="soak-<n>")` makes exactly one elicitation whose message names
`soak-<n>`, which is how a request is tied to its call. Every call gets a plan, drawn from the seed:

    accept / decline / cancel   one window answers after a short random delay
    race                        two windows answer at once; main must take one, refuse the other
    invalid                     a window first sends content the schema refuses, then a valid accept
    none                        nobody answers: the request expires and the server gets cancel

Nothing waits by sleeping: the loop blocks in zmq.Poller until a message or the next timer.
"""

import heapq
import itertools
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import zmq
from kit.contract import DISMISS, INVOKE
from kit.peer import WirePeer

IGNORED = {"heartbeat", "peers", "servers"}  # background traffic main sends every welcomed peer

PLANS = ("accept", "decline", "cancel", "race", "invalid", "none")
PLAN_WEIGHTS = (44, 14, 12, 14, 12, 4)
CUISINES = ("french", "japanese", "mexican")
NAME_PARTS = ("Ada", "Zoë", "李", "O'Brien", "\"quoted\"", "🍽", "Ñandú", "a\\b", "tab\there", "x" * 40)
_MESSAGE = re.compile(r"^Book a table at soak-(\d+)\?$")


@dataclass
class Attempt:
    window: str
    peer: str
    action: str
    content: dict[str, Any] | None
    invalid: bool  # sent on purpose with content the schema refuses
    race: bool
    outcome: str | None = None  # "accepted" or the error code main answered


@dataclass
class Elicitation:
    channel: str
    call_id: int
    server: str
    origin: str | None
    plan: str
    holders: set[str] = field(default_factory=set)  # windows main sent it to (invoke or welcome.pending)
    attempts: list[Attempt] = field(default_factory=list)
    dismissals: dict[str, dict[str, Any]] = field(default_factory=dict)  # window -> dismiss body
    scheduled: bool = False
    executed_as: str | None = None  # the plan as it could be carried out (a race needs two windows)


@dataclass
class Call:
    id: int
    server: str
    channel: str
    plan: str
    sent_at: float = 0.0
    replies: list[dict[str, Any]] = field(default_factory=list)
    replied_at: float | None = None
    elicitation: str | None = None


@dataclass
class Stats:
    attached: int = 0
    detached_bye: int = 0
    detached_silent: int = 0
    blackouts: int = 0
    max_attached: int = 0
    welcomed_with_pending: int = 0  # invokes first delivered to a window in its welcome


class Soak:
    def __init__(self, *, endpoint: str, token: str, servers: list[str], elicitations: int, concurrency: int,
                 seed: int, max_windows: int = 6, churn_mean_s: float = 0.25) -> None:
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.endpoint = endpoint
        self.token = token
        self.servers = servers
        self.rng = random.Random(seed)
        self.concurrency = concurrency
        self.max_windows = max_windows
        self.churn_mean_s = churn_mean_s
        self.calls = [Call(id=i, server=servers[i % len(servers)], channel=f"soak-call-{i}",
                           plan=self.rng.choices(PLANS, PLAN_WEIGHTS)[0]) for i in range(elicitations)]
        self.elicitations: dict[str, Elicitation] = {}
        self.problems: list[str] = []
        self.notices: list[dict[str, Any]] = []
        self.stats = Stats()
        self.controller = WirePeer(endpoint, token, name="soak-controller", role="controller", context=self.ctx)
        self.windows: list[WirePeer] = []  # renderers, open or closed
        self.poller = zmq.Poller()
        self.poller.register(self.controller.sock, zmq.POLLIN)
        self._by_sock: dict[Any, WirePeer] = {self.controller.sock: self.controller}
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._next_call = 0
        self._in_flight = 0
        self._window_names = itertools.count()
        self.started_at = 0.0
        self.finished_at = 0.0
        self._server_status: dict[str, str] = {}

    # ---- plumbing --------------------------------------------------------------------------

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def at(self, delay_s: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (time.monotonic() + delay_s, next(self._seq), action))

    def _poll(self, until: float) -> None:
        """Handle every message that arrives and every timer that falls due, until `until`."""
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, action = heapq.heappop(self._timers)
            action()
        for peer in [self.controller, *self.windows]:
            peer.heartbeat_if_due(now)
        wake = min([until, now + 0.2] + ([self._timers[0][0]] if self._timers else []))
        for sock, _ in self.poller.poll(max(0, int((wake - now) * 1000))):
            ready = self._by_sock.get(sock)
            if ready is None or ready.closed:
                continue
            for topic, body in ready.receive():
                if ready is self.controller:
                    self._on_controller(topic, body)
                else:
                    self._on_window(ready, topic, body)

    # ---- start -----------------------------------------------------------------------------

    def wait_ready(self, timeout_s: float) -> None:
        """Attach the controller and wait until every server reports `ready`."""
        self.controller.send_hello()
        deadline = time.monotonic() + timeout_s
        while not self._servers_ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"servers not ready within {timeout_s:.0f} s: {self._server_status}")
            self._poll(deadline)

    def _servers_ready(self) -> bool:
        return bool(self._server_status) and all(self._server_status.get(s) == "ready" for s in self.servers)

    # ---- the run ---------------------------------------------------------------------------

    def run(self, deadline_s: float) -> None:
        self.started_at = time.monotonic()
        deadline = self.started_at + deadline_s
        for _ in range(3):
            self._attach()
        self.at(self.rng.expovariate(1 / self.churn_mean_s), self._churn)
        while time.monotonic() < deadline:
            self._issue_calls()
            if self._done():
                break
            self._poll(deadline)
        self.finished_at = time.monotonic()
        if not self._done():
            missing = sum(1 for c in self.calls if not c.replies)
            self.problem(f"deadline of {deadline_s:.0f} s passed with {missing} calls unanswered "
                         f"and {len(self._unresolved())} answers unconfirmed")
        # Main answers an attempt before or just after the call's result: collect the stragglers.
        grace = time.monotonic() + 5
        while self._unresolved() and time.monotonic() < grace:
            self._poll(grace)

    def close(self) -> None:
        for peer in [*self.windows, self.controller]:
            peer.close(bye=True)
        self.ctx.term()

    def _done(self) -> bool:
        return (self._next_call == len(self.calls) and all(c.replies for c in self.calls)
                and not self._unresolved())

    def _unresolved(self) -> list[Attempt]:
        return [a for e in self.elicitations.values() for a in e.attempts if a.outcome is None]

    def _issue_calls(self) -> None:
        while self._in_flight < self.concurrency and self._next_call < len(self.calls):
            call = self.calls[self._next_call]
            self._next_call += 1
            self._in_flight += 1
            call.sent_at = time.monotonic()
            self.controller.send("msgMcpCallTool", {"server": call.server, "tool": "book_table",
                                                    "arguments": {"restaurant": f"soak-{call.id}"},
                                                    "responseChannel": call.channel})

    # ---- the controller ----------------------------------------------------------------------

    def _on_controller(self, topic: str, body: Any) -> None:
        if topic == "welcome":
            self.controller.welcomed = True
            self._server_status = {s["name"]: s["status"] for s in body["servers"]}
        elif topic == "servers":
            self._server_status = {s["name"]: s["status"] for s in body["servers"]}
        elif topic in ("heartbeat", "peers"):
            pass
        elif topic == "notice":
            self.notices.append(body)
        elif topic.startswith("soak-call-"):
            call = self.calls[int(topic.removeprefix("soak-call-"))]
            if not call.replies:
                call.replied_at = time.monotonic()
                self._in_flight -= 1
            call.replies.append(body)
        else:
            self.problem(f"controller got unexpected {topic}: {str(body)[:200]}")

    # ---- windows -----------------------------------------------------------------------------

    def _attach(self) -> None:
        peer = WirePeer(self.endpoint, self.token, name=f"soak-window-{next(self._window_names)}",
                        role="renderer", context=self.ctx)
        self.windows.append(peer)
        self._by_sock[peer.sock] = peer
        self.poller.register(peer.sock, zmq.POLLIN)
        peer.send_hello()

    def _detach(self, peer: WirePeer, *, bye: bool) -> None:
        self.poller.unregister(peer.sock)
        peer.close(bye=bye)
        if bye:
            self.stats.detached_bye += 1
        else:
            self.stats.detached_silent += 1

    def _open_windows(self) -> list[WirePeer]:
        return [w for w in self.windows if w.welcomed and not w.closed]

    def _detachable(self) -> list[WirePeer]:
        """Windows with no answer awaiting main's verdict (so every attempt gets one)."""
        busy = {a.window for a in self._unresolved()}
        return [w for w in self._open_windows() if w.window not in busy]

    def _churn(self) -> None:
        open_windows = self._open_windows()
        opening = [w for w in self.windows if not w.welcomed and not w.closed]
        roll = self.rng.random()
        if roll < 0.03 and self._detachable():  # a blackout: every window goes, new ones come later
            self.stats.blackouts += 1
            for peer in self._detachable():
                self._detach(peer, bye=self.rng.random() < 0.7)
            for _ in range(self.rng.randint(1, 3)):
                self.at(self.rng.uniform(0.3, 0.8), self._attach)
        elif len(open_windows) + len(opening) < 2 or (roll < 0.5 and len(open_windows) < self.max_windows):
            self._attach()
        elif self._detachable():
            self._detach(self.rng.choice(self._detachable()), bye=self.rng.random() < 0.7)
        if self._next_call < len(self.calls) or any(not c.replies for c in self.calls):
            self.at(self.rng.expovariate(1 / self.churn_mean_s), self._churn)

    def _on_window(self, peer: WirePeer, topic: str, body: Any) -> None:
        if topic == "welcome":
            peer.welcomed = True
            self.stats.attached += 1
            self.stats.max_attached = max(self.stats.max_attached, len(self._open_windows()))
            for invoke in body["pending"]:
                if peer.window not in self._elicitation_for(invoke).holders:
                    self.stats.welcomed_with_pending += 1
                self._on_invoke(peer, invoke)
        elif topic == INVOKE:
            self._on_invoke(peer, body)
        elif topic == DISMISS:
            self._on_dismiss(peer, body)
        elif topic == "error":
            self._on_error(peer, body)
        elif topic == "notice":
            self.notices.append(body)
        elif topic not in IGNORED:
            self.problem(f"{peer.name} got unexpected {topic}: {str(body)[:200]}")

    def _elicitation_for(self, invoke: dict[str, Any]) -> Elicitation:
        channel = invoke["responseChannel"]
        known = self.elicitations.get(channel)
        if known is not None:
            return known
        match = _MESSAGE.match(str(invoke["request"]["params"].get("message", "")))
        if match is None or not 0 <= int(match[1]) < len(self.calls):
            self.problem(f"an invoke for no call of ours: {str(invoke)[:200]}")
            call = Call(id=-1, server="?", channel="?", plan="none")
        else:
            call = self.calls[int(match[1])]
        elicitation = Elicitation(channel=channel, call_id=call.id, server=invoke["request"]["server"],
                                  origin=invoke.get("origin"), plan=call.plan)
        if call.elicitation is not None and call.elicitation != channel:
            self.problem(f"call {call.id} elicited twice: {call.elicitation} and {channel}")
        call.elicitation = channel
        if elicitation.server != call.server:
            self.problem(f"call {call.id} to {call.server} elicited as {elicitation.server}")
        if elicitation.origin != self.controller.window:
            self.problem(f"{channel}: origin {elicitation.origin}, expected the controller's window")
        self.elicitations[channel] = elicitation
        return elicitation

    def _on_invoke(self, peer: WirePeer, invoke: dict[str, Any]) -> None:
        elicitation = self._elicitation_for(invoke)
        if peer.window in elicitation.holders:
            self.problem(f"{peer.name} was sent {elicitation.channel} twice")
        elicitation.holders.add(peer.window)
        if not elicitation.scheduled:
            elicitation.scheduled = True
            self.at(self.rng.uniform(0.0, 0.15), lambda: self._answer(elicitation))

    def _answer(self, elicitation: Elicitation) -> None:
        """Carry out the plan with the windows that hold the request now."""
        if elicitation.plan == "none":
            elicitation.executed_as = "none"
            return
        holders = [w for w in self._open_windows() if w.window in elicitation.holders]
        if not holders:  # every window that had it went away: a new one gets it in its welcome
            self.at(0.1, lambda: self._answer(elicitation))
            return
        if elicitation.plan == "race" and len(holders) >= 2:
            elicitation.executed_as = "race"
            first, second = self.rng.sample(holders, 2)
            # Both leave in the same instant; main must take exactly one.
            self._send_answer(elicitation, first, *self._random_answer(), race=True)
            self._send_answer(elicitation, second, *self._random_answer(), race=True)
            return
        peer = self.rng.choice(holders)
        if elicitation.plan == "invalid":
            elicitation.executed_as = "invalid"
            self._send_answer(elicitation, peer, "accept", self._invalid_content(), invalid=True)
            self._send_answer(elicitation, peer, "accept", self._valid_content())
        elif elicitation.plan == "race":
            elicitation.executed_as = "accept"  # only one window holds it: a plain answer
            self._send_answer(elicitation, peer, "accept", self._valid_content())
        else:
            elicitation.executed_as = elicitation.plan
            content = self._valid_content() if elicitation.plan == "accept" else None
            self._send_answer(elicitation, peer, elicitation.plan, content)

    def _send_answer(self, elicitation: Elicitation, peer: WirePeer, action: str, content: dict[str, Any] | None,
                     *, invalid: bool = False, race: bool = False) -> None:
        body: dict[str, Any] = {"action": action}
        if content is not None:
            body["content"] = content
        elicitation.attempts.append(Attempt(window=peer.window, peer=peer.name, action=action,
                                            content=content, invalid=invalid, race=race))
        peer.send(elicitation.channel, body)

    def _random_answer(self) -> tuple[str, dict[str, Any] | None]:
        action = self.rng.choice(("accept", "accept", "decline", "cancel"))
        return action, (self._valid_content() if action == "accept" else None)

    def _valid_content(self) -> dict[str, Any]:
        rng = self.rng
        content: dict[str, Any] = {
            "name": " ".join(rng.sample(NAME_PARTS, rng.randint(1, 3))),
            "party_size": rng.randint(1, 12),
        }
        if rng.random() < 0.6:
            content["outdoor"] = rng.random() < 0.5
        if rng.random() < 0.6:
            content["budget"] = rng.choice([0, 0.0, 12.5, rng.uniform(0, 500), 1e300, 5e-324, 2**60])
        if rng.random() < 0.6:
            content["cuisine"] = rng.choice(CUISINES)
        return content

    def _invalid_content(self) -> dict[str, Any]:
        return self.rng.choice([
            {"name": "Eve", "party_size": "four"},
            {"name": "Eve", "party_size": 13},
            {"name": "", "party_size": 2},
            {"party_size": 2},
            {"name": "Eve", "party_size": 2, "extra": True},
            {"name": "Eve", "party_size": 2, "cuisine": "british"},
            {"name": "Eve", "party_size": 2.0},
            {"name": "Eve", "party_size": 2, "budget": -1},
            {"name": "Eve", "party_size": 2, "outdoor": "yes"},
        ])

    def _on_dismiss(self, peer: WirePeer, dismiss: dict[str, Any]) -> None:
        elicitation = self.elicitations.get(dismiss.get("responseChannel", ""))
        if elicitation is None:
            self.problem(f"{peer.name} got a dismiss for a request it never saw: {dismiss}")
            return
        if peer.window in elicitation.dismissals:
            self.problem(f"{peer.name} got two dismisses for {elicitation.channel}")
        elicitation.dismissals[peer.window] = dismiss
        if dismiss.get("reason") == "answered" and dismiss.get("by") == peer.window:
            mine = [a for a in elicitation.attempts if a.window == peer.window and a.outcome is None]
            if not mine:
                self.problem(f"{elicitation.channel} dismissed as answered by {peer.name}, "
                             "which sent nothing")
            else:
                mine[0].outcome = "accepted"

    def _on_error(self, peer: WirePeer, error: dict[str, Any]) -> None:
        topic = str(error.get("topic"))
        elicitation = self.elicitations.get(topic)
        mine = [a for a in elicitation.attempts if a.window == peer.window and a.outcome is None] \
            if elicitation is not None else []
        if not mine:
            self.problem(f"{peer.name} got an error for nothing it sent: {error}")
            return
        mine[0].outcome = str(error.get("code"))
