"""MainLink: one gateway peer's DEALER to main (role "host"; the HTTP gateway's directory is a
"controller"), written from shared/PROTOCOL.md.

The contract's side (hello, heartbeats, main gone after its silence, reattach, replies by channel)
is shared/peer.py's core on the asyncio adapter of shared/peer_asyncio.py. A link that was
attached and lost main (silence, its `bye`, its pid gone, `not-attached`) tells everything waiting
on main `lost()` and attaches again by itself once a main answers (re-reading the connection
file: a restarted main has a new token). It never starts main; `attach` is awaited by whoever
wants one (see `MainAttachment.ready`).
"""

import logging
from pathlib import Path

from gateway_process.link_events import LinkEvents
from shared import channels, messages
from shared.codec import encode_request
from shared.errors import MainUnreachableError
from shared.peer import HOST_MAIN_SILENT_S, Effect, Lost, PeerCore, Pushed, Refused, Timing, Waiter, Welcomed
from shared.peer_asyncio import AsyncPeer

logger = logging.getLogger(__name__)

ChannelListener = Waiter  # whoever waits on one of this link's response channels


class MainLink:
    def __init__(self, connection_path: Path, name: str, events: LinkEvents, *,
                 role: messages.Role = "host") -> None:
        self.connection_path = connection_path
        self.role = role
        self.window = channels.new_uuid7()  # one per link: main sees the same host after a reattach
        self.servers: dict[str, messages.ServerInfo] = {}
        self._events = events
        self._core = PeerCore(role=role, name=name, window=self.window, timing=Timing(main_silent=HOST_MAIN_SILENT_S))
        self._peer = AsyncPeer(connection_path, self._core, self._on_effect)

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def attached(self) -> bool:
        return self._core.attached

    @property
    def max_message_bytes(self) -> int:
        return self._core.max_message_bytes

    def check_main(self) -> None:
        """Detach at once if a local main's process is gone (a stopped main says no bye), instead
        of sending into the void until its silence shows."""
        self._peer.check_main()

    async def main_ended(self, within_s: float) -> None:
        """`check_main` once a local main's process has ended (at most `within_s` from now)."""
        await self._peer.main_ended(within_s)

    async def attach(self) -> None:
        """Attach (once at a time); raises MainUnreachableError when no main answers."""
        await self._peer.attach()

    def close(self) -> None:
        """Say bye (main cancels what this host still has running) and stop."""
        was = self.attached
        self._peer.close()
        if was:
            self._events.on_detached("the gateway closed")

    # ---- sending ---------------------------------------------------------------------------

    def listen(self, channel: str, listener: ChannelListener) -> None:
        self._core.expect(channel, listener)

    def forget(self, channel: str) -> None:
        self._core.forget(channel)

    def send(self, topic: str, body: messages.Body) -> None:
        """Send a message main must act on; raises MainUnreachableError when not attached, and
        UndeliverableRequestError when the body is over main's limit."""
        self._peer.send_frames(self._frames(topic, body))

    async def request(self, topic: str, body: messages.Body, channel: str,
                      timeout_s: float) -> messages.ChannelReply:
        """Send a request answered on `channel`; raises MainUnreachableError (main gone or silent)."""
        return await self._peer.request(self._frames(topic, body), channel, timeout_s)

    def _frames(self, topic: str, body: messages.Body) -> list[bytes]:
        core = self._core  # (every relayed message: the core's own attributes, not our properties)
        if not core.attached:
            raise MainUnreachableError("not attached to main")
        return encode_request(topic, body, core.max_message_bytes)

    # ---- what main said ----------------------------------------------------------------------

    def _on_effect(self, effect: Effect) -> None:
        match effect:
            case Pushed(_, body):  # first: every relayed message comes this way
                if isinstance(body, messages.ServersUpdate):
                    self.servers = _by_name(body.servers)
                self._events.on_pushed(body)
            case Welcomed(welcome, _):
                self.servers = _by_name(welcome.servers)
                logger.info("attached to main %s as %s %r", welcome.session, self.role, self.name)
                self._events.on_pushed(welcome)
            case Lost(why):
                logger.warning("detached from main: %s; attaching again", why)
                self._events.on_detached(why)
            case Refused(notice):
                logger.warning("main refused %s: %s: %s", notice.topic or "a message", notice.code, notice.message)
            case _:
                pass  # a background reattach that found no main yet: the next tick tries again


def _by_name(servers: list[messages.ServerInfo]) -> dict[str, messages.ServerInfo]:
    return {server.name: server for server in servers}
