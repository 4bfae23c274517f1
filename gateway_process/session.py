"""HostSession: one MCP host as one peer of main, and its tool calls in flight (HostCall).

A session owns the host's `MainLink` through a `MainAttachment` (attached lazily: `ready()` attaches,
starting main first when none runs and the gateway may; serve's handshake may have attached it
already), what the host told us about itself (`msgHostInfo`: its clientInfo
name and the elicitation modes it declared), and where its list-changed notifications go (the
legacy connection's standalone channel, the 2026-07-28 `subscriptions/listen` streams).

A HostCall is one `tools/call` through main: main's answers for its response channel, its progress,
and the requests it caused (invokes whose `call` is its channel, and their dismissals) arrive as
events, in order, for whichever handler drives the call (`forward.py`). A call suspended across a
2026-07-28 `InputRequiredResult` round waits here under its `requestState` token.
"""

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway_process.attachment import MainAttachment
from gateway_process.names import Exposure
from shared import channels
from shared.errors import MainUnreachableError
from shared.messages import (
    CallTool,
    CancelCall,
    ChannelReply,
    ElicitationDismiss,
    ElicitationInvoke,
    ElicitationResult,
    ErrorNotice,
    HostInfo,
    ListChanged,
    ListName,
    McpClose,
    McpRelay,
    Progress,
    ServerInfo,
)

logger = logging.getLogger(__name__)

SUSPEND_S = 15 * 60.0  # a 2026-07-28 host that never retries after an InputRequiredResult: give up then
_MAX_ANSWERED = 1000  # result channels remembered, to cancel one whose content main refused
_EVENTS: dict[ListName, ServerEvent] = {
    "tools": ToolsListChanged(), "resources": ResourcesListChanged(), "prompts": PromptsListChanged(),
}


@dataclass(frozen=True)
class Lost:
    """main went away during the call (or dropped this gateway): no answer will come."""

    why: str


CallEvent = ChannelReply | Progress | ElicitationInvoke | ElicitationDismiss | Lost


@dataclass(eq=False)
class HostCall:
    """One tools/call through main; also the listener of its response channel."""

    session: "HostSession"
    channel: str
    server: str
    tool: str
    events: deque[CallEvent] = field(default_factory=deque)
    outstanding: dict[str, ElicitationInvoke] = field(default_factory=dict)  # invokes the host has now
    finished: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _expiry: asyncio.TimerHandle | None = None

    async def next_event(self) -> CallEvent:
        while not self.events:
            self._wake.clear()
            await self._wake.wait()
        return self.events.popleft()

    def push(self, event: CallEvent) -> None:
        self.events.append(event)
        self._wake.set()

    # ChannelListener
    def reply(self, answer: ChannelReply) -> None:
        self.finished = True
        self.session.end_call(self)
        self.push(answer)

    def progress(self, update: Progress) -> None:
        self.push(update)

    def lost(self, why: str) -> None:
        self.finished = True
        self.session.end_call(self)
        self.push(Lost(why))

    def cancel(self) -> None:
        """Cancel at the server (the host cancelled, or went away mid-round)."""
        if not self.finished:
            self.finished = True
            self.session.end_call(self)
            try:
                self.session.link.send(channels.CANCEL_CALL, CancelCall(response_channel=self.channel))
            except MainUnreachableError:
                pass  # main is gone: the call went with it


