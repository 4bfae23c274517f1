"""The PostgreSQL store's shared inbox (interface.py: SharedInbox): the SQL of `mains` and
`open_requests` (postgres_schema.py, schema 2), so every main of a store shows every main's open
requests and the first valid answer anywhere wins.

- **Publish**: a main inserts each request its windows may answer (the invoke body as its windows
  got it: nothing a window does not see), keyed by the responseChannel, with its main id, and its
  audit row in the same statement (so the audit writer need not: one round trip, not two).
- **Claim**: a window's answer, valid on the main it is attached to, decides a request in ONE
  statement: `UPDATE open_requests ... WHERE state = 'open'` and the audit row's outcome (with the
  approver and both machines) commit together, or neither does. Two answers at once: PostgreSQL
  locks the row; the second finds it answered and gets "lost".
- **Quorum** (`vote`, postgres_quorum.py): an approver's answer to a quorum approval is counted in
  `quorum_approvals`, once per person, in one transaction with the claim when it decides.
- **End**: a request its main closes otherwise (expired, withdrawn, a rule) ends its row once,
  by the same `WHERE state = 'open'`.
- **Liveness**: each main has a row in `mains` with a lease it renews (`heartbeat`), and the
  server pid of its LISTEN connection; a main whose lease ran out or whose connection is gone
  (kill -9 closes it at once) has its open rows marked 'orphaned' by the next heartbeat of any
  other main, and the triggers wake every main.
  The heartbeat also reads the mains with a live lease (`mains`, for `status`): this main first,
  then the others as they joined.
- **Questions** of `elicitron ask` (`kind` 'question', schema 8) are not orphaned with their main:
  they stay open for every other main's windows (until they expire), and the answer waits in the
  row for the asker, who asks again on another main naming this channel (`resume`): it takes the
  answer once (state 'taken'), or ends the open row ('resumed') to ask it there anew; both notify
  as an ending does (other mains' copies close). The answer a question's own main handed on is
  'taken' as its values are cleared (`taken`, once a heartbeat). Ended rows are kept
  KEEP_ENDED_MS, so an answer waits that long for its asker, no longer.
- **Read back** (`changed`): what changed for a main, in one statement: the open rows of other
  mains it does not know yet (with their invoke bodies) and the rows of channels it knows that are
  no longer open (or gone), or open with quorum approvals (who approved so far, for every row
  read open); the tables are the truth. A notification (postgres_listen.py) names its sender and
  the row's new state: a main skips its own; a row that opened tells its invoke body (schema 9:
  the copy opens with no read, `opened`), unless too large to tell; that, or an open row whose
  quorum count changed (postgres_quorum.py), wakes a read; a row that ended is handed on as it is (`ended`: a
  copy closes with no read; the values of an answer are only ever read from the table: the holding
  main reads its answered row alone, by its key, at once: `answer_of`).

Writes never raise (the store's failure policy): they log, rate-limited, and return False (a claim:
"unreachable"); `changed` returns None when the store cannot be read. While the store is away
(postgres_backlog.py) a claim is "unreachable" at once, without a wait (main decides its own
requests alone), and the ends of this main's requests, the answers it took and the quorum
approvals it counted alone (`approved_here`) are kept, on disk (spool.py), and written once it is
back, or when main next starts (each idempotent: a row ends only while open, an approval counts
once per person).
"""

import base64
import binascii
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, LiteralString

import msgspec
import psycopg

from main_process.log_limiter import RateLimitedLog
from main_process.store.postgres_backlog import Backlog
from main_process.store.postgres_connect import Database
from main_process.store.postgres_listen import Listener
from main_process.store.postgres_quorum import Tally, approve_kept, tally
from main_process.store.records import Approver, Claim, InboxRow, QuorumVote, ResumedQuestion
from main_process.store.rows import request_row, values_json
from shared.errors import StoreUnavailableError
from shared.messages import ElicitationInvoke, ElicitationResult, StoreMain

logger = logging.getLogger(__name__)

