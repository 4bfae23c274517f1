"""MainLink: one gateway peer's DEALER to main (role "host"; the HTTP gateway's directory is a
"controller"), written from shared/PROTOCOL.md.

A plain sync socket watched by the asyncio loop's reader on `zmq.FD`: receives drain in one
callback, sends never block. That descriptor is edge-triggered, so the link drains after every
send and on every liveness tick as well (a missed edge costs one tick, never a hang).

Liveness as the contract says: a heartbeat after 1 s of sending nothing; main silent for 3 s (it
sends a heartbeat every second) means main is gone: the link detaches, everything waiting on main
hears `lost()`, and the link attaches again by itself once a main answers (re-reading the
connection file: a restarted main has a new token). It never starts main; `attach` is awaited by
whoever wants one (see `MainAttachment.ready`).
"""

import asyncio
import logging
import time
from pathlib import Path
from typing import Protocol, cast

import zmq

from shared import PROTOCOL_VERSION, channels
from shared.codec import DEFAULT_MAX_BODY_BYTES, decode_from_main, encode, encode_request
from shared.connection_file import main_is_gone, pid_alive, read_connection_file, set_curve_client
from shared.errors import ConnectionFileError, MainUnreachableError, ProtocolError
from shared.messages import (
    Body,
    Bye,
    ChannelReply,
    ElicitationDismiss,
    ElicitationInvoke,
    ErrorNotice,
    Heartbeat,
    Hello,
    HostInfo,
    ListChanged,
    McpClose,
    McpRelay,
    Progress,
    Role,
    ServerInfo,
    ServersUpdate,
    Welcome,
)

logger = logging.getLogger(__name__)

HEARTBEAT_AFTER_S = 1.0
MAIN_SILENT_S = 3.0
ATTACH_TIMEOUT_S = 5.0
TICK_S = 0.5
_NOBLOCK = int(zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)


class ChannelListener(Protocol):
    """Whoever waits on one of this link's response channels."""

    def reply(self, answer: ChannelReply) -> None: ...

    def progress(self, update: Progress) -> None: ...

    def lost(self, why: str) -> None:
        """main went away (or dropped this peer): no reply will come."""


class LinkEvents(Protocol):
    """What main pushes that is not an answer to one of our requests."""

    def on_invoke(self, invoke: ElicitationInvoke) -> None: ...

    def on_dismiss(self, dismiss: ElicitationDismiss) -> None: ...

    def on_refused(self, notice: ErrorNotice) -> None:
        """main refused something we sent on a result channel (e.g. `invalid-content`)."""

    def on_list_changed(self, change: ListChanged) -> None: ...

    def on_attached(self, servers: list[ServerInfo], again: bool) -> None:
        """Welcomed; `again` after a detach (main may have restarted: every list may differ)."""

    def on_servers(self, servers: list[ServerInfo]) -> None: ...

    def on_relay(self, message: McpRelay) -> None:
        """A message of one of our relayed sessions (extension msgMcpRelay)."""

    def on_relay_closed(self, close: McpClose) -> None: ...

    def on_detached(self, why: str) -> None:
        """main went away (or dropped us); the link attaches again by itself."""


class _Reply:
    """A one-shot ChannelListener around a future (for `request`)."""

    def __init__(self, future: asyncio.Future[ChannelReply]) -> None:
        self._future = future

    def reply(self, answer: ChannelReply) -> None:
        if not self._future.done():
            self._future.set_result(answer)

    def progress(self, update: Progress) -> None:
        pass

    def lost(self, why: str) -> None:
        if not self._future.done():
            self._future.set_exception(MainUnreachableError(why))


