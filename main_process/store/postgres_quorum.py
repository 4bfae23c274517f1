"""Quorum approvals on a PostgreSQL store (postgres_schema.py, migration 4): the count of a quorum
approval (consent/quorum.py) kept where every main of the store sees it, so approvers on any main
add up.

One transaction per approver's answer, begun by locking the request's open row (`FOR UPDATE`): two
answers at once on two mains are counted one after the other, the second sees the first's
approval, so they never both decide nor is either lost. Inside it the approval is inserted keyed
by (request, person): the same person approving twice, from any window on any main, counts once.
The caller (postgres_inbox.py) then decides the request in the same transaction when this answer
decides it (a deny, or the last approval needed), else wakes every other main to show the new count.
"""

from dataclasses import dataclass
from typing import Any, Final

import psycopg

_LOCK: Final = "SELECT 1 FROM open_requests WHERE channel = %s AND state = 'open' FOR UPDATE"
_APPROVE: Final = ("INSERT INTO quorum_approvals (channel, person, machine, window_id, approved_at) "
                   "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (channel, person) DO NOTHING RETURNING 1")
_APPROVALS: Final = "SELECT person, machine FROM quorum_approvals WHERE channel = %s ORDER BY seq"
# The inbox triggers' notification (postgres_schema.py, 6) for a row still open whose count changed:
# every other main reads it (postgres_inbox.py: `changed`); the voter's main skips it, as its own
# write, and shows the count it got back from the vote (pending.py: `_voted`).
_WAKE: Final = ("SELECT pg_notify('elicitron_inbox', json_build_array(coalesce(current_setting('elicitron.sender', "
                "true), ''), %s::text, 'open', NULL::text, NULL::text, NULL::text)::text)")

# An approval counted on one main while the store was away, made when it is back (postgres_backlog.py):
# once per person, only while the request's row is there (one never published has none), and it wakes
# every other main to show the new count when the row is still open.
_APPROVE_KEPT: Final = (
    "WITH added AS (INSERT INTO quorum_approvals (channel, person, machine, window_id, approved_at) "
    "SELECT %(channel)s, %(person)s, %(machine)s, %(window)s, %(at)s "
    "WHERE EXISTS (SELECT 1 FROM open_requests WHERE channel = %(channel)s) "
    "ON CONFLICT (channel, person) DO NOTHING RETURNING channel) "
    "SELECT count(*) FROM added")
_OPEN: Final = "SELECT 1 FROM open_requests WHERE channel = %s AND state = 'open'"


@dataclass(frozen=True)
class Tally:
    """A request's approvals after one approver's answer: (person, machine) in the order given;
    `decides`: the answer decides it (a deny, or the approval that completes the quorum)."""

    approvals: list[tuple[str, str]]
    decides: bool


async def tally(conn: psycopg.AsyncConnection[Any], channel: str, *, person: str, machine: str, window: str,
                approve: bool, needed: int, now_ms: int) -> Tally | None:
    """Count `person`'s answer (inside the caller's transaction); None when the request is no longer
    open (answered, ended, or its main gone)."""
    if await (await conn.execute(_LOCK, (channel,))).fetchone() is None:
        return None
    added = False
    if approve:
        added = await (await conn.execute(_APPROVE, (channel, person, machine, window, now_ms))).fetchone() is not None
    rows = await (await conn.execute(_APPROVALS, (channel,))).fetchall()
    approvals = [(str(r[0]), str(r[1])) for r in rows]
    decides = not approve or len(approvals) >= needed
    if added and not decides:
        await conn.execute(_WAKE, (channel,))
    return Tally(approvals, decides)


async def approve_kept(conn: psycopg.AsyncConnection[Any], channel: str, *, person: str, machine: str, window: str,
                       approved_at: int) -> bool:
    """Count an approval kept while the store was away (idempotent: a person counts once); True
    when it was new. Every other main hears of it when the request is still open."""
    async with conn.transaction():
        row = await (await conn.execute(_APPROVE_KEPT, {"channel": channel, "person": person, "machine": machine,
                                                         "window": window, "at": approved_at})).fetchone()
        added = row is not None and int(row[0]) > 0
        if added and await (await conn.execute(_OPEN, (channel,))).fetchone() is not None:
            await conn.execute(_WAKE, (channel,))
    return added