INBOX_CHANNEL: Final = "elicitron_inbox"  # what the schema's triggers notify (postgres_schema.py)
RULES_CHANNEL: Final = "elicitron_rules"
ANSWER_CHANNEL: Final = "elicitron_answer_"  # + a main's id (a uuid7): its requests answered on other mains
# NOTIFY takes payloads below 8,000 bytes: an answer whose values do not fit is told without them (read instead)
MAX_TOLD_BYTES: Final = 7_000
LEASE_S: Final = 5.0  # a main not heard of for this long is gone (it renews every second: shared_requests.py)
KEEP_ENDED_MS: Final = 10 * 60 * 1000  # ended rows stay this long (a main that reconnects reads how they ended)

_JOIN: Final = ("INSERT INTO mains (main_id, machine, pid, backend_pid, started_at, lease_until, joined_at) "
                "VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s), now()) ON CONFLICT (main_id) DO UPDATE "
                "SET backend_pid = excluded.backend_pid, lease_until = excluded.lease_until, joined_at = now()")
# A main is gone when its lease ran out, or its LISTEN connection is: unless that connection was
# made before the server (re)started: then every main's is, and each has its lease to come back in.
_HEARTBEAT: Final = (
    "WITH renewed AS (UPDATE mains SET lease_until = now() + make_interval(secs => %s) WHERE main_id = %s "
    "RETURNING 1), "
    "gone AS (SELECT m.main_id FROM mains m WHERE m.main_id <> %s AND (m.lease_until < now() OR m.backend_pid IS NULL "
    "OR (NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = m.backend_pid) "
    "AND (m.joined_at IS NULL OR m.joined_at > pg_postmaster_start_time())))), "
    "orphaned AS (UPDATE open_requests SET state = 'orphaned', decided_at = %s "
    "WHERE state = 'open' AND kind IS DISTINCT FROM 'question' AND main_id IN (SELECT main_id FROM gone) RETURNING 1), "
    # a question outlives its main (its asker takes the answer elsewhere: `resume`), not its own time
    "expired AS (UPDATE open_requests SET state = 'expired', decided_at = %s WHERE state = 'open' "
    "AND kind = 'question' AND expires_at < %s AND main_id IN (SELECT main_id FROM gone) RETURNING 1) "
    "SELECT (SELECT count(*) FROM renewed), (SELECT count(*) FROM orphaned) + (SELECT count(*) FROM expired), "
    "(SELECT coalesce(json_agg(json_build_array(m.machine, m.pid, m.started_at) "
    "ORDER BY m.main_id = %s DESC, m.started_at, m.machine), '[]') "
    "FROM mains m WHERE m.main_id = %s OR (m.lease_until >= now() AND m.main_id NOT IN (SELECT main_id FROM gone)))")
_TIDY: Final = ("WITH old AS (DELETE FROM open_requests WHERE state <> 'open' AND decided_at < %s RETURNING 1) "
                "DELETE FROM mains m WHERE m.lease_until < now() - interval '1 hour' AND NOT EXISTS "
                "(SELECT 1 FROM open_requests o WHERE o.main_id = m.main_id AND o.state = 'open')")
# 'orphaned' too: decided here while the store was away, and marked gone by another main meanwhile
_END: Final = ("UPDATE open_requests SET state = %s, decided_at = %s WHERE channel = %s "
               "AND state IN ('open', 'orphaned')")
_REVIVE: Final = ("UPDATE open_requests SET state = 'open', decided_at = NULL "
                  "WHERE main_id = %s AND state = 'orphaned' AND channel = ANY(%s)")
_LEAVE: Final = ("WITH ended AS (UPDATE open_requests SET state = 'cancelled', decided_at = %s "
                 "WHERE main_id = %s AND state = 'open' RETURNING 1) DELETE FROM mains WHERE main_id = %s")
