"""MainAttachment: a gateway's MainLink, attached on demand.

`ready()` attaches, starting main first (`launch --no-window`) when none runs and the gateway may.
No `mcp` here: `elicitron serve` attaches before
it reads the host's first message, and the host's relayed session (`RelayedSession`: one
server, or every server merged in main) receives the link's events from then on (`adopt`).
"""

import asyncio
from pathlib import Path
from typing import Protocol

from gateway_process.link import MainLink
from gateway_process.link_events import LinkEvents
from gateway_process.starter import start_main
from shared.errors import MainUnreachableError
from shared.messages import MainBody


class Attachment(Protocol):
    """What a relayed session needs of its link to main: its own (`MainAttachment`), or a share of
    one several HTTP sessions use (`http_peers.PeerPool`)."""

    link: MainLink

    def adopt(self, events: LinkEvents) -> None: ...

    async def ready(self) -> None: ...

    def close(self) -> None:
        """This session is done with the link."""


class MainAttachment:
    """Also the link's LinkEvents: every event goes on to the adopted receiver (none before a host
    session exists: nothing else can concern a host that has not sent a request yet)."""

    def __init__(self, connection: Path, name: str, *, config: Path | None = None,
                 start_main_if_needed: bool = True) -> None:
        self.connection = connection
        self.link = MainLink(connection, name, self)
        self._events: LinkEvents | None = None
        self._config = config
        self._start_main = start_main_if_needed
        self._ready_lock = asyncio.Lock()

    def adopt(self, events: LinkEvents) -> None:
        """From now on main's pushes go to `events`."""
        self._events = events

    async def ready(self) -> None:
        """Attached to main; starts main first when none runs (and this gateway may)."""
        self.link.check_main()
        if self.link.attached:
            return
        async with self._ready_lock:
            if self.link.attached:
                return
            try:
                await self.link.attach()
                return
            except MainUnreachableError:
                if not self._start_main:
                    raise
            await asyncio.to_thread(start_main, self.connection, self._config)
            await self.link.attach()

    def close(self) -> None:
        self.link.close()

    # ---- LinkEvents, passed on -----------------------------------------------------------------

    def on_pushed(self, body: MainBody) -> None:
        if self._events is not None:
            self._events.on_pushed(body)

    def on_detached(self, why: str) -> None:
        if self._events is not None:
            self._events.on_detached(why)
