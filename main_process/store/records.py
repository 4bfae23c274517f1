"""What the store holds, as typed records: every backend takes and gives these, never rows.

Remembered rules and approvals are `main_process.consent.rules.Rule` (the record main decides with); the
audit log's are here. Paired devices are `shared.web_devices.PairedDevice` (the web window and
the CLI read them too); an open question of `elicitron ask` as a store would keep it is
`StoredQuestion` (interface.py says why no backend keeps those yet).
"""

from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

import msgspec

from shared.messages import AskerInfo, DeviceRef, ElicitationInvoke

Outcome = Literal["accept", "decline", "cancel", "expired", "cancelled", "server-closed", "host-gone"]
OUTCOMES: Final[frozenset[str]] = frozenset(get_args(Outcome))
PENDING: Final = "pending"  # the key `counts()` uses for rows without an outcome yet


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One elicitation as the audit log holds it (camelCase in JSON, like the wire contract)."""

    channel: str
    server: str
    mode: str
    message: str
    fields: list[str] | None  # form mode: requested property names
    url: str | None  # url mode
    origin: str | None
    created_at: int
    expires_at: int | None
    outcome: str | None  # None while pending
    window: str | None  # the window that answered (its id)
    decided_at: int | None
    content: dict[str, Any] | None  # only when recorded with record_values=True
    kind: str | None = None  # None: a server's elicitation; else "approval", "question", "sign-in"
    via: str | None = None  # the MCP host whose call led to it
    tool: str | None = None  # approvals: the tool asked about
    arguments: dict[str, Any] | None = None  # approvals, only with record_values=True
    rule_id: str | None = None  # answered by this rule rather than by a window
    decision: str | None = None  # approvals: allow-once | allow-session | allow-always | deny
    window_name: str | None = None  # the answering window's name when it answered
    device: str | None = None  # a web window answered: the paired device's name then
    device_id: str | None = None  # and its id, as `elicitron devices` lists it
    machine: str | None = None  # the main that asked (a shared store: PostgreSQL); None in SQLite

    @property
    def status(self) -> str:
        return self.outcome or PENDING


@dataclass(frozen=True)
class Decided:
    """A request decided the moment it was made (a rule answered it), written as one full row."""

    invoke: ElicitationInvoke
    outcome: str
    decided_at: int  # epoch ms
    content: dict[str, Any] | None = None
    rule_id: str | None = None
    decision: str | None = None


@dataclass(frozen=True)
class OutcomeRecord:
    """How one request ended, as the audit log is told it (the first outcome of a channel wins)."""

    channel: str
    outcome: str  # one of OUTCOMES
    window: str | None = None  # the window that answered (its id)
    content: dict[str, Any] | None = None  # kept only for "accept" and only with record_values
    rule_id: str | None = None  # a rule answered instead of a window
    decision: str | None = None  # an approval's decision
    window_name: str | None = None  # the answering window's name then
    device: DeviceRef | None = None  # the paired web device a web window's page answered for


@dataclass(frozen=True)
class StoredQuestion:
    """An open question of `elicitron ask` as a shared store would keep it until it is answered
    (interface.py: `QuestionTable`)."""

    channel: str  # the asker's responseChannel
    asker: AskerInfo
    params: dict[str, Any]  # the elicitation's params as asked
    created_at: int  # epoch ms
    expires_at: int  # epoch ms
