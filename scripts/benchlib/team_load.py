"""The team bench's load per request on the store: the statements the mains send PostgreSQL, by
kind, and the inbox notifications, counted over one block of requests (not a timed one).

Statements come from the server's own log (`log_statement = 'all'` for the counted block, then
back off): every statement any main sends, prepared or not, one line each. Notifications are
counted by a LISTEN connection of the bench's own: an inbox one wakes every main of the store, an
answer one (on the channel of the main that holds the request) that main alone.
"""

import re
from collections import Counter
from collections.abc import Callable
from typing import Final

import psycopg
from kit.postgres import SERVER_USER, PostgresServer
from psycopg import sql

# A statement's first words -> what it does (main_process/store/postgres_*.py)
KINDS: Final = (
    ("INSERT INTO open_requests", "publish"),
    ("WITH published AS", "publish"),  # with its audit row
    ("WITH won AS", "claim"),
    ("SELECT k.channel", "read changes"),
    ("SELECT channel, main_id, machine, state", "read an answer"),
    ("SELECT channel, main_id", "read changes"),
    ("SELECT channel, invoke", "read invokes"),
    ("UPDATE open_requests SET answer = NULL", "clear taken answers"),
    ("UPDATE open_requests SET state", "end"),
    ("WITH renewed AS", "heartbeat"),
    ("INSERT INTO elicitations", "audit"),
    ("UPDATE elicitations", "audit"),
    ("BEGIN", "audit"),  # the audit's batches are the only explicit transactions of a request
    ("COMMIT", "audit"),
)
_STATEMENT: Final = re.compile(r"LOG:\s+(?:statement|execute [^:]+):\s+(.*)")


def _kind(text: str) -> str:
    for prefix, kind in KINDS:
        if text.startswith(prefix):
            return kind
    return "other: " + " ".join(text.split()[:3])


def count(server: PostgresServer, database: str, warm: Callable[[], object],
          run_block: Callable[[], int]) -> tuple[Counter[str], Counter[str], int]:
    """(statements by kind, notifications by kind (`inbox`: wakes every main; `answer`: the main
    that holds a request answered elsewhere), requests) while `run_block` runs its requests.
    `warm` runs some first: a server process takes a reloaded setting only after its next statement."""
    server.admin("ALTER SYSTEM SET log_statement = 'all'")
    server.admin("SELECT pg_reload_conf()")
    warm()
    log = server.root / "server.log"
    try:
        with psycopg.connect(host=str(server.root), port=server.port, user=SERVER_USER, dbname=database,
                             autocommit=True) as listener:
            listener.execute("LISTEN elicitron_inbox")
            for (main_id,) in listener.execute("SELECT main_id FROM mains").fetchall():  # each main's answers
                listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(f"elicitron_answer_{main_id}")))
            start = log.stat().st_size
            requests = run_block()
            end = log.stat().st_size
            notified: Counter[str] = Counter(  # all sent by now; none come later
                "inbox" if note.channel == "elicitron_inbox" else "answer" for note in listener.notifies(timeout=0.5))
    finally:
        server.admin("ALTER SYSTEM RESET log_statement")
        server.admin("SELECT pg_reload_conf()")
    with log.open("rb") as lines:
        lines.seek(start)
        text = lines.read(end - start).decode(errors="replace")
    kinds: Counter[str] = Counter()
    for line in text.splitlines():
        found = _STATEMENT.search(line)
        if found and not found.group(1).startswith(("LISTEN", "ALTER SYSTEM", "SELECT pg_reload_conf",
                                                     "SELECT main_id FROM mains")):
            kinds[_kind(found.group(1))] += 1
    return kinds, notified, requests
