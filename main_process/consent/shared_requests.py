"""main's side of a store many mains share (store/interface.py: SharedInbox; PostgreSQL): one inbox
for all of them. pending.py's `SharedRequests`, and what the store's wake-ups do to its requests.

- **Publish.** Each request this main opens for its windows goes to the store with its audit row
  (a sign-in does not: it finishes in a browser on this machine). Every other main shows it to its windows as a copy.
  One opened while the store was away is published when this main is back on it, if still open.
- **Claim.** A window's valid answer (checked against the schema by the main the window is attached
  to) is decided by the store in one transaction with its audit row: this main's own requests too,
  so two mains' windows can never both win. A claim of this main's request waits for its publish.
- **Wake-ups, then the truth.** A notification that another main's request opened tells its
  invoke body (schema 9): its copy opens here at once, with no read (`_opened`). One that it ended
  closes its copy here at once (`_ended`), even while a read is in flight (that read shows no copy
  of it); one that this main's request was answered elsewhere dismisses it in this main's windows
  at once. The winning claim also tells this main, on its own channel, the answer it committed,
  values and all (`_answered`): its server has them with no read (values too large for a
  notification: a read of that one row, `answer_of`, not queued behind a read in flight). Any
  other notification of another main's write (an invoke too large to tell, a quorum's count; or a
  reconnect: one sent meanwhile is lost) starts one read of what changed for this main (`_sync`,
  never two at once: a wake during one runs it again after): other mains' open requests it does
  not know, which open here as copies; and the requests it knows that are no longer open: copies
  leave the windows (`close_copy`), and this main's requests answered elsewhere close through
  pending's one close path, their server answered (`answered_in_store`).
- **Liveness** (shared_lease.py). Every HEARTBEAT_S this main clears the values of the answers it
  handed on since the last beat (one statement for all), renews its lease and ends the rows of mains that are
  gone (their LISTEN connection closed: kill -9; or their lease ran out); requests of this main
  that were ended so while its own connection was cut open again. The heartbeat is also what
  finds a store that was away reachable again (postgres_backlog.py then writes what was kept).
- **Quorum.** An approver's answer to a quorum approval (consent/quorum.py), on any main, is
  counted by the store (`vote`: once per person, decided in one transaction when it decides); a
  count that does not decide wakes every other main, whose read (the known rows with approvals)
  shows it in its windows (`recount_from_store`), this main's requests and copies alike; the
  voter's main skips its own wake-up and shows the count the vote returned (pending's `_voted`).
  While the store is away this main counts its own requests' approvals alone (`counted_here`):
  each is kept and added to the store's count once it is back (a request opened meanwhile: right
  after it is published), so the store ends with every approver.
- **Questions.** An asker's question outlives its main on the store (postgres_inbox.py); an asker
  re-attached here asks it again naming its old channel, and `resume_question` hands over the
  answer given meanwhile, once, or ends the old row so the question opens here anew. A row that
  went 'resumed' or 'taken' closes copies like any ending (`_ended`, or a read); an answer of this
  main's own question handed to its asker is marked 'taken' when its values are cleared, with the
  next heartbeat (a resume elsewhere meanwhile takes it only if the asker is still asking).
- **Rules.** Remembered rules are applied from memory (consent.py); a change to the stored rules
  by any main wakes every main, which reads them again (`reload_rules`).
"""

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec

from main_process.consent.pending import Outcome, PendingRequest, PendingRequests
from main_process.consent.shared_lease import Lease
from main_process.store.interface import SharedInbox
from main_process.store.records import Approver, Claim, InboxRow, QuorumVote, ResumedQuestion
from main_process.tasks import Rerun, Tasks
from shared import channels
from shared.codec import decode_from_main
from shared.messages import ElicitationInvoke, ElicitationResult

logger = logging.getLogger(__name__)

_ENDED: Final[dict[str, Outcome]] = {  # a row's state -> the outcome its copies close with
    "expired": "expired", "cancelled": "cancelled", "host-gone": "host-gone", "server-closed": "server-closed",
    "orphaned": "server-closed",  # its main is gone: so is its server's connection
    "gone": "cancelled",  # no row any more
    "resumed": "cancelled",  # a question its asker asked again on another main: the new copy replaces it
}


