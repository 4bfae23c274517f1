"""What `elicitron audit` prints: the audit log's entries (store/records.py, read through the
store interface) as a table or as JSON. The rows themselves live in the store (store/sqlite_audit.py
for the SQLite backend)."""

import time
from collections.abc import Sequence
from typing import Final

import msgspec

from main_process.store.records import AuditEntry
from shared.terminal_text import table_cell


def to_json(entries: Sequence[AuditEntry]) -> bytes:
    """A JSON array of entries, camelCase keys, nulls kept."""
    return msgspec.json.encode(list(entries))


HOST_GONE_TEXT: Final = "host stopped waiting"  # outcome "host-gone": the host cancelled its call, or left


def _outcome_text(entry: AuditEntry) -> str:
    """What became of it; an approval's decision, unless the host stopped waiting first (then
    nobody decided: the stored "deny" only says the call was not made)."""
    if entry.outcome == "host-gone":
        return HOST_GONE_TEXT
    return entry.decision or entry.status


_WIDTHS: Final = {"SERVER": 20, "ASKED": 40, "BY": 40, "MESSAGE": 60, "MACHINE": 20}


def format_entries(entries: Sequence[AuditEntry]) -> str:
    """A plain-text table, one line per entry, in the order given (no trailing newline).

    Text from servers is made safe for a terminal (shared.terminal_text): control and format
    characters (bidi overrides and the like) are shown as escapes, never acted on.
    """
    if not entries:
        return "no elicitations recorded"
    header: tuple[str, ...] = ("CREATED", "SERVER", "MODE", "OUTCOME", "BY", "ASKED", "MESSAGE")
    machines = any(entry.machine for entry in entries)  # a shared store's rows name the main that asked
    if machines:
        header = ("CREATED", "MACHINE", *header[1:])
    rows = [header]
    for entry in entries:
        asked = entry.url if entry.mode == "url" else ", ".join(entry.fields or [])
        if entry.tool is not None:
            asked = f"{entry.via or 'a host'} calls {entry.tool}"
        # The window's name as it was when it answered (its id is in --json); rows from before
        # names were kept show the end of the id.
        by = table_cell(entry.window_name, _WIDTHS["BY"]) if entry.window_name else (
            "…" + entry.window[-8:] if entry.window and len(entry.window) > 9 else entry.window or "")
        if entry.device is not None:  # a web window's page: the paired device is who answered
            by = "device " + table_cell(entry.device, _WIDTHS["BY"] - 7)
        if entry.approvers:  # a quorum on a shared store: every approver, and the machine of each
            by = table_cell(", ".join(f"{a.person} on {a.machine}" for a in entry.approvers), _WIDTHS["BY"])
        elif entry.answer_machine and entry.answer_machine != entry.machine:  # a window of another main of the store
            by += " on " + table_cell(entry.answer_machine, _WIDTHS["MACHINE"])
        if entry.rule_id is not None:  # a policy file's decision is audited as `policy:<id>` (policy/hook.py)
            by = "policy " + entry.rule_id.removeprefix("policy:") if entry.rule_id.startswith("policy:") \
                else f"rule {entry.rule_id}"
        machine = (table_cell(entry.machine or "?", _WIDTHS["MACHINE"]),) if machines else ()
        rows.append((
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.created_at / 1000)),
            *machine,
            table_cell(entry.server or "?", _WIDTHS["SERVER"]),
            entry.mode or "?",
            _outcome_text(entry),
            by,
            table_cell(asked or "", _WIDTHS["ASKED"]),
            table_cell(entry.message, _WIDTHS["MESSAGE"]),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )
