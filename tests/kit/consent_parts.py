"""What the consent layer is given in process, with nobody on the other side: an Outbox with no
window attached, and Consent's ports that publish to no one (test_policy_elicit.py; the `rules`
bench's consent-code-alone figure, scripts/benchlib/rules.py)."""

from typing import Any

from main_process.consent.pending import PendingRequests
from main_process.wire.peers import Peer


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
