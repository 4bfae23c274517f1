"""The store: what outlives a request, behind one interface, so a second backend is one new module.

**Async.** Every method that touches the store is a coroutine. The next backend (PostgreSQL,
psycopg 3 with an async pool, issue 35) is a network round trip away: an awaited call lets main's
loop go on deciding and relaying while one is in flight, and a cut connection suspends the callers
that need the store rather than the whole of main. A thread per call would cost every backend a
hand-off and back (~270 us per answer, measured in audit_writer.py) for what SQLite does in ~20 us,
so the SQLite backend's coroutines never suspend: its short transactions run inline on the loop,
exactly as before. Callers that must not go on before a write is committed ("committed before
anyone hears of it") await it, or start it with `Tasks.start_now` (main_process/tasks.py) and
continue in its callback: with SQLite that callback runs before `start_now` returns, so the order of
events is what it was.

**Atomic decisions are the backend's.** Each write is one transaction, and the decisions that must
be atomic are single methods, so no caller ever holds a transaction open across an await:
- `AuditTable.record_outcome`: the first outcome of a channel wins (a later one returns False and
  changes nothing), and with `request` the request's row and its outcome are one commit;
- `AuditTable.record_requests`: new request rows and rule-decided rows are one commit;
- `RuleTable.add`/`remove`: a rule (or a batch of removals) is on disk once they return True.
True means committed: main hands an answer on only after it (audit_writer.py says when).

**Failure policy.** Writes never raise: they log, return False, and main carries on (a rule then
applies for this session only, an audit row is counted as unrecorded; a PostgreSQL store that is
unreachable keeps the audit rows and writes them once it is back: postgres_backlog.py). Readers raise
`RuleStoreError` / `AuditLogError` with a sentence for the user.

**What it covers now.** Remembered rules and approvals (`RuleTable`) and the audit log
(`AuditTable`): main reaches both only through a `Store` that app.py opens once from the config
(`factory.open_store`) and passes to the parts that need it. A store many mains share (PostgreSQL)
also has a `SharedInbox`: every main's open requests, decided by one transaction per answer
(consent/shared_requests.py is main's side of it); SQLite has none, one main owns its requests.

**Paired web devices** (`DeviceTable`): the web window is a process that never imports main's
internals, and it pairs, checks and revokes devices itself in `devices.json` (web_process/devices.py;
shared/web_devices.py reads them for the CLI and the Qt window), read again on every check. On a
shared store (PostgreSQL) main mirrors that file and the store's `web_devices` both ways
(device_mirror.py): a device paired through one main is written to every main's file, a revoke on
any main removes it from all of them. SQLite keeps devices.json alone, as before.

**Open questions of `elicitron ask`** are requests of kind "question": on a shared store they are
rows of the `SharedInbox` like any request, except that a main that is gone (kill -9) leaves them
open, so every other main's windows still show them and one may answer; the answer waits in the
row (until the inbox tidies ended rows) for the asker, which asks again on the main it re-attaches
to, naming the channel it asked on before (`msgAsk.resumes`), and takes it there once (`resume`).
On SQLite they live in main's memory, owned by the asker's connection, as before.
"""

from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from main_process.consent.rules import Rule
from main_process.store.records import (
    Approver,
    AuditEntry,
    Claim,
    Decided,
    InboxRow,
    OutcomeRecord,
    QuorumVote,
    ResumedQuestion,
)
from shared.messages import ElicitationInvoke, ElicitationResult, StoreState


class RuleTable(Protocol):
    """Remembered answers and tool approvals that outlive main (scope "always" and "until")."""

    async def load(self, now_ms: int) -> list[Rule]:
        """Every stored rule that has not expired, oldest first (expired ones are deleted).
        Raises RuleStoreError when the store cannot be read."""
        ...

    async def add(self, rule: Rule) -> bool:
        """Insert or replace one user rule that outlives main; True once committed."""
        ...

    async def remove(self, rule_ids: Iterable[str]) -> bool:
        """Delete these rules (unknown ids are no error) in one commit; True once committed."""
        ...

    async def take(self, rule_id: str) -> bool | None:
        """Delete a single-use grant as it is used: True if this call deleted it, False if it was
        gone already (another main used it first), None when the store could not be asked."""
        ...


class AuditTable(Protocol):
    """One row per request, from the request to its outcome."""

    @property
    def record_values(self) -> bool:
        """Whether answered values and a host's arguments are kept (the config's `auditValues`)."""
        ...

    @property
    def unrecorded(self) -> int:
        """How many writes failed since the store was opened."""
        ...

    async def record_requests(self, invokes: Sequence[ElicitationInvoke], decided: Sequence[Decided] = ()) -> bool:
        """The rows of new requests (no outcome yet; a repeated channel keeps its outcome) and the
        full rows of requests decided as they were made, in one commit. True once committed."""
        ...

    async def record_outcome(self, outcome: OutcomeRecord, request: ElicitationInvoke | None = None) -> bool:
        """Decide one row, once: True only once committed; False when the channel has an outcome
        already (the first wins) or the write failed. With `request`, its row and the outcome are
        one commit; a channel with no row at all still gets one, so no decision is lost."""
        ...

    async def entries(self, limit: int = 100, server: str | None = None) -> list[AuditEntry]:
        """The newest `limit` rows first, optionally of one server. Raises AuditLogError."""
        ...

    async def counts(self) -> dict[str, int]:
        """outcome -> rows, pending rows under "pending". Raises AuditLogError."""
        ...

    async def checkpoint(self) -> bool:
        """Housekeeping that is cheap to defer and costly to do on every commit, done now off the
        hot path (SQLite: the WAL checkpoint, the only step that fsyncs, on a thread of its own);
        True when done or nothing to do. Never raises."""
        ...


