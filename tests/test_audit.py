"""The SQLite backend's audit log: rows, privacy, durability across SIGKILL, and never raising from record_*."""

import json
import logging
import os
import select
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from main_process.audit import format_entries, to_json
from main_process.store.factory import default_audit_path as default_path
from main_process.store.records import AuditEntry
from main_process.store.sqlite_audit import SCHEMA_VERSION, SqliteAuditLog
from shared import channels
from shared.errors import AuditLogError
from shared.messages import ElicitationInvoke, ElicitationRequest

ROOT = Path(__file__).resolve().parent.parent

FORM_PARAMS: dict[str, Any] = {
    "mode": "form",
    "message": "Who are you?",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name"],
    },
}
URL_PARAMS: dict[str, Any] = {
    "mode": "url",
    "message": "Sign in to continue",
    "url": "https://example.com/login?state=abc",
    "elicitationId": "e-1",
}


def make_invoke(server: str = "demo", params: dict[str, Any] | None = None, *,
                created_at: int = 1_700_000_000_000, origin: str | None = "window-origin",
                channel: str | None = None) -> ElicitationInvoke:
    return ElicitationInvoke(
        request=ElicitationRequest(server=server, params=params if params is not None else FORM_PARAMS),
        response_channel=channel or channels.new_result_channel(),
        created_at=created_at,
        expires_at=created_at + 600_000,
        origin=origin,
    )


def raw_row(path: Path, channel: str) -> sqlite3.Row:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        row: sqlite3.Row | None = conn.execute("SELECT * FROM elicitations WHERE channel = ?",
                                               (channel,)).fetchone()
    finally:
        conn.close()
    assert row is not None
    return row


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "audit.sqlite3"


@pytest.fixture
def log(db_path: Path) -> Any:
    audit = SqliteAuditLog(db_path)
    yield audit
    audit.close()


# ---- rows --------------------------------------------------------------------------------


def test_request_row_has_the_request_fields(log: SqliteAuditLog) -> None:
    invoke = make_invoke()
    assert log.record_request(invoke) is True
    [entry] = log.entries()
    assert entry == AuditEntry(
        channel=invoke.response_channel, server="demo", mode="form", message="Who are you?",
        fields=["name", "age"], url=None, origin="window-origin", created_at=invoke.created_at,
        expires_at=invoke.created_at + 600_000, outcome=None, window=None, decided_at=None, content=None,
    )
    assert entry.status == "pending"


def test_url_mode_stores_the_url_instead_of_field_names(log: SqliteAuditLog) -> None:
    invoke = make_invoke(params=URL_PARAMS, origin=None)
    assert log.record_request(invoke)
    [entry] = log.entries()
    assert (entry.mode, entry.url, entry.fields, entry.origin) == ("url", URL_PARAMS["url"], None, None)


def test_outcome_fills_outcome_window_and_time_but_not_values_by_default(log: SqliteAuditLog,
                                                                         db_path: Path) -> None:
    invoke = make_invoke()
    log.record_request(invoke)
    assert log.record_outcome(invoke.response_channel, "accept", window="window-b", content={"name": "Ada"})
    [entry] = log.entries()
    assert (entry.outcome, entry.window, entry.content) == ("accept", "window-b", None)
    assert entry.decided_at is not None and entry.decided_at > invoke.created_at
    assert raw_row(db_path, invoke.response_channel)["content"] is None
    assert b"Ada" not in db_path.read_bytes() + db_path.with_name(db_path.name + "-wal").read_bytes()


def test_values_are_stored_only_with_record_values(db_path: Path) -> None:
    with SqliteAuditLog(db_path, record_values=True) as audit:
        accepted, declined = make_invoke(), make_invoke()
        audit.record_request(accepted)
        audit.record_request(declined)
        assert audit.record_outcome(accepted.response_channel, "accept", window="w",
                                    content={"name": "Ada", "age": 36})
        assert audit.record_outcome(declined.response_channel, "decline", window="w", content={"name": "x"})
        by_channel = {e.channel: e for e in audit.entries()}
    assert by_channel[accepted.response_channel].content == {"name": "Ada", "age": 36}
    assert by_channel[declined.response_channel].content is None
    assert json.loads(raw_row(db_path, accepted.response_channel)["content"]) == {"name": "Ada", "age": 36}


def test_first_outcome_wins(log: SqliteAuditLog, caplog: pytest.LogCaptureFixture) -> None:
    invoke = make_invoke()
    log.record_request(invoke)
    assert log.record_outcome(invoke.response_channel, "decline", window="w1")
    assert log.record_outcome(invoke.response_channel, "accept", window="w2") is False
    [entry] = log.entries()
    assert (entry.outcome, entry.window) == ("decline", "w1")
    assert "already has outcome 'decline'" in caplog.text


