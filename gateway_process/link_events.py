"""LinkEvents: what a gateway hears from main through its MainLink (no socket here: the link,
gateway_process/link.py, reads the wire).

Two events. `on_pushed(body)`: whatever main sent that answers none of our requests, as its own
typed body: the `welcome` of every (re)attach, each `msgMcpRelay` and `msgMcpClose` of our
sessions, `servers`, `msgListChanged` (and `peers`, `notice`: nothing a host needs). Each receiver
matches what concerns it. `on_detached(why)`: the one event main cannot send, since main may be
gone: the link lost it (silence, its `bye`, its pid gone, `not-attached`) or closed; a link that
was not closed attaches again by itself, and its next `welcome` comes through `on_pushed`.
"""

from typing import Protocol

from shared import messages


class LinkEvents(Protocol):
    def on_pushed(self, body: messages.MainBody) -> None: ...

    def on_detached(self, why: str) -> None: ...