# The known channels no longer open (a row gone: all NULL but the channel) or open with quorum
# approvals (their count: approvals are counted on any main, postgres_quorum.py), then the other
# mains' open rows not known yet, with their invokes and approvals: only what changed for this main,
# so a wake-up reads a row or two, not every open request.
_CHANGED: Final = (
    "SELECT k.channel, o.main_id, o.machine, coalesce(o.state, 'gone'), o.action, "
    "CASE WHEN o.main_id = %(me)s THEN o.answer::text END, o.answer_window, o.approver, o.answer_machine, NULL::bytea, "
    "CASE WHEN o.state = 'open' THEN (SELECT json_agg(q.person ORDER BY q.seq) FROM quorum_approvals q "
    "WHERE q.channel = k.channel) END "
    "FROM unnest(%(known)s::text[]) AS k(channel) LEFT JOIN open_requests o ON o.channel = k.channel "
    "WHERE o.state IS DISTINCT FROM 'open' OR EXISTS (SELECT 1 FROM quorum_approvals q WHERE q.channel = k.channel) "
    "UNION ALL SELECT channel, main_id, machine, state, NULL, NULL, NULL, NULL, NULL, invoke, "
    "(SELECT json_agg(q.person ORDER BY q.seq) FROM quorum_approvals q WHERE q.channel = open_requests.channel) "
    "FROM open_requests WHERE state = 'open' AND main_id <> %(me)s AND channel <> ALL(%(known)s::text[])")
# One request of this main's that another main's window answered (its notification said so): its
# row with the values, read at once, by its key, not queued behind a read of everything that changed.
_ANSWER: Final = ("SELECT channel, main_id, machine, state, action, answer::text, answer_window, approver, "
                  "answer_machine FROM open_requests WHERE channel = %s AND main_id = %s")
# A question's answer handed to its asker is 'taken': an asker that asks again elsewhere does not get it twice.
_TAKEN: Final = ("UPDATE open_requests SET answer = NULL, state = CASE WHEN kind = 'question' AND state = 'answered' "
                 "THEN 'taken' ELSE state END WHERE main_id = %s AND channel = ANY(%s)")
# A question by its asker's channel and name (`server` is the asker's name). The main SELECT sees the
# row as it was before the two updates (one snapshot): its state says what happened.
_RESUME: Final = (
    "WITH asked AS (SELECT channel, state, action, answer::text AS answer FROM open_requests WHERE asked_on = %s "
    "AND server = %s AND kind = 'question' ORDER BY created_at DESC LIMIT 1), "
    "took AS (UPDATE open_requests SET answer = NULL, state = 'taken' WHERE channel = (SELECT channel FROM asked) "
    "AND state = 'answered' RETURNING 1), "  # (RETURNING would give the values after: NULL)
    "moved AS (UPDATE open_requests SET state = 'resumed', decided_at = %s WHERE channel = (SELECT channel FROM asked) "
    "AND state IN ('open', 'orphaned') RETURNING channel, decided_at), "
    # its audit row ends too (the question goes on under its new channel, with a row of its own)
    "audited AS (UPDATE elicitations e SET outcome = 'cancelled', decided_at = moved.decided_at FROM moved "
    "WHERE e.channel = moved.channel AND e.outcome IS NULL) "
    "SELECT (SELECT state FROM asked), "
    "(SELECT count(*) FROM took), (SELECT action FROM asked), (SELECT answer FROM asked), (SELECT count(*) FROM moved)")
END: Final = "end"  # the kinds of the writes kept while the store is away (postgres_backlog.py)
TAKEN: Final = "taken"
APPROVAL: Final = "approval"
RESUME_TRIES: Final = 3  # a window's answer committed between the statement's snapshot and its update: read again

# The audit row of a claim, written in the claim's statement: the request's columns (rows.py), its
# outcome, the requester's machine (from the claimed row) and the answerer's.
_AUDIT_TYPES: Final[tuple[tuple[LiteralString, LiteralString], ...]] = (
    ("channel", "text"), ("server", "text"), ("mode", "text"), ("message", "text"), ("fields", "jsonb"),
    ("url", "text"), ("origin_window", "text"), ("created_at", "bigint"), ("expires_at", "bigint"),
    ("kind", "text"), ("via", "text"), ("tool", "text"), ("arguments", "jsonb"),
    ("outcome", "text"), ("answer_window", "text"), ("decided_at", "bigint"), ("content", "jsonb"),
    ("rule_id", "text"), ("decision", "text"), ("answer_window_name", "text"), ("answer_device", "text"),
    ("answer_device_id", "text"), ("answer_machine", "text"), ("answer_user", "text"), ("approvers", "jsonb"))
