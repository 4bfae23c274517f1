"""What the consent layer is given in process, with nobody on the other side: an Outbox with no
window attached, Consent's ports that publish to no one (test_policy_elicit.py; the `rules`
bench's consent-code-alone figure, scripts/benchlib/rules.py), and PendingRequests whose decided
rows are only listed (test_elicitation_gate.py, test_policy_elicit.py)."""

import asyncio
from collections.abc import Callable
from typing import Any

from main_process.consent.pending import DecidedRows, Elicitation, PendingRequests, RequestOptions
from main_process.wire.peers import Peer
from shared.messages import ElicitationResult


class NoWindows:
    """pending.py's Outbox while no window is attached: a request opened reaches nobody."""

    def renderers(self) -> list[bytes]:
        return []

    def send(self, routing_ids: Any, frames: list[bytes]) -> list[bytes]:
        return []


class QuietConsentPorts:
    """Consent's ports: its requests are `pending`; rule lists and notices go nowhere; no peer is known."""

    def __init__(self, pending: PendingRequests) -> None:
        self.pending = pending

    def publish_rules(self, rules: Any) -> None:
        pass

    def publish_notice(self, level: str, message: str, server: str | None) -> None:
        pass

    def peer(self, routing_id: bytes) -> Peer | None:
        return None


class ListedRows(DecidedRows):
    """Decided rows as (action, rule id, reason), in the order the gate hands answers on."""

    def __init__(self) -> None:
        super().__init__(None)
        self.recorded: list[tuple[str, str, str | None]] = []

    def record_by_rule(self, elicitation: Elicitation, answer: ElicitationResult, rule_id: str,
                       options: RequestOptions, then: Callable[[], None] = lambda: None, *,
                       reason: str | None = None) -> str:
        self.recorded.append((answer.action, rule_id, reason))
        then()
        return "c"


class AuditedPending(PendingRequests):
    """PendingRequests with no window whose decided rows are listed in `recorded`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(NoWindows(), loop)
        self.rows = ListedRows()
        self.decided = self.rows

    @property
    def recorded(self) -> list[tuple[str, str, str | None]]:
        return self.rows.recorded
