"""LinkEvents: what a gateway hears from main through its MainLink, and `tell_pushed`, which hands
a gateway what main pushed (no socket here: the link, gateway_process/link.py, reads the wire)."""

from typing import Protocol

from shared import messages


class LinkEvents(Protocol):
    """What main pushes that is not an answer to one of our requests."""

    def on_invoke(self, invoke: messages.ElicitationInvoke) -> None: ...

    def on_dismiss(self, dismiss: messages.ElicitationDismiss) -> None: ...

    def on_refused(self, notice: messages.ErrorNotice) -> None:
        """main refused something we sent on a result channel (e.g. `invalid-content`)."""

    def on_list_changed(self, change: messages.ListChanged) -> None: ...

    def on_attached(self, servers: list[messages.ServerInfo], again: bool) -> None:
        """Welcomed; `again` after a detach (main may have restarted: every list may differ)."""

    def on_servers(self, servers: list[messages.ServerInfo]) -> None: ...

    def on_relay(self, message: messages.McpRelay) -> None:
        """A message of one of our relayed sessions (extension msgMcpRelay)."""

    def on_relay_closed(self, close: messages.McpClose) -> None: ...

    def on_detached(self, why: str) -> None:
        """main went away (or dropped us); the link attaches again by itself."""


def tell_pushed(events: LinkEvents, body: messages.MainBody) -> None:
    """Hand `events` what main pushed; peers and notices are nothing a host needs."""
    match body:
        case messages.McpRelay():  # first: every relayed message
            events.on_relay(body)
        case messages.ElicitationInvoke():
            events.on_invoke(body)
        case messages.ElicitationDismiss():
            events.on_dismiss(body)
        case messages.ListChanged():
            events.on_list_changed(body)
        case messages.ServersUpdate():
            events.on_servers(body.servers)
        case messages.McpClose():
            events.on_relay_closed(body)