_REQUEST_TYPES: Final = _AUDIT_TYPES[:13]  # the request's columns (rows.request_row), the audit row before its outcome
# A request and its audit row in one statement (the audit writer then drops the row it had queued):
# the row as elicitations has it until an outcome, written only with a first publish.
_PUBLISH: Final = (
    "WITH published AS (INSERT INTO open_requests (channel, main_id, machine, server, invoke, created_at, expires_at, "
    "kind, asked_on) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (channel) DO NOTHING RETURNING machine) "
    "INSERT INTO elicitations (" + ", ".join(name for name, _type in _REQUEST_TYPES) + ", machine) "
    "SELECT " + ", ".join(f"%s::{kind}" for _name, kind in _REQUEST_TYPES) + ", published.machine FROM published "
    "ON CONFLICT (channel) DO NOTHING")
_OUTCOME_COLUMNS: Final = ("outcome", "answer_window", "decided_at", "content", "rule_id", "decision",
                           "answer_window_name", "answer_device", "answer_device_id", "answer_machine", "answer_user",
                           "approvers")
# A claim that wins tells the holding main, on its own channel (`answer_channel`), the answer with
# its values, unless this main holds it: delivered once committed, as every notification; the
# holding main hands its server the values without a read (a main that was away reads the table).
_CLAIM: Final = (
    "WITH won AS (UPDATE open_requests SET state = 'answered', action = %s, answer = %s::jsonb, answer_window = %s, "
    "answer_machine = %s, approver = %s, decided_at = %s WHERE channel = %s AND state = 'open' AND NOT EXISTS "
    "(SELECT 1 FROM elicitations e WHERE e.channel = %s AND e.outcome IS NOT NULL) RETURNING machine, main_id), "
    "told AS (SELECT pg_notify(%s || won.main_id, %s) FROM won WHERE won.main_id <> %s), "
    "audited AS (INSERT INTO elicitations (" + ", ".join(name for name, _type in _AUDIT_TYPES) + ", machine) "
    "SELECT " + ", ".join(f"%s::{kind}" for _name, kind in _AUDIT_TYPES) + ", won.machine FROM won "
    "ON CONFLICT (channel) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _OUTCOME_COLUMNS) +
    " WHERE elicitations.outcome IS NULL RETURNING 1) "
    "SELECT (SELECT count(*) FROM won), (SELECT count(*) FROM audited), (SELECT count(*) FROM told)")