def test_outcome_without_its_request_is_still_kept(log: SqliteAuditLog) -> None:
    assert log.record_outcome("msgElicitationTransferResult-orphan", "expired")
    [entry] = log.entries()
    assert (entry.channel, entry.server, entry.outcome, entry.created_at) == (
        "msgElicitationTransferResult-orphan", "", "expired", entry.decided_at)


def test_unknown_outcome_is_refused_without_raising(log: SqliteAuditLog, caplog: pytest.LogCaptureFixture) -> None:
    invoke = make_invoke()
    log.record_request(invoke)
    assert log.record_outcome(invoke.response_channel, "maybe") is False
    assert log.entries()[0].outcome is None
    assert "unknown outcome 'maybe'" in caplog.text


def test_entries_newest_first_with_limit_and_server_filter(log: SqliteAuditLog) -> None:
    for i, server in enumerate(["a", "b", "a", "c", "a"]):
        log.record_request(make_invoke(server=server, created_at=1_000 + i, channel=f"ch-{i}"))
    assert [e.channel for e in log.entries()] == ["ch-4", "ch-3", "ch-2", "ch-1", "ch-0"]
    assert [e.channel for e in log.entries(limit=2)] == ["ch-4", "ch-3"]
    assert [e.channel for e in log.entries(server="a")] == ["ch-4", "ch-2", "ch-0"]
    assert log.entries(server="nobody") == []


def test_counts(log: SqliteAuditLog) -> None:
    assert log.counts() == {}
    invokes = [make_invoke() for _ in range(6)]
    for invoke in invokes:
        log.record_request(invoke)
    outcomes = ["accept", "accept", "decline", "expired", "server-closed"]  # the sixth stays pending
    for invoke, outcome in zip(invokes, outcomes, strict=False):
        log.record_outcome(invoke.response_channel, outcome)
    assert log.counts() == {"accept": 2, "decline": 1, "expired": 1, "server-closed": 1, "pending": 1}


# ---- storage -----------------------------------------------------------------------------


def test_wal_and_synchronous_normal(log: SqliteAuditLog, db_path: Path) -> None:
    log.record_request(make_invoke())
    assert log._conn is not None
    assert log._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL: SIGKILL-safe in WAL mode
    other = sqlite3.connect(db_path)
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persisted in the file
        assert other.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        other.close()


def test_private_modes_even_with_an_open_umask(tmp_path: Path) -> None:
    path = tmp_path / "new" / "audit.sqlite3"
    old = os.umask(0)
    try:
        with SqliteAuditLog(path) as audit:
            assert audit.record_request(make_invoke())
            wal = path.with_name(path.name + "-wal")
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert wal.exists() and stat.S_IMODE(wal.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_a_looser_existing_file_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    path.touch()
    path.chmod(0o644)
    with SqliteAuditLog(path) as audit:
        assert audit.record_request(make_invoke())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_default_path_is_in_the_user_data_dir() -> None:
    import platformdirs

    assert default_path() == Path(platformdirs.user_data_dir("elicitron")) / "audit.sqlite3"


def test_a_second_instance_sees_committed_outcomes(log: SqliteAuditLog, db_path: Path) -> None:
    reader = SqliteAuditLog(db_path)
    try:
        invoke = make_invoke()
        log.record_request(invoke)
        assert reader.counts() == {"pending": 1}
        log.record_outcome(invoke.response_channel, "cancel", window="w")
        [entry] = reader.entries()
        assert (entry.outcome, entry.window) == ("cancel", "w")
    finally:
        reader.close()


CHILD = """
import sys
from pathlib import Path
from main_process.store.sqlite_audit import SqliteAuditLog
from shared.messages import ElicitationInvoke, ElicitationRequest

path, channel = Path(sys.argv[1]), sys.argv[2]
log = SqliteAuditLog(path, record_values=True)
invoke = ElicitationInvoke(request=ElicitationRequest(server="demo", params={"message": "m"}),
                           response_channel=channel, created_at=1, expires_at=None, origin=None)
assert log.record_request(invoke)
ok = log.record_outcome(channel, "accept", window="w-killed", content={"name": "Ada"})
print("done" if ok else "failed", flush=True)
sys.stdin.read()  # never returns: the test kills us here, with the log still open
"""


@pytest.mark.slow
def test_outcome_survives_sigkill_right_after_record_outcome(db_path: Path) -> None:
    channel = channels.new_result_channel()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db_path), channel], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().decode().strip() if ready else ""
        if line != "done":
            proc.kill()
            _, stderr = proc.communicate(timeout=10)
            pytest.fail(f"child said {line!r} instead of 'done'; stderr:\n{stderr.decode(errors='replace')}")
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    # The child never closed the log, so its writes are still in the WAL, not yet checkpointed.
    assert db_path.with_name(db_path.name + "-wal").stat().st_size > 0
    with SqliteAuditLog(db_path) as audit:
        [entry] = audit.entries()
    assert (entry.channel, entry.outcome, entry.window, entry.content) == (channel, "accept", "w-killed",
                                                                           {"name": "Ada"})


