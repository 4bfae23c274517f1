"""The audit rows no window answers (main_process/consent/row_ids.py, pending.py's
`record_decided_call`): their ids are unique on a main and between mains, in the order they were
made, never mistaken for a reply channel; and a call decided without a card is one full row, as
`elicitron audit` shows it."""

import asyncio
from pathlib import Path

from kit.consent_parts import NoWindows

from main_process.consent import approvals
from main_process.consent.audit_writer import AuditWriter
from main_process.consent.pending import PendingRequests
from main_process.consent.row_ids import PREFIX, RowIds
from main_process.store.sqlite import SqliteAudit
from shared import channels
from shared.messages import ApprovalInfo, AuditEntry, ElicitationRequest


def test_ids_are_unique_ordered_and_not_reply_channels() -> None:
    ids = RowIds()
    made = [ids.next() for _ in range(2_000)]
    assert len(set(made)) == len(made)
    assert made == sorted(made)  # one main's rows sort in the order they were decided
    assert all(row_id.startswith(PREFIX) and not channels.is_result_channel(row_id) for row_id in made)


def test_two_mains_never_make_the_same_id() -> None:
    one, other = RowIds(), RowIds()
    assert {one.next() for _ in range(100)}.isdisjoint({other.next() for _ in range(100)})


def test_a_call_decided_without_a_card_is_one_full_row(tmp_path: Path) -> None:
    async def decide_two() -> tuple[list[str], list[AuditEntry]]:
        loop = asyncio.get_running_loop()
        store = SqliteAudit(tmp_path / "audit.sqlite3", record_values=False)
        writer = AuditWriter(store, loop)
        pending = PendingRequests(NoWindows(), loop, audit=writer)
        asked = ElicitationRequest(server="files", params={
            "mode": "form", "message": "Claude wants to call files/read_file",
            "requestedSchema": approvals.APPROVAL_SCHEMA})
        ids = [
            pending.decided.record_decided_call(asked, ApprovalInfo(server="files", tool="read_file",
                                                            arguments={"path": "/home/a"}),
                                        "allow-once", "policy:home", timeout_s=60, origin="w-1", via="Claude"),
            pending.decided.record_decided_call(asked, ApprovalInfo(server="files", tool="read_file",
                                                            arguments={"path": "/etc/passwd"}),
                                        "deny", "policy:no-etc", timeout_s=60, origin="w-1", via="Claude",
                                        reason="nothing under /etc"),
        ]
        assert pending.all() == []  # nothing opened for a window
        await writer.close()  # what is queued is written
        entries = await store.entries()
        store.close()
        return ids, entries

    ids, entries = asyncio.run(decide_two())
    rows = {entry.channel: entry for entry in entries}
    assert set(rows) == set(ids)
    allowed, denied = rows[ids[0]], rows[ids[1]]
    for row in (allowed, denied):
        assert (row.server, row.kind, row.tool, row.via, row.origin, row.outcome, row.fields) == (
            "files", "approval", "read_file", "Claude", "w-1", "accept", ["decision"])
        assert row.message == "Claude wants to call files/read_file"
        assert row.arguments is None and row.content is None  # values only with auditValues
        assert row.expires_at == row.created_at + 60_000
    assert (allowed.rule_id, allowed.decision, allowed.reason) == ("policy:home", "allow-once", None)
    assert (denied.rule_id, denied.decision, denied.reason) == ("policy:no-etc", "deny", "nothing under /etc")
