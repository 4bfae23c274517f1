"""What the store holds, as typed records: every backend takes and gives these, never rows.

Remembered rules and approvals are `main_process.consent.rules.Rule` (the record main decides with); the
audit log's are here (`AuditEntry` itself is in shared.messages: main sends rows to `elicitron audit`). Paired devices are `shared.web_devices.PairedDevice` (the web window and
the CLI read them too). An open question of `elicitron ask` on a shared store is a row of the
shared inbox like any request; an asker that re-attaches takes it back as a `ResumedQuestion`.
"""

from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple, get_args

from shared.messages import AuditEntry, DeviceRef, ElicitationInvoke

# AuditEntry is defined with the wire bodies (main sends rows to `elicitron audit`), and is one of these.
__all__ = ["OUTCOMES", "PENDING", "Approver", "AuditEntry", "Claim", "Decided", "InboxRow", "Outcome", "OutcomeRecord",
           "QuorumVote", "ResumedQuestion"]

Outcome = Literal["accept", "decline", "cancel", "expired", "cancelled", "server-closed", "host-gone"]
OUTCOMES: Final[frozenset[str]] = frozenset(get_args(Outcome))
PENDING: Final = "pending"  # AuditEntry.status and the key `counts()` use for rows without an outcome yet


class Decided(NamedTuple):
    """A request decided the moment it was made (a rule answered it), written as one full row. One
    is made per call a rule or a policy lets through: a NamedTuple is as immutable as a frozen
    dataclass and made in a third of the time (0.7 vs 2.0 µs)."""

    invoke: ElicitationInvoke
    outcome: str
    decided_at: int  # epoch ms
    content: dict[str, Any] | None = None
    rule_id: str | None = None
    decision: str | None = None
    reason: str | None = None  # a denial's: the forbidding policy's reason


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
    reason: str | None = None  # a denied call: the reason the person typed (shared/denial_reason.py)
    approvers: tuple[str, ...] = ()  # a quorum decided on this main: every approver, in order (then a denier)


# ---- the shared inbox of a store many mains share (interface.py: SharedInbox) -------------------

Claim = Literal["won", "lost", "unreachable"]
"""A window's answer offered to the shared inbox: it decided the request (committed), another
answer or ending came first, or the store could not be asked."""


@dataclass(frozen=True)
class Approver:
    """Who answered, as the audit names them: the window, its name, the paired device a web page
    answered for, and the machine of the main the window is attached to."""

    window: str  # the window's id
    machine: str
    name: str | None = None
    device: DeviceRef | None = None
    user: str | None = None  # a desktop window's OS user, when it says (hello's `user`)

    @property
    def label(self) -> str:
        """The person's side of it: the paired device's name, else the window's name (and its OS
        user), else its id."""
        if self.device is not None:
            return self.device.name
        name = self.name or self.window
        return f"{name} ({self.user})" if self.user else name


@dataclass(frozen=True)
class InboxRow:
    """One shared request as a main reads it back: whose it is, and how it ended (state 'open':
    not yet). `content` is the answer's values, read only by the main that holds the request."""

    channel: str
    main_id: str
    machine: str
    state: str  # 'open' | 'answered' | an unanswered outcome | 'orphaned' (its main is gone) | 'gone' (no row)
    # | a question's 'taken' (answered, and handed to its asker) or 'resumed' (asked again on another main)
    action: str | None = None
    content: dict[str, Any] | None = None
    window: str | None = None
    approver: str | None = None
    answer_machine: str | None = None
    approved: tuple[str, ...] = ()  # an open quorum approval: who approved so far, in order
    invoke: bytes | None = None  # an open row new to the reader: the invoke body as its main's windows got it


@dataclass(frozen=True)
class QuorumVote:
    """A quorum approver's answer offered to the shared inbox: "counted" (an approval that does not
    decide yet; `people`: every approval so far), "won" (it decided the request, committed with its
    audit row; `people`: who approved, then the decider if they denied), or as a Claim "lost" /
    "unreachable"."""

    result: Literal["counted", "won", "lost", "unreachable"]
    people: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResumedQuestion:
    """An asker's question asked again on another main after its main was lost (interface.py:
    `SharedInbox.resume`), as the store had it: "answered" (its answer, taken now: no one else gets
    it), "moved" (open: that copy ended, ask it here anew), "taken" (answered and handed to the
    asker already), "unknown" (no such question on the store), "unreachable", or how it ended
    unanswered ("expired", "cancelled", ...)."""

    state: str
    action: str | None = None
    content: dict[str, Any] | None = None