class HostSession:
    """One host, one peer of main. `start_main_if_needed`: start main when none runs (stdio gateways)."""

    def __init__(self, connection: Path, exposure: Exposure, *, config: Path | None = None,
                 start_main_if_needed: bool = True, on_instructions: Callable[[], None] = lambda: None,
                 name: str = "elicitron serve", attachment: MainAttachment | None = None) -> None:
        self.exposure = exposure
        self.connection = connection
        # `attachment`: one made (and maybe attached) before this session, e.g. by serve's handshake
        self.attachment = attachment or MainAttachment(connection, name, config=config,
                                                       start_main_if_needed=start_main_if_needed)
        self.attachment.adopt(self)
        self.link = self.attachment.link
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)  # 2026-07-28 hosts' list-changed streams
        self.on_instructions = on_instructions
        self._legacy: ServerSession | None = None  # a handshake-era host's session, for notifications
        self._host_key: tuple[Any, ...] | None = None
        self._calls: dict[str, HostCall] = {}
        self._suspended: dict[str, HostCall] = {}
        self._answered: dict[str, None] = {}  # result channels we answered (ordered, bounded)
        self._tasks: set[asyncio.Task[None]] = set()
        self.resource_owners: dict[str, str] = {}  # uri -> server, from the last listings
        self.resource_templates: list[tuple[UriTemplate, str]] = []

    # ---- attaching -------------------------------------------------------------------------

    async def ready(self) -> None:
        """Attached to main; starts main first when none runs (and this gateway may)."""
        await self.attachment.ready()

    @property
    def busy(self) -> bool:
        """Calls in flight or waiting for the host's next round."""
        return bool(self._calls or self._suspended)

    async def settle(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) while some server is still starting, so what the host gets at
        its handshake (the servers' instructions) is complete."""
        await self.attachment.settle(timeout_s)

    def close(self) -> None:
        for call in self._suspended.values():
            if call._expiry is not None:
                call._expiry.cancel()
        self.link.close()

    # ---- who the host is ---------------------------------------------------------------------

    def note_client(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Tell main the host's name and elicitation modes once they are known or change; keep a
        handshake-era session for list-changed notifications."""
        session = ctx.session
        params = session.client_params
        capabilities = session.client_capabilities
        if params is None and capabilities is None:
            return  # `initialize` itself: nothing committed yet
        if session.protocol_version not in MODERN_PROTOCOL_VERSIONS and ctx.method != "initialize":
            self._legacy = session
        info = params.client_info if params is not None else None
        elicitation = capabilities.elicitation if capabilities is not None else None
        key = (info.name if info else None, info.title if info else None, info.version if info else None,
               elicitation is not None and (elicitation.form is not None or elicitation.url is None),
               elicitation is not None and elicitation.url is not None)
        if key == self._host_key:
            return
        self._host_key = key
        name = (info.title or info.name) if info is not None else "MCP host"
        self.link.set_host_info(HostInfo(name=name[:200], version=(info.version or None) if info else None,
                                          form_elicitation=key[3], url_elicitation=key[4]))

    # ---- calls -------------------------------------------------------------------------------

    def start_call(self, server: str, tool: str, arguments: dict[str, Any], progress: bool) -> HostCall:
        """Send one msgMcpCallTool; raises MainUnreachableError / UndeliverableRequestError."""
        channel = "call-" + channels.new_uuid7()
        call = HostCall(self, channel, server, tool)
        self.link.listen(channel, call)
        self._calls[channel] = call
        try:
            self.link.send(channels.CALL_TOOL, CallTool(server=server, tool=tool, arguments=arguments,
                                                        response_channel=channel, progress=progress))
        except BaseException:
            self.end_call(call)
            raise
        return call

    def end_call(self, call: HostCall) -> None:
        self._calls.pop(call.channel, None)
        self.link.forget(call.channel)

    def suspend(self, call: HostCall) -> str:
        """Keep a call across a 2026-07-28 input round; the token is its `requestState`."""
        token = channels.new_uuid7()
        self._suspended[token] = call
        call._expiry = asyncio.get_running_loop().call_later(SUSPEND_S, self._expire, token)
        return token

    def resume(self, token: str) -> HostCall | None:
        call = self._suspended.pop(token, None)
        if call is not None and call._expiry is not None:
            call._expiry.cancel()
        return call

    def _expire(self, token: str) -> None:
        call = self._suspended.pop(token, None)
        if call is not None:
            logger.info("the host never came back for %s/%s; cancelling it", call.server, call.tool)
            call.cancel()

    def answer(self, channel: str, result: ElicitationResult) -> None:
        """The host's answer to a request main sent it."""
        self._answered[channel] = None
        if len(self._answered) > _MAX_ANSWERED:
            self._answered.pop(next(iter(self._answered)))
        try:
            self.link.send(channel, result)
        except MainUnreachableError:
            logger.info("main is gone; the host's answer on %s is lost", channel)

    # ---- LinkEvents -------------------------------------------------------------------------

    def on_invoke(self, invoke: ElicitationInvoke) -> None:
        call = self._calls.get(invoke.call or "")
        if call is None:
            # Its call has ended (the request is being withdrawn), or it is not ours to answer alone.
            logger.info("request %s names no call in flight here; leaving it", invoke.response_channel)
            return
        call.push(invoke)

    def on_dismiss(self, dismiss: ElicitationDismiss) -> None:
        channel = dismiss.response_channel
        for call in [*self._calls.values(), *self._suspended.values()]:
            queued = any(isinstance(e, ElicitationInvoke) and e.response_channel == channel for e in call.events)
            if call.outstanding.pop(channel, None) is not None or queued:
                call.push(dismiss)  # a legacy host's request for it is cancelled; a queued one is skipped
                return

    def on_refused(self, notice: ErrorNotice) -> None:
        channel = notice.topic or ""
        if notice.code == "invalid-content" and channel in self._answered:
            # The host's form let through what the schema forbids; the request would wait for an
            # answer that is not coming. Once only: a refused cancel would not be refused again.
            del self._answered[channel]
            logger.warning("main refused the host's answer on %s (%s); answering cancel", channel, notice.message)
            try:
                self.link.send(channel, ElicitationResult(action="cancel"))
            except MainUnreachableError:
                pass

    def on_list_changed(self, change: ListChanged) -> None:
        if self.exposure.only is None or change.server == self.exposure.only:
            self._notify_lists(change.lists)

    def on_attached(self, servers: list[ServerInfo], again: bool) -> None:
        self.on_instructions()
        if again:  # a restarted main: anything may have changed
            self._notify_lists(["tools", "resources", "prompts"])

    def on_servers(self, servers: list[ServerInfo]) -> None:
        self.on_instructions()

    def on_relay(self, message: McpRelay) -> None:
        pass  # this session serves through main's peer messages, not relayed sessions

    def on_relay_closed(self, close: McpClose) -> None:
        pass

    def on_detached(self, why: str) -> None:
        pass  # each call in flight hears it on its own channel (`lost`)

    # ---- list-changed to the host ----------------------------------------------------------------

    def _notify_lists(self, lists: list[ListName]) -> None:
        if lists and ("resources" in lists):
            self.resource_owners.clear()
            self.resource_templates.clear()
        task = asyncio.ensure_future(self._send_list_changes(lists))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_list_changes(self, lists: list[ListName]) -> None:
        for name in lists:
            await self.bus.publish(_EVENTS[name])
        legacy = self._legacy
        if legacy is None:
            return
        senders = {"tools": legacy.send_tool_list_changed, "resources": legacy.send_resource_list_changed,
                   "prompts": legacy.send_prompt_list_changed}
        for name in lists:
            try:
                await senders[name]()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the host is gone

    # ---- resources: who serves a URI ----------------------------------------------------------------

    def note_resources(self, server: str, items: list[dict[str, Any]], templates: bool) -> None:
        for item in items:
            if templates:
                try:
                    self.resource_templates.append((UriTemplate.parse(str(item.get("uriTemplate", ""))), server))
                except InvalidUriTemplate:
                    continue
            elif isinstance(item.get("uri"), str):
                self.resource_owners.setdefault(item["uri"], server)

    def owner_of(self, uri: str) -> str | None:
        if self.exposure.only is not None:
            return self.exposure.only
        owner = self.resource_owners.get(uri)
        if owner is not None:
            return owner
        return next((server for template, server in self.resource_templates if template.match(uri) is not None), None)


