"""Quorum approvals: a config rule's tool call needs `needed` approvals from different listed people
(PROTOCOL.md §11). Pure: pending.py asks who answered and keeps the count on the request's invoke;
on a store many mains share the store counts (store/postgres_quorum.py) and pending.py shows its count.

A person is matched by the names their window gives: the paired web device's name, the window's
hello name, its OS user (in that order); the first listed one is who approved, so one person
approving from two windows, or twice, counts once.
"""

from collections.abc import Iterable

from shared.errors import ProtocolError, WireCode
from shared.messages import QuorumInfo


def approver_of(quorum: QuorumInfo, names: Iterable[str | None]) -> str | None:
    """The listed approver among an answering window's names; None if it names nobody listed."""
    listed = set(quorum.approvers)
    return next((name for name in names if name is not None and name in listed), None)


def listed_approver(quorum: QuorumInfo, names: tuple[str | None, ...], window: str, channel: str) -> str:
    """The listed approver a window answers for, by its `names`. Raises ProtocolError (not-approver,
    naming the window by its first name) for someone not listed."""
    person = approver_of(quorum, names)
    if person is None:
        who = next((name for name in names if name), window)
        raise ProtocolError(WireCode.NOT_APPROVER, f"{who} is not an approver of this call (approvers: "
                                                  f"{', '.join(quorum.approvers)})", channel)
    return person


def with_approval(quorum: QuorumInfo, person: str) -> QuorumInfo:
    """The count once `person` approved (unchanged if they had approved already)."""
    if person in quorum.approved:
        return quorum
    return QuorumInfo(needed=quorum.needed, approvers=quorum.approvers, approved=[*quorum.approved, person])


def complete(quorum: QuorumInfo) -> bool:
    return len(quorum.approved) >= quorum.needed