class DeviceTable(Protocol):
    """Paired web devices of a store many mains share, as each main's web dir keeps them
    (devices.json entries: {id, name, tokenSha256, pairedAt}); main_process/device_mirror.py keeps
    the two the same. Writes never raise (False); `entries` is None when unreachable."""

    async def entries(self) -> tuple[list[dict[str, object]], set[str]] | None:
        """(the devices paired and not revoked, as devices.json entries; the ids revoked)."""
        ...

    async def add(self, entries: Sequence[dict[str, object]]) -> bool:
        """Devices paired through this main (an id the store has, revoked or not, is left alone)."""
        ...

    async def revoke(self, device_ids: Iterable[str]) -> bool: ...


class WakeUps(Protocol):
    """A store's wake-ups (PostgreSQL: LISTEN, postgres_listen.py), kept up from `start` to `close`."""

    def start(self) -> None: ...

    async def close(self) -> None: ...


class SharedInbox(Protocol):
    """The requests of every main of a store many mains share (PostgreSQL: postgres_inbox.py has
    the how and why); a store only one main uses has none (`Store.inbox` is None). main's side of
    it is consent/shared_requests.py. Writes never raise: False, or a claim "unreachable"."""

    machine: str

    async def join(self, main_id: str, backend_pid: int, pid: int) -> bool: ...

    async def heartbeat(self) -> bool | None:
        """Renew this main's lease, end the rows of mains that are gone; False: join again; None: unreachable."""
        ...

    async def tidy(self) -> bool: ...

    async def leave(self) -> bool: ...

    async def publish(self, invoke: ElicitationInvoke, body: bytes, asked_on: str | None = None) -> bool:
        """`asked_on`: a question's asker's responseChannel (what `resume` finds it by)."""
        ...

    async def end(self, channel: str, outcome: str) -> bool: ...

    async def revive(self, channels: Sequence[str]) -> bool: ...

    async def claim(self, invoke: ElicitationInvoke, answer: ElicitationResult, approver: Approver,
                    decision: str | None) -> Claim:
        """Decide the request and its audit row in one commit: "won" once committed."""
        ...

    async def vote(self, invoke: ElicitationInvoke, person: str, answer: ElicitationResult, approver: Approver,
                   decision: str | None) -> QuorumVote:
        """A quorum approver's answer: counted once per person across mains; the one that decides
        (a deny, the last approval needed: `answer`) decides the request as `claim` does."""
        ...

    async def taken(self, channels: Sequence[str]) -> bool: ...

    async def approved_here(self, channel: str, person: str, window: str) -> bool:
        """A quorum approval of this main's request it counted alone (the store was away): added to
        the store's count when it is back (once per person)."""
        ...

    async def resume(self, asked_on: str, asker: str) -> ResumedQuestion:
        """Asker `asker` asks again the question it asked on `asked_on` of a main now gone: its answer,
        taken once (the first caller gets it, no one after), or that question's row ended as
        'resumed' when still open, in one statement. Never raises: "unreachable"."""
        ...

    async def changed(self, known: Sequence[str]) -> list[InboxRow] | None:
        """What changed for this main: the `known` channels no longer open (state 'gone': no row),
        and other mains' open rows not known, with their invoke bodies."""
        ...

    async def answer_of(self, channel: str) -> InboxRow | None:
        """This main's request `channel` as the store has it now, with an answer's values (state
        'gone': no row); None when the store cannot be read."""
        ...

    def wake_ups(self, *, main_id: str, requests: Callable[[], None], opened: Callable[[InboxRow], None],
                 ended: Callable[[InboxRow], None], answered: Callable[[InboxRow], None], rules: Callable[[], None],
                 connected: Callable[[int], Awaitable[None]]) -> WakeUps:
        """Wake-ups when another main's shared request opens or changes (`requests`: read what
        changed; `opened`: it opened, its invoke body told, so no read), or ended as the notification says (`ended`: its channel, state and who answered;
        no values), when a window on another main answered a request of this main (`main_id`'s:
        `answered`, with the values as committed; action None: too large to tell, read them with
        `answer_of`), and when a stored rule changes (`rules`); `connected(backend_pid)` on every
        (re)connect, to catch up."""
        ...


class Store(Protocol):
    """One store: its tables, and its life in main."""

    @property
    def rules(self) -> RuleTable: ...

    @property
    def audit(self) -> AuditTable: ...

    @property
    def inbox(self) -> SharedInbox | None:
        """The shared inbox of a store many mains share (PostgreSQL); None for SQLite (one main)."""
        ...

    @property
    def devices(self) -> DeviceTable | None:
        """Paired web devices every main of a shared store accepts; None for SQLite (devices.json alone)."""
        ...

    @property
    def description(self) -> str:
        """Where it is, for main's log (never a password)."""
        ...

    async def open(self) -> None:
        """Reach the store now (PostgreSQL: connect, migrate, pool), so main starts only with it.
        Raises StoreUnavailableError with one line saying what to do. The tables open on first
        use without it (the CLI reads them so); SQLite's files open as they always have."""
        ...

    async def claim(self, connection: Path) -> None:
        """main: this store's changes go through me, reachable by `connection` (SQLite: the owner
        lock, so `elicitron rules revoke` goes through the running main, store_owner.py). Logs
        rather than raises when it cannot."""
        ...

    def status(self) -> StoreState:
        """The store as `elicitron status` lists it (msgStatus): read from what main knows now, never
        a round trip, so a store that hangs cannot hang `status`."""
        ...

    async def close(self) -> None:
        """Release what `claim` took and close the tables; idempotent."""
        ...