class MainLink:
    def __init__(self, connection_path: Path, name: str, events: LinkEvents, *, role: Role = "host") -> None:
        self.connection_path = connection_path
        self.name = name
        self.role = role
        self.window = channels.new_uuid7()  # one per link: main sees the same host after a reattach
        self.servers: dict[str, ServerInfo] = {}
        self.max_message_bytes = DEFAULT_MAX_BODY_BYTES
        self._events = events
        self._sock: zmq.Socket[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._welcome: asyncio.Future[Welcome] | None = None
        self._attached = False
        self._ever_attached = False
        self._closed = False
        self._last_sent = 0.0
        self._last_heard = 0.0
        self._listeners: dict[str, ChannelListener] = {}
        self._host_info: HostInfo | None = None
        self._attaching: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._main_pid: int | None = None  # local mains only: a gone pid means main is gone
        self._drain_soon = False

    # ---- attaching ------------------------------------------------------------------------

    @property
    def attached(self) -> bool:
        return self._attached

    def check_main(self) -> None:
        """Detach at once if a local main's process is gone (a stopped main says no bye), instead
        of sending into the void until its silence shows."""
        if self._attached and self._main_pid is not None and not pid_alive(self._main_pid):
            self._detach(f"main (pid {self._main_pid}) has exited")

    async def attach(self) -> None:
        """Attach (once at a time); raises MainUnreachableError when no main answers."""
        if self._attached:
            return
        if self._attaching is None or self._attaching.done():
            self._attaching = asyncio.ensure_future(self._attach())
        await asyncio.shield(self._attaching)

    async def _attach(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        if self._ticker is None:
            self._ticker = asyncio.ensure_future(self._tick())
        try:
            info = read_connection_file(self.connection_path)
        except ConnectionFileError as exc:
            raise MainUnreachableError(str(exc)) from None
        if main_is_gone(info):
            raise MainUnreachableError(f"no main is running (pid {info.pid} in {self.connection_path} is gone)")
        self._main_pid = info.pid if info.endpoint.startswith("ipc://") else None
        self._close_socket()
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 10_000)
        sock.setsockopt(zmq.RCVHWM, 10_000)
        try:
            set_curve_client(sock, info, self.connection_path)  # a paired tcp file: CURVE
        except ConnectionFileError as exc:
            sock.close(linger=0)
            raise MainUnreachableError(str(exc)) from None
        sock.connect(info.endpoint)
        self._sock = sock
        loop.add_reader(_fd(sock), self._drain)
        self._welcome = loop.create_future()
        self._send(channels.HELLO, Hello(protocol=PROTOCOL_VERSION, token=info.token, window=self.window,
                                         name=self.name, role=self.role))
        try:
            welcome = await asyncio.wait_for(asyncio.shield(self._welcome), ATTACH_TIMEOUT_S)
        except TimeoutError:
            self._close_socket()
            raise MainUnreachableError(f"main did not answer within {ATTACH_TIMEOUT_S:.0f} s "
                                       f"({self.connection_path})") from None
        except MainUnreachableError:
            self._close_socket()
            raise
        self._attached = True
        self._last_heard = time.monotonic()
        again = self._ever_attached
        self._ever_attached = True
        self.max_message_bytes = welcome.max_message_bytes or DEFAULT_MAX_BODY_BYTES
        self.servers = {server.name: server for server in welcome.servers}
        if self._host_info is not None:
            self._send(channels.HOST_INFO, self._host_info)
        logger.info("attached to main %s as host %r", welcome.session, self.name)
        self._events.on_attached(welcome.servers, again)

    def set_host_info(self, info: HostInfo) -> None:
        """Tell main who the host is (again after every reattach)."""
        if info != self._host_info:
            self._host_info = info
            self.name = info.name
            if self._attached:
                self._send(channels.HOST_INFO, info)

    def close(self) -> None:
        """Say bye (main cancels what this host still has running) and stop."""
        self._closed = True
        if self._ticker is not None:
            self._ticker.cancel()
        if self._attached:
            self._send(channels.BYE, Bye())
        self._detach("the gateway closed")
        self._close_socket(linger_ms=200)

    # ---- sending ---------------------------------------------------------------------------

    def listen(self, channel: str, listener: ChannelListener) -> None:
        self._listeners[channel] = listener

    def forget(self, channel: str) -> None:
        self._listeners.pop(channel, None)

    def send(self, topic: str, body: Body) -> None:
        """Send a message main must act on; raises MainUnreachableError when not attached, and
        UndeliverableRequestError when the body is over main's limit."""
        if not self._attached:
            raise MainUnreachableError("not attached to main")
        frames = encode_request(topic, body, self.max_message_bytes)
        self._send_frames(frames)

    async def request(self, topic: str, body: Body, channel: str, timeout_s: float) -> ChannelReply:
        """Send a request answered on `channel`; raises MainUnreachableError (main gone or silent)."""
        future: asyncio.Future[ChannelReply] = asyncio.get_running_loop().create_future()
        self._listeners[channel] = _Reply(future)
        try:
            self.send(topic, body)
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise MainUnreachableError(f"main gave no answer within {timeout_s:.0f} s") from None
        finally:
            self._listeners.pop(channel, None)

    def _send(self, topic: str, body: Body) -> None:
        self._send_frames(encode(topic, body))

    def _send_frames(self, frames: list[bytes]) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            sock.send_multipart(frames, _NOBLOCK)
        except zmq.Again:
            logger.warning("dropped a %r to main: its queue is full", frames[0][:40])
            return
        self._last_sent = time.monotonic()
        if self._loop is not None and not self._drain_soon:
            self._drain_soon = True  # one look after a burst of sends, not one per send
            self._loop.call_soon(self._drain)  # a send can consume the FD's edge

    # ---- receiving -------------------------------------------------------------------------

    def _drain(self) -> None:
        self._drain_soon = False
        sock = self._sock
        while sock is not None and not sock.closed and cast(int, sock.getsockopt(_EVENTS)) & _POLLIN:
            try:
                frames = sock.recv_multipart(_NOBLOCK)
            except zmq.Again:
                break
            self._last_heard = time.monotonic()
            try:
                topic, body = decode_from_main(frames)
            except ProtocolError as exc:
                logger.warning("ignored a bad frame from main: %s", exc)
                continue
            self._handle(topic, body)
            sock = self._sock  # a handler may have closed it

    def _handle(self, topic: str, body: object) -> None:
        match body:
            case Heartbeat():
                pass
            case ChannelReply():
                listener = self._listeners.pop(topic, None)
                if listener is not None:
                    listener.reply(body)
            case Progress():
                listener = self._listeners.get(body.response_channel)
                if listener is not None:
                    listener.progress(body)
            case ElicitationInvoke():
                self._events.on_invoke(body)
            case ElicitationDismiss():
                self._events.on_dismiss(body)
            case ListChanged():
                self._events.on_list_changed(body)
            case ServersUpdate():
                self.servers = {server.name: server for server in body.servers}
                self._events.on_servers(body.servers)
            case Welcome():
                if self._welcome is not None and not self._welcome.done():
                    self._welcome.set_result(body)
            case McpRelay():
                self._events.on_relay(body)
            case McpClose():
                self._events.on_relay_closed(body)
            case ErrorNotice():
                self._on_error(body)
            case _:
                pass  # peers, notices: nothing a host needs

    def _on_error(self, notice: ErrorNotice) -> None:
        if notice.topic == channels.HELLO and self._welcome is not None and not self._welcome.done():
            self._welcome.set_exception(MainUnreachableError(f"main refused us: {notice.code}: {notice.message}"))
        elif notice.code == "not-attached":
            logger.warning("main no longer has us attached; attaching again")
            self._detach("main detached this gateway")
        elif notice.topic is not None and channels.is_result_channel(notice.topic):
            self._events.on_refused(notice)
        else:
            logger.warning("main refused %s: %s: %s", notice.topic or "a message", notice.code, notice.message)

    # ---- liveness ------------------------------------------------------------------------------

    async def _tick(self) -> None:
        while not self._closed:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            if self._attached:
                if now - self._last_heard > MAIN_SILENT_S:
                    logger.warning("main silent for %.1f s; attaching again", now - self._last_heard)
                    self._detach("main stopped answering")
                elif now - self._last_sent >= HEARTBEAT_AFTER_S:
                    self._send(channels.HEARTBEAT, Heartbeat())
                self._drain()
            elif self._ever_attached and (self._attaching is None or self._attaching.done()):
                self._attaching = asyncio.ensure_future(self._attach())
                self._attaching.add_done_callback(_quiet)

    def _detach(self, why: str) -> None:
        was = self._attached
        self._attached = False
        listeners, self._listeners = self._listeners, {}
        for listener in listeners.values():
            listener.lost(why)
        if was:
            logger.info("detached from main: %s", why)
            self._events.on_detached(why)

    def _close_socket(self, linger_ms: int = 0) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._loop is not None and not sock.closed:
            self._loop.remove_reader(_fd(sock))
        sock.close(linger=linger_ms)


def _fd(sock: zmq.Socket[bytes]) -> int:
    return cast(int, sock.getsockopt(zmq.FD))


def _quiet(task: "asyncio.Task[None]") -> None:
    """A background reattach that found no main: try again on the next tick."""
    if not task.cancelled() and task.exception() is not None:
        logger.debug("no main to attach to yet: %s", task.exception())
