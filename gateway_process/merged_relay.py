"""MergedRelay: every configured server for one host (`elicitron serve`, `--mcp-http`'s `/mcp`).

A `MergedSession` (merge/) over one host peer's link to main: one `RelayedSession` per server,
all on that link (main sees one host, with one relayed session per server, each the host's own
connection to it). The link's events go to the session they name; main's `servers` pushes say
which servers there are (failed and stopped ones are left out), its `msgListChanged` which lists
the host should fetch again. The first message that finds main unreachable attaches (starting main
when the attachment may), as `RelayedSession` does. No SDK here.
"""

import asyncio
import logging
from collections.abc import Callable

from gateway_process.attachment import Attachment
from gateway_process.merge import MergedSession, Upstream
from gateway_process.relayed import RelayedSession
from shared.errors import ConfigError, MainUnreachableError
from shared.messages import ListChanged, MainBody, McpClose, McpRelay, ServersUpdate, Welcome

logger = logging.getLogger(__name__)

_EVERY_LIST = ("tools", "prompts", "resources")


class _ServerSession:
    """One server's relayed session, as the merger sees it."""

    def __init__(self, owner: "MergedRelay", relayed: RelayedSession) -> None:
        self._owner = owner
        self.relayed = relayed

    def from_host(self, raw: bytes, headers: dict[str, str] | None = None) -> None:
        self.relayed.from_host(raw, headers)

    def close(self) -> None:
        self._owner.sessions.pop(self.relayed.pump.session, None)
        self.relayed.close()


class MergedRelay:
    """The host's side: `from_host` each message of the host, `to_host` gets each for it."""

    def __init__(self, attachment: Attachment, to_host: Callable[[bytes], None]) -> None:
        self.attachment = attachment
        self.link = attachment.link
        self.sessions: dict[str, RelayedSession] = {}  # by relayed session name
        self.merged = MergedSession(to_host, self._open)
        self._connecting: asyncio.Task[None] | None = None
        self._detached = False  # the link lost main since its last welcome
        attachment.adopt(self)

    def _open(self, server: str) -> Upstream:
        relayed = RelayedSession(self.attachment, server, lambda raw: self.merged.from_server(server, raw),
                                 shared=True)
        self.sessions[relayed.pump.session] = relayed
        if self.link.attached:
            relayed.pump.attached()
        return _ServerSession(self, relayed)

    def from_host(self, raw: bytes, headers: dict[str, str] | None = None) -> None:
        self.link.check_main()  # a local main that exited: known now, not after its silence
        self.merged.from_host(raw, headers)
        if not self.merged.servers_known:
            self.connect()

    def connect(self) -> None:
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        try:
            await self.attachment.ready()
        except (MainUnreachableError, ConfigError) as exc:
            logger.warning("main is not reachable: %s", exc)
            self.merged.unreachable(f"Elicitron's main is not reachable: {exc}")
            return
        if not self.merged.servers_known:
            self.merged.set_servers(self.link.servers.values())

    def close(self) -> None:
        self.merged.close()
        self.attachment.close()

    # ---- LinkEvents ------------------------------------------------------------------------

    def on_pushed(self, body: MainBody) -> None:
        """Each session's messages to it; `servers`, `msgListChanged` and every welcome to the
        merger (a welcome after a detach: main may have restarted, so every list may differ)."""
        if isinstance(body, (McpRelay, McpClose)):  # first: every relayed message
            relayed = self.sessions.get(body.session)
            if relayed is not None:
                relayed.on_pushed(body)
        elif isinstance(body, ServersUpdate):
            self.merged.set_servers(body.servers)
        elif isinstance(body, ListChanged):
            self.merged.lists_changed(body.server, body.lists)
        elif isinstance(body, Welcome):
            for relayed in list(self.sessions.values()):
                relayed.on_pushed(body)
            self.merged.set_servers(body.servers)
            if self._detached:
                self._detached = False
                self.merged.lists_changed(None, _EVERY_LIST)

    def on_detached(self, why: str) -> None:
        self._detached = True
        for relayed in list(self.sessions.values()):
            relayed.on_detached(why)
        self.merged.offline()  # what the host sends next waits for main (started again if need be)