class SharedRequestsDesk:
    """pending.py's SharedRequests on one SharedInbox; `main_id` is this main's session."""

    def __init__(self, inbox: SharedInbox, pending: PendingRequests, *, main_id: str,
                 reload_rules: Callable[[], Awaitable[None]] | None = None) -> None:
        self.machine = inbox.machine
        self._inbox = inbox
        self._pending = pending
        self._main_id = main_id
        self._reload_rules = reload_rules
        self._loop = asyncio.get_running_loop()
        self._published: dict[str, asyncio.Future[bool]] = {}  # this main's open requests -> published?
        # quorum approvals counted here of requests not in the store yet: written once they are published
        self._approved_unpublished: dict[str, list[tuple[str, str]]] = {}
        self._tasks = Tasks()
        self._sync = Rerun(self._tasks, self._sync_once)  # a read of what changed, one at a time
        self._ended_meanwhile: set[str] = set()  # endings heard during the read in flight (it may see them open)
        self._reload = Rerun(self._tasks, self._reload_once)
        self._backend_pid: int | None = None  # this main's LISTEN connection's server process
        self._joined: int | None = None  # the one the store's `mains` row names
        self._lease = Lease(inbox, self._tasks, self._renewed)
        self._closed = False
        self._taking: set[str] = set()  # this main's requests answered elsewhere whose row is being read
        self._wake_ups = inbox.wake_ups(main_id=main_id, requests=self._requests_changed, opened=self._opened,
                                        ended=self._ended, answered=self._answered, rules=self._rules_changed,
                                        connected=self._connected)

    def start(self) -> None:
        self._wake_ups.start()
        self._lease.start()

    async def close(self) -> None:
        """Stop listening; what is in flight ends; this main's open rows end and it leaves the store."""
        self._closed = True
        self._lease.stop()
        await self._wake_ups.close()
        await self._tasks.wait()
        await self._lease.clear_taken()
        await self._inbox.leave()

    # ---- pending's SharedRequests ---------------------------------------------------------

    def shares(self, pending: PendingRequest) -> bool:
        return pending.held_by is not None or pending.channel in self._published

    def opened(self, pending: PendingRequest) -> None:
        if pending.invoke.kind == "sign-in" or self._closed:
            return
        published: asyncio.Future[bool] = self._loop.create_future()
        self._published[pending.channel] = published
        self._tasks.start(self._publish(pending, published))

    async def _publish(self, pending: PendingRequest, published: asyncio.Future[bool]) -> None:
        done = await self._inbox.publish(pending.invoke, pending.frames[1], pending.asked_on)
        if done:
            self._pending.audited_in_store(pending.channel)  # the publish wrote its audit row too
        published.set_result(done)

    def claim(self, pending: PendingRequest, answer: ElicitationResult, approver: Approver, decision: str | None,
              then: Callable[[Claim], None]) -> None:
        self._tasks.start(self._claim(pending, answer, approver, decision, then))

    async def _claim(self, pending: PendingRequest, answer: ElicitationResult, approver: Approver,
                     decision: str | None, then: Callable[[Claim], None]) -> None:
        published = self._published.get(pending.channel)
        if published is not None and not await published:
            then("unreachable")  # never reached the store: this main decides its own request alone
            return
        claim = await self._inbox.claim(pending.invoke, answer, approver, decision)
        if claim == "won" and pending.held_by is None:
            self._published.pop(pending.channel, None)
        then(claim)

    def vote(self, pending: PendingRequest, person: str, answer: ElicitationResult, approver: Approver,
             decision: str | None, then: Callable[[QuorumVote], None]) -> None:
        self._tasks.start(self._vote(pending, person, answer, approver, decision, then))

    async def _vote(self, pending: PendingRequest, person: str, answer: ElicitationResult, approver: Approver,
                    decision: str | None, then: Callable[[QuorumVote], None]) -> None:
        published = self._published.get(pending.channel)
        if published is not None and not await published:
            then(QuorumVote("unreachable"))  # never reached the store: this main counts its own request alone
            return
        vote = await self._inbox.vote(pending.invoke, person, answer, approver, decision)
        if vote.result == "won" and pending.held_by is None:
            self._published.pop(pending.channel, None)
        then(vote)

    def counted_here(self, pending: PendingRequest, person: str, window: str) -> None:
        published = self._published.get(pending.channel)
        if published is None:
            return
        if published.done() and not published.result():
            self._approved_unpublished.setdefault(pending.channel, []).append((person, window))
            return
        self._tasks.start_now(_once_published(published, lambda: self._inbox.approved_here(pending.channel, person,
                                                                                           window)))

    def ended(self, pending: PendingRequest, outcome: str) -> None:
        self._approved_unpublished.pop(pending.channel, None)  # the audit row names them (pending.people)
        published = self._published.pop(pending.channel, None)
        if published is not None:
            self._tasks.start_now(_once_published(published, lambda: self._inbox.end(pending.channel, outcome)))

    async def resume_question(self, asked_on: str, asker: str) -> ResumedQuestion:
        """An asker re-attached here asks again what it asked on `asked_on` (questions.py). An open
        row it ended ('resumed') closes the other mains' copies by its notification; this main skips
        its own, so its copy closes by a read."""
        resumed = await self._inbox.resume(asked_on, asker)
        if resumed.state == "moved":
            self._requests_changed()
        return resumed

    # ---- wake-ups ------------------------------------------------------------------------

    async def _connected(self, backend_pid: int) -> None:
        """(Re)connected: this main is alive on this connection; catch up with what was missed."""
        self._backend_pid = backend_pid
        await self._join()
        self._rules_changed()

    async def _join(self) -> None:
        """Say which LISTEN connection is this main's (the others take it for gone when that
        connection is), then publish what was opened while away and reopen what they ended
        meanwhile. A join that failed (a pooled connection the outage broke) is made again at
        the next heartbeat."""
        assert self._backend_pid is not None
        backend_pid = self._backend_pid
        if await self._inbox.join(self._main_id, backend_pid, os.getpid()):
            self._joined = backend_pid
        await self._publish_missed()
        await self._inbox.revive(self._own())
        self._requests_changed()

    async def _publish_missed(self) -> None:
        """This main's requests opened while the store was away, still open: every main's windows
        may show them from now on."""
        for channel, published in list(self._published.items()):
            pending = self._pending.get(channel)
            if not published.done() or published.result() or pending is None:
                continue
            again: asyncio.Future[bool] = self._loop.create_future()
            self._published[channel] = again
            await self._publish(pending, again)
            if again.result():
                for person, window in self._approved_unpublished.pop(channel, []):
                    await self._inbox.approved_here(channel, person, window)

    def _requests_changed(self) -> None:
        if not self._closed:
            self._sync.ask()

    def _opened(self, row: InboxRow) -> None:
        """Another main's request opened and its notification told its invoke: its copy opens here
        with no read (notifications come in commit order: one that ended it comes after this one)."""
        if not self._closed and self._pending.closed_reason(row.channel) in (None, "server-closed"):
            _show(self._pending, [row])

    def _ended(self, row: InboxRow) -> None:
        """Another main's write ended a request (the notification says how): its copy here closes
        at once, with no read; a read in flight may have seen it still open, so that read shows
        no copy of it. This main's own request answered elsewhere leaves its windows at once too,
        and closes through a read of its row (its answer's values are only in the table)."""
        if self._sync.running:
            self._ended_meanwhile.add(row.channel)
        pending = self._pending.get(row.channel)
        if pending is None:
            return
        if pending.held_by is not None:
            self._pending.close_copy(pending, *_ending(row))
            return
        if row.state == "answered":
            self._pending.dismiss_answered(pending, _answered_by(row))
            self._take_answer(row.channel)
            return
        self._requests_changed()

    def _answered(self, row: InboxRow) -> None:
        """A window on another main answered this main's request: the winning claim told this main
        the values it committed (sent after the commit, like every notification), so its server has
        them without a read; values too large to tell are read from the row."""
        pending = self._pending.get(row.channel)
        if pending is None or pending.held_by is not None:
            return
        if row.action is None:
            self._pending.dismiss_answered(pending, _answered_by(row))
            self._take_answer(row.channel)
            return
        self._hand_on(pending, row)

    def _take_answer(self, channel: str) -> None:
        if channel not in self._taking:
            self._taking.add(channel)
            self._tasks.start(self._read_answer(channel))

    async def _read_answer(self, channel: str) -> None:
        """This main's request answered on another main: its row alone, read at once (a read of
        everything that changed may be in flight; waiting for it and then another cost the server
        a read or two), its server handed the values. Unreadable: the full read catches up."""
        try:
            row = await self._inbox.answer_of(channel)
        finally:
            self._taking.discard(channel)
        if row is None or row.state == "open":
            self._requests_changed()
            return
        await self._answered_elsewhere([row])

    async def _sync_once(self) -> None:
        if self._closed:
            return
        copies = {p.channel: p for p in self._pending.all() if p.held_by is not None}
        own = self._own()
        ended_meanwhile: set[str] = set()
        self._ended_meanwhile = ended_meanwhile
        rows = await self._inbox.changed([*copies, *own])
        if rows is None:
            return  # unreachable: the next wake-up (or reconnect) reads again
        ended = {row.channel: row for row in rows if row.state != "open"}
        for channel, copy in copies.items():
            if channel in ended:
                self._pending.close_copy(copy, *_ending(ended[channel]))
        await self._answered_elsewhere([ended[channel] for channel in own if channel in ended])
        _show(self._pending, [row for row in rows if row.state == "open" and self._pending.get(row.channel) is None
                    and row.channel not in ended_meanwhile
                    and self._pending.closed_reason(row.channel) in (None, "server-closed")])
        for row in rows:  # quorum approvals counted on any main: every window here shows the count
            counted = self._pending.get(row.channel) if row.approved else None
            if counted is not None:
                self._pending.recount_from_store(counted, row.approved)

    async def _answered_elsewhere(self, rows: list[InboxRow]) -> None:
        """This main's requests that a window anywhere answered (or that were ended while this main
        was thought gone)."""
        orphaned = []
        for row in rows:
            pending = self._pending.get(row.channel)
            if pending is None or pending.held_by is not None:
                continue
            if row.state == "answered" and row.action in ("accept", "decline", "cancel"):
                self._hand_on(pending, row)
            elif row.state == "orphaned":
                orphaned.append(row.channel)
        if orphaned:
            await self._inbox.revive(orphaned)

    def _hand_on(self, pending: PendingRequest, row: InboxRow) -> None:
        """This main's request answered on another main, with its values: its server has them."""
        if row.action not in ("accept", "decline", "cancel"):
            return
        self._published.pop(row.channel, None)
        answer = ElicitationResult(action=row.action,  # type: ignore[arg-type]
                                   content=row.content if row.action == "accept" else None)
        self._pending.answered_in_store(pending, answer, by=_answered_by(row),
                                        person=row.approver if pending.invoke.quorum is not None else None)
        self._lease.taken(row.channel)

    def _own(self) -> list[str]:
        """This main's requests the store has (or will have: the publish is in flight)."""
        return [channel for channel, published in self._published.items()
                if not published.done() or published.result()]

    # ---- liveness -------------------------------------------------------------------------

    async def _renewed(self, renewed: bool) -> None:
        """The lease's renewal: thought gone and forgotten, or the join on this LISTEN connection
        failed: here again."""
        if self._backend_pid is not None and (not renewed or self._joined != self._backend_pid):
            await self._join()

    # ---- rules ------------------------------------------------------------------------------

    def _rules_changed(self) -> None:
        if self._reload_rules is not None and not self._closed:
            self._reload.ask()

    async def _reload_once(self) -> None:
        if self._reload_rules is not None:
            await self._reload_rules()