# ---- failures never raise from record_* ---------------------------------------------------


def test_unwritable_path_logs_an_error_and_returns_false(tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the directory should be")
    audit = SqliteAuditLog(blocker / "audit.sqlite3")  # must not raise
    invoke = make_invoke()
    assert audit.record_request(invoke) is False
    assert audit.record_outcome(invoke.response_channel, "accept", window="w") is False
    assert audit.unrecorded == 2
    errors = [r for r in caplog.records if r.name == "main_process.store.sqlite_audit" and r.levelno == logging.ERROR]
    assert len(errors) == 1, "the same problem is logged once, then rate-limited"
    assert "not-a-dir" in errors[0].getMessage()
    with pytest.raises(AuditLogError):
        audit.entries()
    audit.close()


def test_locked_database_returns_false_then_recovers(db_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    audit = SqliteAuditLog(db_path, busy_timeout_ms=0)
    locker = sqlite3.connect(db_path, isolation_level=None)
    try:
        first, second = make_invoke(), make_invoke()
        assert audit.record_request(first)
        assert audit.record_request(second)
        locker.execute("BEGIN EXCLUSIVE")
        assert audit.record_outcome(first.response_channel, "accept") is False
        assert audit.record_outcome(second.response_channel, "decline") is False
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and "locked" in errors[0].getMessage()
        locker.execute("ROLLBACK")
        assert audit.record_outcome(first.response_channel, "accept")
        assert "writable again; 2 record(s) were lost" in caplog.text
        assert audit.counts() == {"accept": 1, "pending": 1}
    finally:
        locker.close()
        audit.close()


def test_newer_schema_is_not_touched(db_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    SqliteAuditLog(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    audit = SqliteAuditLog(db_path)
    assert audit.record_request(make_invoke()) is False
    assert "newer than this elicitron's" in caplog.text
    with pytest.raises(AuditLogError, match="schema version"):
        audit.counts()
    audit.close()


def test_closed_log_records_nothing(db_path: Path) -> None:
    audit = SqliteAuditLog(db_path)
    audit.close()
    assert audit.record_request(make_invoke()) is False
    with pytest.raises(AuditLogError, match="closed"):
        audit.entries()


# ---- output ------------------------------------------------------------------------------


def test_format_entries_shows_server_outcome_and_what_was_asked(log: SqliteAuditLog) -> None:
    answered, waiting = make_invoke(server="weather"), make_invoke(server="bank", params=URL_PARAMS)
    log.record_request(answered)
    log.record_request(waiting)
    log.record_outcome(answered.response_channel, "decline", window="0190a1b2-c3d4-7e5f-8a9b-0123456789ab")
    table = format_entries(log.entries())
    lines = table.splitlines()
    assert lines[0].split() == ["CREATED", "SERVER", "MODE", "OUTCOME", "BY", "ASKED", "MESSAGE"]
    assert len(lines) == 3
    weather = next(line for line in lines if "weather" in line)
    assert "decline" in weather and "name, age" in weather and "…456789ab" in weather
    bank = next(line for line in lines if "bank" in line)
    assert "pending" in bank and "https://example.com/login" in bank
    assert format_entries([]) == "no elicitations recorded"


def test_format_entries_neutralises_terminal_escapes(log: SqliteAuditLog) -> None:
    params = {**FORM_PARAMS, "message": "pay\x1b[2J\x1b]0;owned\x07 now\u202eevil\nline"}
    log.record_request(make_invoke(server="srv\x1b[31m", params=params))
    table = format_entries(log.entries())
    assert "\x1b" not in table and "\x07" not in table and "\u202e" not in table
    assert len(table.splitlines()) == 2


def test_to_json_is_camel_case_with_nulls(log: SqliteAuditLog) -> None:
    invoke = make_invoke()
    log.record_request(invoke)
    [item] = json.loads(to_json(log.entries()))
    assert item["channel"] == invoke.response_channel
    assert item["createdAt"] == invoke.created_at and item["expiresAt"] == invoke.created_at + 600_000
    assert item["outcome"] is None and item["decidedAt"] is None and item["fields"] == ["name", "age"]
    assert json.loads(to_json([])) == []