class PgInbox:
    """SharedInbox on the `mains` and `open_requests` tables; `machine` names this main."""

    def __init__(self, database: Database, machine: str, record_values: bool, backlog: Backlog) -> None:
        self._db = database
        self._backlog = backlog
        self.machine = machine
        self._record_values = record_values
        self.main_id = ""  # set by `join`
        self.mains: list[StoreMain] = []  # the live mains of the store, as the last heartbeat read them
        self._requests_changed: Callable[[], None] = lambda: None  # `wake_ups`' requests
        self._complaints = RateLimitedLog(logger, interval_s=60.0)
        backlog.handles(END, lambda kept: self._write_once("end a request", _END, tuple(kept["args"])))
        backlog.handles(TAKEN, lambda kept: self._write_once("clear taken answers", _TAKEN,
                                                             (kept["main_id"], list(kept["channels"]))))
        backlog.handles(APPROVAL, self._approval_once)

    # ---- this main ---------------------------------------------------------------------

    async def join(self, main_id: str, backend_pid: int, pid: int) -> bool:
        """This main is alive, its LISTEN connection on server process `backend_pid`."""
        self.main_id = main_id
        return await self._write("join the store's mains", _JOIN,
                                 (main_id, self.machine, pid, backend_pid, _now_ms(), LEASE_S))

    async def heartbeat(self) -> bool | None:
        """Renew this main's lease and end the open rows of mains that are gone (the trigger wakes
        everyone if there were any). None: the store could not be reached; False: this main's row
        was gone (it must `join` again)."""
        now_ms = _now_ms()
        row = await self._read_one("renew the lease", _HEARTBEAT,
                                   (LEASE_S, self.main_id, self.main_id, now_ms, now_ms, now_ms, self.main_id,
                                    self.main_id))
        if row is None:
            self.mains = []  # unknown while the store is away (`status` says it is unreachable)
            return None
        renewed, orphaned = int(row[0]), int(row[1])
        self.mains = [StoreMain(machine=str(m[0]), pid=int(m[1]), started_at=int(m[2])) for m in _decode_list(row[2])]
        if orphaned:
            logger.info("shared inbox: %d request(s) of mains that are gone ended", orphaned)
            self._requests_changed()  # their copies here close (this main's own wake-up is skipped)
        return renewed > 0

    async def tidy(self) -> bool:
        """Forget rows that ended long ago, and mains gone long ago with nothing open."""
        return await self._write("tidy the inbox", _TIDY, (_now_ms() - KEEP_ENDED_MS,))

    async def leave(self) -> bool:
        """main stops: its open rows end ('cancelled') and its row goes (when away: its lease runs out)."""
        if self._db.away:
            return False
        return await self._write("leave the store's mains", _LEAVE, (_now_ms(), self.main_id, self.main_id))

    # ---- requests ----------------------------------------------------------------------

    async def publish(self, invoke: ElicitationInvoke, body: bytes, asked_on: str | None = None) -> bool:
        """Every main's windows may answer this request from now on (once committed), and its audit
        row is written. Not while the store is away: this main's windows alone have it."""
        if self._db.away:
            return False
        channel = invoke.response_channel
        arguments = invoke.approval.arguments if invoke.approval is not None else None
        return await self._write("publish a request", _PUBLISH, (
            channel, self.main_id, self.machine, invoke.request.server, body, invoke.created_at,
            invoke.expires_at, invoke.kind, asked_on,
            *request_row(invoke, values_json(channel, arguments, self._record_values))))

    async def end(self, channel: str, outcome: str) -> bool:
        """This main ended its request otherwise than by a claim (the first ending wins)."""
        return await self._backlog.write(END, f"the end of {channel}", {"args": [outcome, _now_ms(), channel]})

    async def revive(self, channels: Sequence[str]) -> bool:
        """Requests of this main marked 'orphaned' while it was away (its connection was cut) are
        open again: this main still holds them."""
        if not channels:
            return True
        return await self._write("reopen requests", _REVIVE, (self.main_id, list(channels)))

    async def claim(self, invoke: ElicitationInvoke, answer: ElicitationResult, approver: Approver,
                    decision: str | None) -> Claim:
        """Decide `invoke`'s request with `answer` (validated by the caller), and its audit row, in
        one statement: "won" once committed, "lost" when it had ended or been answered."""
        if self._db.away:
            return "unreachable"  # no wait on a dead server: main decides its own request alone
        args = self._claim_args(invoke, answer, approver, decision, label=approver.label, name=approver.name)
        row = await self._read_one("decide a request", _CLAIM, args)
        if row is None:
            return "unreachable"
        return self._claimed(invoke.response_channel, row)

    async def vote(self, invoke: ElicitationInvoke, person: str, answer: ElicitationResult, approver: Approver,
                   decision: str | None) -> QuorumVote:
        """A quorum approver's answer (postgres_quorum.py): counted once per person, and when it
        decides the request (a deny, or the last approval needed: `answer` is then what it
        decides), decided with its audit row naming every approver in the same transaction."""
        quorum = invoke.quorum
        assert quorum is not None
        if self._db.away:
            return QuorumVote("unreachable")  # as a claim: this main counts its own requests alone
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn, conn.transaction():
                counted = await tally(conn, invoke.response_channel, person=person, machine=approver.machine,
                                      window=approver.window, approve=decision != "deny", needed=quorum.needed,
                                      now_ms=_now_ms())
                vote = await self._decide_quorum(conn, invoke, person, answer, approver, decision, counted)
        except (psycopg.Error, StoreUnavailableError) as exc:
            self._failed("count an approval", exc)
            return QuorumVote("unreachable")
        self._db.succeeded()
        return vote

    async def _decide_quorum(self, conn: psycopg.AsyncConnection[Any], invoke: ElicitationInvoke, person: str,
                             answer: ElicitationResult, approver: Approver, decision: str | None,
                             counted: Tally | None) -> QuorumVote:
        """The vote once counted (in its transaction): decided here, with the audit row naming every
        approver and their machines (then the denier), when this answer decides it."""
        if counted is None:
            return QuorumVote("lost")
        if not counted.decides:
            return QuorumVote("counted", tuple(p for p, _machine in counted.approvals))
        approvals = counted.approvals
        if person not in (p for p, _machine in approvals):  # a deny from someone who had not approved
            approvals = [*approvals, (person, approver.machine)]
        people = tuple(p for p, _machine in approvals)
        args = self._claim_args(invoke, answer, approver, decision, label=person, name=", ".join(people),
                                approvers=[{"person": p, "machine": m} for p, m in approvals])
        row = await (await conn.execute(_CLAIM, args)).fetchone()
        won = row is not None and self._claimed(invoke.response_channel, row) == "won"
        return QuorumVote("won", people) if won else QuorumVote("lost")

    def _claim_args(self, invoke: ElicitationInvoke, answer: ElicitationResult, approver: Approver,
                    decision: str | None, *, label: str, name: str | None,
                    approvers: list[dict[str, str]] | None = None) -> tuple[Any, ...]:
        """_CLAIM's arguments: the open row's answer (`label`: who answered, as copies show it) and
        the audit row's (`name`: the answering window's name, or a quorum's every approver)."""
        channel = invoke.response_channel
        decided_at = _now_ms()
        arguments = invoke.approval.arguments if invoke.approval is not None else None
        device = approver.device
        audit = (*request_row(invoke, values_json(channel, arguments, self._record_values)),
                 answer.action, approver.window, decided_at,
                 values_json(channel, answer.content, self._record_values) if answer.action == "accept" else None,
                 None, decision, name, device.name if device is not None else None,
                 device.id if device is not None else None, approver.machine, approver.user,
                 None if approvers is None else _json_list(approvers))
        values = _json(answer.content)
        told = _told(channel, answer.action, values, approver.window, label, approver.machine)
        return (answer.action, values, approver.window, approver.machine, label, decided_at, channel,
                channel, ANSWER_CHANNEL, told, self.main_id, *audit)

    @staticmethod
    def _claimed(channel: str, row: tuple[Any, ...]) -> Claim:
        won, audited = int(row[0]), int(row[1])
        if won and not audited:
            logger.warning("shared inbox: %s was answered, but its audit row had an outcome already", channel)
        return "won" if won else "lost"

    async def taken(self, channels: Sequence[str]) -> bool:
        """This main handed these answers on: their values leave the table (a question's row is
        'taken': its asker asking again elsewhere does not get it twice)."""
        return await self._backlog.write(TAKEN, f"{len(channels)} answer(s) taken",
                                         {"main_id": self.main_id, "channels": list(channels)})

    async def approved_here(self, channel: str, person: str, window: str) -> bool:
        """A quorum approval this main counted alone while the store was away: written to the
        store's count once it is back (postgres_quorum.approve_kept), so it ends with every approver."""
        return await self._backlog.write(APPROVAL, f"the approval of {channel} by {person}",
                                         {"channel": channel, "person": person, "machine": self.machine,
                                          "window": window, "approved_at": _now_ms()})

    async def _approval_once(self, kept: dict[str, Any]) -> bool | None:
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                await approve_kept(conn, kept["channel"], person=kept["person"], machine=kept["machine"],
                                   window=kept["window"], approved_at=int(kept["approved_at"]))
        except (psycopg.Error, StoreUnavailableError) as exc:
            self._failed("count an approval", exc)
            return None if self._db.unreachable(exc) else False
        self._db.succeeded()
        return True

    async def resume(self, asked_on: str, asker: str) -> ResumedQuestion:
        """The question asker `asker` asked on `asked_on` of a main now gone, asked again here: its
        answer (taken by this call alone: the row locks, a second finds it 'taken'), or its row
        ended 'resumed' if still open (its copies leave every window; the caller asks it anew)."""
        for _ in range(RESUME_TRIES):
            row = await self._read_one("resume a question", _RESUME, (asked_on, asker, _now_ms()))
            if row is None:
                return ResumedQuestion("unreachable")
            state, took, action, answer, moved = row
            if took:
                return ResumedQuestion("answered", action=action, content=_decode(answer))
            if moved:
                return ResumedQuestion("moved")
            if state is None:
                return ResumedQuestion("unknown")
            if state not in ("open", "orphaned", "answered"):
                return ResumedQuestion(str(state))
        return ResumedQuestion("unreachable")

    # ---- reading back ------------------------------------------------------------------

    async def changed(self, known: Sequence[str]) -> list[InboxRow] | None:
        """The rows of `known` channels that are no longer open (state 'gone': the row is), and the
        other mains' open rows not in `known`, with their invokes. None when the store cannot be read."""
        rows = await self._read_all("read the inbox", _CHANGED, {"me": self.main_id, "known": list(known)})
        if rows is None:
            return None
        return [InboxRow(channel=r[0], main_id=r[1] or "", machine=r[2] or "", state=r[3], action=r[4],
                         content=_decode(r[5]), window=r[6], approver=r[7], answer_machine=r[8],
                         invoke=None if r[9] is None else bytes(r[9]), approved=_people(r[10])) for r in rows]

    async def answer_of(self, channel: str) -> InboxRow | None:
        """This main's request `channel` as the store has it (state 'gone': no row); None when the
        store cannot be read."""
        rows = await self._read_all("read an answer", _ANSWER, (channel, self.main_id))
        if rows is None:
            return None
        if not rows:
            return InboxRow(channel=channel, main_id=self.main_id, machine=self.machine, state="gone")
        r = rows[0]
        return InboxRow(channel=r[0], main_id=r[1], machine=r[2], state=r[3], action=r[4], content=_decode(r[5]),
                        window=r[6], approver=r[7], answer_machine=r[8])

    def wake_ups(self, *, main_id: str, requests: Callable[[], None], opened: Callable[[InboxRow], None],
                 ended: Callable[[InboxRow], None], answered: Callable[[InboxRow], None], rules: Callable[[], None],
                 connected: Callable[[int], Awaitable[None]]) -> Listener:
        self._requests_changed = requests
        own_channel = ANSWER_CHANNEL + main_id
        own_prefix = _sent_by(self._db.sender)

        def wake(channel: str, payload: str) -> None:
            if channel == RULES_CHANNEL:
                rules()
                return
            if channel == own_channel:
                told = _told_row(payload, main_id, self.machine)
                if told is None:
                    logger.warning("shared inbox: an unreadable answer notification (%d chars)", len(payload))
                    requests()  # the table says what it was
                else:
                    answered(told)
                return
            if payload.startswith(own_prefix):
                return  # this main's own write (it knows what it changed): skipped before any decoding
            note = _note(payload)
            if note is None:
                requests()  # not a notification of ours: the table says what changed
            elif note[0] == self._db.sender:
                return  # the same, should the server ever format the array otherwise than the prefix above
            elif note[1].state == "open" and note[1].invoke is not None:
                opened(note[1])  # a request opened (or reopened), its invoke told: no read
            elif note[1].state == "open":
                requests()  # opened with an invoke too large to tell, or a quorum's count: in the table
            else:
                ended(note[1])

        return Listener(self._db, (INBOX_CHANNEL, RULES_CHANNEL, own_channel), wake=wake, connected=connected)

    # ---- the connection ------------------------------------------------------------------

    async def _write(self, what: str, sql: LiteralString, args: tuple[Any, ...]) -> bool:
        return await self._write_once(what, sql, args) is True

    async def _write_once(self, what: str, sql: LiteralString, args: tuple[Any, ...]) -> bool | None:
        """True once written; None when the store was unreachable (a write to keep), False when it refused."""
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                await conn.execute(sql, args)
        except (psycopg.Error, StoreUnavailableError) as exc:
            self._failed(what, exc)
            return None if self._db.unreachable(exc) else False
        self._db.succeeded()
        return True

    async def _read_one(self, what: str, sql: LiteralString, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        rows = await self._read_all(what, sql, args)
        return rows[0] if rows else None

    async def _read_all(self, what: str, sql: LiteralString,
                        args: tuple[Any, ...] | dict[str, Any]) -> list[tuple[Any, ...]] | None:
        try:
            pool = await self._db.pool()
            async with pool.connection() as conn:
                rows = await (await conn.execute(sql, args)).fetchall()
        except (psycopg.Error, StoreUnavailableError) as exc:
            self._failed(what, exc)
            return None
        self._db.succeeded()
        return rows

    def _failed(self, what: str, exc: psycopg.Error | StoreUnavailableError) -> None:
        problem = self._db.failure_text(exc)
        self._complaints.log(logging.ERROR, ("inbox", what), "shared inbox: cannot %s: %s", what, problem)


def _json(values: dict[str, Any] | None) -> str | None:
    return None if values is None else msgspec.json.encode(values).decode()


def _decode(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        return msgspec.json.decode(raw, type=dict[str, Any])
    except msgspec.DecodeError:
        logger.warning("shared inbox: an unreadable answer (%d chars)", len(raw))
        return None


def _json_list(values: list[dict[str, str]]) -> str:
    return msgspec.json.encode(values).decode()


def _people(raw: Any) -> tuple[str, ...]:
    """A json_agg of names (parsed by psycopg already, or text; NULL: none)."""
    parsed = msgspec.json.decode(raw) if isinstance(raw, str | bytes) else raw
    return tuple(str(name) for name in parsed) if isinstance(parsed, list) else ()


_NOTE: Final = msgspec.json.Decoder(list[str | None])  # a notification: strings and nulls, checked in C


def _sent_by(sender: str) -> str:
    """How an inbox notification of `sender`'s writes begins (the trigger's json_build_array,
    postgres_schema.py: the sender first, a hex token, so nothing in it is escaped)."""
    return msgspec.json.encode([sender]).decode()[:-1] + ","


def _note(payload: str) -> tuple[str, InboxRow] | None:
    """An inbox notification (postgres_schema.py, 6 and 9): its sender and the row as it became (no
    values, no main id; an open row's invoke body when it fit); None when it is not one."""
    try:
        item = _NOTE.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(item) not in (6, 7):
        return None
    sender, channel, state, window, approver, machine = item[:6]
    if not channel or not state:
        return None
    invoke = None
    if len(item) == 7 and item[6] is not None:
        try:
            invoke = base64.b64decode(item[6])  # (PostgreSQL's base64 breaks lines: decoding skips them)
        except binascii.Error:
            invoke = None  # read from the table instead
    return sender or "", InboxRow(channel=channel, main_id="", machine=machine or "", state=state, window=window,
                                  approver=approver, invoke=invoke)


def _told(channel: str, action: str, values: str | None, window: str, approver: str, machine: str) -> str:
    """The holding main's notification of a claim that won: [channel, action, values, window,
    approver, machine]; the values as null and no action when they would not fit (it reads the row)."""
    told = msgspec.json.encode([channel, action, values, window[:200], approver[:200], machine[:200]]).decode()
    if len(told.encode()) <= MAX_TOLD_BYTES:
        return told
    return msgspec.json.encode([channel, None, None, window[:200], approver[:200], machine[:200]]).decode()


def _told_row(payload: str, main_id: str, machine: str) -> InboxRow | None:
    """_told's notification as this main's answered row (action None: read it); None when it is not one."""
    try:
        item = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return None
    if not (isinstance(item, list) and len(item) == 6 and all(v is None or isinstance(v, str) for v in item)
            and item[0] and item[1] in (None, "accept", "decline", "cancel")):
        return None
    channel, action, values, window, approver, answer_machine = item
    return InboxRow(channel=channel, main_id=main_id, machine=machine, state="answered", action=action,
                    content=_decode(values), window=window, approver=approver, answer_machine=answer_machine)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _decode_list(raw: Any) -> list[list[Any]]:
    """A json_agg column: psycopg has parsed it already (json), or it is text."""
    parsed = msgspec.json.decode(raw) if isinstance(raw, str | bytes) else raw
    return [item for item in parsed if isinstance(item, list) and len(item) == 3] if isinstance(parsed, list) else []