def _show(pending: PendingRequests, rows: list[InboxRow]) -> None:
    """Other mains' open requests, as copies in this main's windows."""
    for row in rows:
        if row.invoke is None:
            continue
        try:
            _topic, invoke = decode_from_main([channels.INVOKE.encode(), row.invoke])
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            logger.warning("request %s of %s not shown: its copy in the shared inbox is unreadable: %s",
                           row.channel, row.machine, exc)
            continue
        if not isinstance(invoke, ElicitationInvoke):
            continue
        pending.open_copy(msgspec.structs.replace(invoke, machine=row.machine), row.machine)


async def _once_published(published: "asyncio.Future[bool]", write: Callable[[], Awaitable[object]]) -> None:
    """`write` once the request's publish is done, if it reached the store."""
    if await published:
        await write()


def _answered_by(row: InboxRow) -> str:
    """Who answered this main's request on another main, as its windows' dismiss names them."""
    return row.window or row.approver or "another main"


def _ending(row: InboxRow) -> tuple[Outcome, str | None]:
    """How a copy closes for its row: (outcome, by). Answered (by a window, a rule or a host on its
    main): by whoever did; a row gone: cancelled."""
    ended = _ENDED.get(row.state)
    if ended is not None:
        return ended, None
    return "accept", row.window or row.approver or row.machine
