"""RelayedSession: one relayed MCP session (RelayPump) over one host peer's link to main.

The adapter both gateways share (`relay_stdio.py` for `serve`, `http_relay.py` for `/mcp/<server>`
and `/mcp`): one server's session, or every server's at once (`server` EVERY_SERVER: main merges
them, `<server>__<name>`). The link's events drive the pump; what the pump has for main goes out as
`msgMcpRelay`; the first message that finds main unreachable attaches (starting main when the
attachment may). No SDK here.
"""

import asyncio
import logging
from collections.abc import Callable

from gateway_process.attachment import Attachment
from shared import channels
from shared.errors import ConfigError, MainUnreachableError, UndeliverableRequestError
from shared.messages import MainBody, McpClose, McpRelay, Welcome
from shared.relay_pump import RelayPump, Undeliverable

logger = logging.getLogger(__name__)


class RelayedSession:
    """One relayed session over one host peer's link: the link's events drive the pump, and the
    pump's messages for main go out on the link. `to_host` gets each message for the host."""

    def __init__(self, attachment: Attachment, server: str, to_host: Callable[[bytes], None]) -> None:
        self.attachment = attachment
        self.link = attachment.link
        self.pump = RelayPump(server=server, session="relay-" + channels.new_uuid7(), to_main=self._to_main,
                              to_host=to_host)
        self._connecting: asyncio.Task[None] | None = None
        attachment.adopt(self)

    def from_host(self, raw: bytes, headers: dict[str, str] | None = None) -> None:
        self.pump.from_host(raw, headers)
        if not self.pump.online:
            self.connect()

    def connect(self) -> None:
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        try:
            await self.attachment.ready()
        except (MainUnreachableError, ConfigError) as exc:
            logger.warning("main is not reachable: %s", exc)
            self.pump.unreachable(f"Elicitron's main is not reachable: {exc}")
            return
        if not self.pump.online:
            self.pump.attached()

    def _to_main(self, raw: bytes, headers: dict[str, str] | None) -> str | None:
        try:
            self.link.send(channels.MCP_RELAY, McpRelay(session=self.pump.session, message=raw,
                                                         server=self.pump.server, headers=headers))
        except MainUnreachableError as exc:
            return f"Elicitron's main went away: {exc}"
        except UndeliverableRequestError as exc:
            return Undeliverable(f"Elicitron cannot pass this message on: {exc}")
        return None

    def close(self) -> None:
        if self.link.attached:
            try:
                self.link.send(channels.MCP_CLOSE, McpClose(session=self.pump.session))
            except MainUnreachableError:
                pass
        self.attachment.close()

    # ---- LinkEvents ------------------------------------------------------------------------

    def on_pushed(self, body: MainBody) -> None:
        """Our session's messages and its end; a welcome brings the pump back online. Nothing else
        main pushes concerns a relayed session (the server, or main's merger, tells its host of
        list changes)."""
        if isinstance(body, McpRelay):  # first: every relayed message
            if body.session == self.pump.session:
                self.pump.from_main(body.message)
        elif isinstance(body, McpClose):
            if body.session == self.pump.session:
                logger.warning("the session with %s ended: %s", self.pump.server, body.reason)
                self.pump.lost(body.reason or "the server's session ended")
        elif isinstance(body, Welcome) and not self.pump.online:
            self.pump.attached()

    def on_detached(self, why: str) -> None:
        self.pump.detached(f"Elicitron's main went away ({why})")
