"""One supervised `mcp.Client` per configured server (step 1-2 and 9 of the round trip).

Each server lives in its own task: connect, list tools, then watch the connection; a lost
connection is restarted with backoff up to a limit within a stable-start window. Whenever the
server's tools, resources or prompts may have changed (it said so, its listing changed, it became
ready or stopped), host peers hear of it (`publish_list_changed`).

`ManagedServer` is the face the rest of main uses; its parts live beside it: server_calls.py (tool
calls and read-only requests, tied to their connection), server_era.py (which protocol era it is
spoken to in, `protocolMode: "auto"`), server_elicitation.py (its session's elicitations once the
gate let them through, and their screening), server_faults.py (error replies, one-line errors).
"""

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Protocol, TextIO

import anyio
from mcp import Client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged
from mcp_types import (
    ElicitCompleteNotification,
    Implementation,
    PromptListChangedNotification,
    ResourceListChangedNotification,
    Tool,
    ToolListChangedNotification,
)
from pydantic import ValidationError

from main_process.clock import MONOTONIC, Clock, wait_event
from main_process.config import HttpServerConfig, ServerConfig, StdioServerConfig
from main_process.elicitation_gate import ElicitationGate
from main_process.oauth.sign_in import SignIn
from main_process.oauth.token_store import shared_store
from main_process.peer_calls import Cancel
from main_process.pending import Elicitation, PendingRequests, RequestOptions, Unanswered
from main_process.private_files import open_private, safe_filename
from main_process.server_calls import ServerCalls
from main_process.server_elicitation import ServerElicitation
from main_process.server_era import READY_TIMEOUT_S, ProtocolEra
from main_process.server_faults import describe, leaf
from main_process.stdio_transport import capped_stdio_client
from main_process.topic_routes import ProgressTo, ReplyTo
from main_process.upstream import spawn_error
from shared.elicit_params import ElicitParams
from shared.errors import OversizedLineError
from shared.messages import (
    CallError,
    ElicitationResult,
    ListName,
    McpMethod,
    ServerInfo,
    ServerStatus,
)

logger = logging.getLogger(__name__)

WATCH_INTERVAL_S = 2.0
WATCH_TIMEOUT_S = 10.0
RESTART_LIMIT = 5
STABLE_START_S = 10.0  # a connection that lived this long resets the restart count


def restart_backoff_s(failures: int) -> float:
    """The pause before the next start after `failures` failed starts in a row: 0.5 s, doubling, at most 8 s."""
    return min(0.5 * 2.0 ** (failures - 1), 8.0)
STDERR_TAIL_LINES = 20

ALL_LISTS: list[ListName] = ["tools", "resources", "prompts"]
_LIST_NOTIFICATIONS: dict[type, ListName] = {  # handshake era: notifications
    ToolListChangedNotification: "tools", ResourceListChangedNotification: "resources",
    PromptListChangedNotification: "prompts",
}
_LIST_EVENTS: dict[type, ListName] = {  # 2026-07-28: events on a subscriptions/listen stream
    ToolsListChanged: "tools", ResourcesListChanged: "resources", PromptsListChanged: "prompts",
}

class ServerPorts(Protocol):
    """The ports a server is made with (the broker's ServerSide): the elicitation path and ways to
    tell the windows. ("Host" in main means an MCP host, the program that runs an agent.)"""

    @property
    def gate(self) -> ElicitationGate: ...  # what becomes of a request before it opens

    async def elicit(self, elicitation: Elicitation, options: RequestOptions,
                     cancel_reason: Callable[[], Unanswered] = ...) -> ElicitationResult: ...

    def withdraw_server(self, server: str) -> None: ...

    def publish_servers(self) -> None: ...

    def publish_list_changed(self, server: str, lists: list[ListName]) -> None: ...

    def publish_complete(self, server: str, elicitation_id: str) -> None: ...

    def publish_notice(self, level: str, message: str, server: str | None) -> None: ...

    @property
    def pending(self) -> PendingRequests: ...  # sign-in cards open through it


class ManagedServer:
    def __init__(self, config: ServerConfig, ports: ServerPorts, log_dir: Path, clock: Clock = MONOTONIC) -> None:
        self.config = config
        self.clock = clock  # restart backoff and the stable-start window run on it
        self.name = config.name
        self.status: ServerStatus = "stopped"
        self.tools: list[str] = []
        self.listed: dict[str, Tool] = {}  # the last tools/list, by name (annotations for tool approval)
        self.error: str | None = None
        self.instructions: str | None = None  # from the server's handshake
        self.decline_all = False  # the user chose "Decline all from this server" for this session
        self.ports = ports
        self.completions: dict[str, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None
        self.connection_lost = False
        self._stderr_path = log_dir / f"server-{safe_filename(config.name)}.stderr.log"
        self.client: Client | None = None
        self.call_group: anyio.abc.TaskGroup | None = None
        self.connection_calls: set[asyncio.Task[None]] | None = None  # the calls on the current connection
        self.became_ready = asyncio.Event()
        self.stopping = asyncio.Event()
        self.inflight: list[tuple[str | None, str | None]] = []  # (origin, response channel) of each call
        self.tasks: set[asyncio.Task[None]] = set()  # calls that arrived while starting
        self.sign_in: SignIn | None = None  # OAuth for a `url` server (main_process/oauth)
        if isinstance(config, HttpServerConfig) and config.oauth.enabled:
            self.sign_in = SignIn(config, shared_store(), requests=lambda: ports.pending,
                                  on_needed=self._sign_in_needed,
                                  publish_complete=lambda eid: ports.publish_complete(self.name, eid))
        self._listing_digest = ""  # of the last tools listing, to notice a change
        self.era = ProtocolEra(self)  # which protocol era it is spoken to in (protocolMode)
        self.calls = ServerCalls(self)  # its tool calls and read-only requests
        self.elicitation = ServerElicitation(self)  # its session's elicitations, after the gate

    @property
    def stderr_log(self) -> Path:
        """Where the server's stderr goes (its relayed sessions' processes append to it too)."""
        return self._stderr_path

    def info(self) -> ServerInfo:
        return ServerInfo(name=self.name, status=self.status, tools=list(self.tools), error=self.error,
                          instructions=self.instructions)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def ready(self) -> bool:
        return self.became_ready.is_set()

    async def wait_ready(self, timeout_s: float) -> bool:
        """True once the server is ready (at once if it is); False after `timeout_s`."""
        if self.became_ready.is_set():
            return True
        try:
            await asyncio.wait_for(self.became_ready.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def start(self, sign_in: bool = True) -> None:
        if self.sign_in is not None and sign_in:
            self.sign_in.login()  # Start / Restart asks to sign in again, after a decline too
        if self.running:
            return
        self.stopping = asyncio.Event()
        self.error = None
        self._task = asyncio.create_task(self.run(), name=f"server {self.name}")
        self._set_status("starting", None)  # now, not once the task runs: a control reply says "starting"

    async def stop(self, timeout_s: float = 10.0) -> None:
        self.stopping.set()
        if self.call_group is not None:
            self.call_group.cancel_scope.cancel()
        task = self._task
        if task is None:
            return
        _, unfinished = await asyncio.wait([task], timeout=timeout_s)
        if unfinished:
            task.cancel()
            await asyncio.wait([task], timeout=5)

    async def restart(self) -> None:
        await self.stop()
        self.start()

    # ---- supervision -------------------------------------------------------------------

    async def run(self) -> None:
        failures = 0
        while not self.stopping.is_set():
            self._set_status("starting" if failures == 0 else "restarting", self.error)
            started = self.clock.now()
            error = "connection closed"
            if self.sign_in is not None:
                self.sign_in.failure = None
            try:
                await self._run_connection()
            # top-level handler of one connection's life: it becomes a status
            except Exception as exc:  # noqa: BLE001
                error = self._connection_error(exc)
            finally:
                self.client = None
                self.call_group = None
                self.connection_calls = None
                self.became_ready.clear()
                self.ports.withdraw_server(self.name)
            if self.stopping.is_set():
                break
            if self.era.switching_era:  # not a failure: the same server, spoken to in the handshake era
                self.era.switching_era = False
                failures = 0
                continue
            if self.sign_in is not None and self.sign_in.failure is not None:
                await self._wait_for_sign_in(self.sign_in)  # no restart loop re-asking the user
                failures = 0
                continue
            failures = 1 if self.clock.now() - started > STABLE_START_S else failures + 1
            tail = self._stderr_tail()
            self.error = f"{error}\n{tail}".strip() if tail else error
            logger.warning("server %s stopped (%s); failure %d of %d", self.name, error, failures, RESTART_LIMIT)
            if failures >= RESTART_LIMIT:
                self._set_status("failed", self.error)
                await self.stopping.wait()
                break
            self._set_status("restarting", self.error)
            await wait_event(self.clock, self.stopping, restart_backoff_s(failures))
        self._set_status("stopped", None)

    async def _run_connection(self) -> None:
        self.connection_lost = False
        mode = self.era.protocol_mode()
        era_switch = self.era.new_connection()
        async with AsyncExitStack() as stack:
            client = Client(
                await self._transport(stack),
                elicitation_callback=self.elicitation.on_elicit,
                message_handler=self._on_message,
                mode=mode,
                client_info=Implementation(name="elicitron", version="0.1.0"),
                cache=None,  # tool listings double as a liveness probe, so never serve them from cache
            )
            try:
                await stack.enter_async_context(client)
            except Exception as exc:
                self.era.handshake_failed(mode, exc)
                raise
            if not await self.era.modern_era_sound(client):
                return  # a verdict: run() reconnects in the handshake era
            try:
                with anyio.fail_after(READY_TIMEOUT_S):
                    listing = await client.list_tools()
            except Exception as exc:
                if self.era.fall_back(client, exc, "tools/list"):
                    return
                raise
            async with anyio.create_task_group() as group:
                calls: set[asyncio.Task[None]] = set()
                self.client, self.call_group, self.connection_calls = client, group, calls
                self.tools = [tool.name for tool in listing.tools]
                self.listed = {tool.name: tool for tool in listing.tools}
                self._listing_digest = listing.model_dump_json()
                self.instructions = client.instructions
                # Logged before anyone is told: a reader of the log who saw `ready` finds the line.
                logger.info("server %s ready (protocol %s, %d tools)", self.name, client.protocol_version,
                            len(self.tools))
                self._set_status("ready", None)
                self.became_ready.set()
                group.start_soon(self._watch, client, group)
                group.start_soon(self._end_calls_with_connection, calls)
                group.start_soon(self._listen_for_list_changes, client)
                group.start_soon(self.era.replace_when_asked, era_switch, calls, group)

    # ---- the protocol era (protocolMode "auto") ------------------------------------------


    async def _wait_for_sign_in(self, sign_in: SignIn) -> None:
        """Status needs-sign-in until someone asks to sign in (a call, `auth login`) or stop."""
        self._set_status("needs-sign-in", sign_in.failure)
        sign_in.login_requested.clear()
        waits = [asyncio.ensure_future(sign_in.login_requested.wait()), asyncio.ensure_future(self.stopping.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def _sign_in_needed(self, needed: bool) -> None:
        if needed:
            self._set_status("needs-sign-in", None)
        elif self.status == "needs-sign-in":
            self._set_status("ready" if self.became_ready.is_set() else "starting", None)

    async def _end_calls_with_connection(self, calls: set[asyncio.Task[None]]) -> None:
        """When the connection ends, so do its calls (each then replies with an error)."""
        try:
            await anyio.sleep_forever()
        finally:
            for task in calls:
                task.cancel()
            if calls:
                with anyio.CancelScope(shield=True):
                    await asyncio.wait(set(calls))

    async def _listen_for_list_changes(self, client: Client) -> None:
        """2026-07-28 servers announce list changes only on a `subscriptions/listen` stream; open one
        when the server offers any (handshake-era servers send notifications, see `_on_message`)."""
        capabilities = client.server_capabilities
        tools = bool(capabilities.tools and capabilities.tools.list_changed)
        prompts = bool(capabilities.prompts and capabilities.prompts.list_changed)
        resources = bool(capabilities.resources and capabilities.resources.list_changed)
        if not (tools or prompts or resources):
            return
        try:
            async with client.listen(tools_list_changed=tools, prompts_list_changed=prompts,
                                     resources_list_changed=resources) as subscription:
                async for event in subscription:
                    changed = _LIST_EVENTS.get(type(event))
                    if changed is not None:
                        self._list_changed(changed)
        except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError, ValidationError) as exc:
            if self.era.fall_back(client, exc, "subscriptions/listen"):
                return
            # Not fatal: the tool listing is still polled by _watch.
            logger.info("server %s: no list-change stream (%s)", self.name, describe(exc))

    def _list_changed(self, changed: ListName) -> None:
        """The server says a list changed: tools are listed again first, so the `servers` push
        (the names callers check) is current before host peers hear of it."""
        client = self.client
        if changed != "tools" or client is None:
            self.ports.publish_list_changed(self.name, [changed])
            return
        task = asyncio.create_task(self._relist_tools(client))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _relist_tools(self, client: Client) -> None:
        try:
            async with asyncio.timeout(WATCH_TIMEOUT_S):
                listing = await client.list_tools()
        except (MCPError, TimeoutError, ValidationError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            if not self.era.fall_back(client, exc, "tools/list"):
                logger.info("server %s: listing its tools after a change failed: %s", self.name, describe(exc))
        else:
            self._listing_digest = listing.model_dump_json()
            names = [tool.name for tool in listing.tools]
            if names != self.tools:
                self.tools = names
                self.ports.publish_servers()
        self.ports.publish_list_changed(self.name, ["tools"])

    async def _watch(self, client: Client, group: anyio.abc.TaskGroup) -> None:
        """End the connection when stop is asked or the server stops answering."""
        while True:
            with anyio.move_on_after(WATCH_INTERVAL_S):
                await self.stopping.wait()
            if self.stopping.is_set():
                group.cancel_scope.cancel()
                return
            if self.sign_in is not None and self.sign_in.in_progress:
                continue  # a probe would wait behind the sign-in's lock, which is no sign of a dead server
            try:
                with anyio.fail_after(WATCH_TIMEOUT_S):
                    listing = await client.list_tools()
            except Exception as exc:
                if self.era.fall_back(client, exc, "tools/list"):
                    return  # the connection is being replaced
                self.connection_lost = True
                raise
            except BaseException:
                # Set before the task group cancels the calls, so their requests read server-closed.
                self.connection_lost = True
                raise
            names = [tool.name for tool in listing.tools]
            self.listed = {tool.name: tool for tool in listing.tools}
            if names != self.tools:
                self.tools = names
                self.ports.publish_servers()
            digest = listing.model_dump_json()
            if digest != self._listing_digest:  # a server that changes its tools without saying so
                self._listing_digest = digest
                self.ports.publish_list_changed(self.name, ["tools"])

    async def _transport(self, stack: AsyncExitStack) -> Any:
        config = self.config
        if isinstance(config, HttpServerConfig):
            auth = self.sign_in.provider if self.sign_in is not None else None
            if not config.headers and auth is None:
                return streamable_http_client(config.url)
            http = await stack.enter_async_context(create_mcp_http_client(headers=config.headers or None, auth=auth))
            return streamable_http_client(config.url, http_client=http)
        assert isinstance(config, StdioServerConfig)
        # The SDK hands stderr to the child as a file descriptor, so it must be a real file; 0600,
        # since a server's output may hold its secrets.
        errlog: TextIO = stack.enter_context(open_private(self._stderr_path))
        return capped_stdio_client(config, errlog)  # the SDK's stdio_client, with a line cap

    def _connection_error(self, exc: BaseException) -> str:
        """One line for a connection that ended with `exc`: a stdio command that would not start
        says which command, where it was looked for and what fixes it (as relayed sessions do)."""
        inner, config = leaf(exc), self.config
        if isinstance(inner, OversizedLineError):
            return str(inner)
        if (isinstance(config, StdioServerConfig) and isinstance(inner, FileNotFoundError | PermissionError)
                and self.status != "ready"):
            if config.cwd and not Path(config.cwd).is_dir():
                return (f"the cwd {config.cwd!r} of server {config.name!r} is not a directory; "
                        "fix \"cwd\" in the config")
            return spawn_error(config, inner, (get_default_environment() | config.env).get("PATH"))
        return describe(exc)

    def _stderr_tail(self) -> str:
        if isinstance(self.config, HttpServerConfig):
            return ""
        try:
            with open(self._stderr_path, encoding="utf-8", errors="replace") as f:
                return "".join(deque(f, STDERR_TAIL_LINES)).strip()
        except OSError:
            return ""

    def _set_status(self, status: ServerStatus, error: str | None) -> None:
        if (status, error) != (self.status, self.error):
            before = self.status
            self.status, self.error = status, error
            self.ports.publish_servers()
            # Ready again (after a start, restart or crash) or gone: what it offers may differ.
            if status != before and (status == "ready" or (before == "ready" and status != "restarting")
                                     or status in ("stopped", "failed")):
                self.ports.publish_list_changed(self.name, ALL_LISTS)

    # ---- elicitation (steps 2 and 9) ---------------------------------------------------


    async def _on_message(self, message: Any) -> None:
        """Server notifications: URL-mode completion closes the waiting state everywhere; a list
        change goes to the host peers."""
        root = getattr(message, "root", message)
        changed = _LIST_NOTIFICATIONS.get(type(root))
        if changed is not None:
            self._list_changed(changed)
            return
        if isinstance(root, ElicitCompleteNotification):
            elicitation_id = root.params.elicitation_id
            event = self.completions.get(elicitation_id)
            if event is not None:
                event.set()
            self.ports.publish_complete(self.name, elicitation_id)

    # ---- tool calls --------------------------------------------------------------------


    # ---- read-only MCP requests (extension msgMcpRequest) ---------------------------------

    # ---- the face others use: calls (server_calls.py), screening (server_elicitation.py) --------

    def call_tool(self, tool: str, arguments: dict[str, Any], origin: str | None,
                  reply: ReplyTo, *, call_id: str | None = None,
                  progress: ProgressTo | None = None) -> Cancel | None:
        """Start a call; `reply` gets its result or error exactly once. `call_id` (the caller's
        response channel) marks the requests it causes; `progress` gets the server's progress.
        Returns how to cancel the call at the server, or None when it already replied."""
        return self.calls.call_tool(tool, arguments, origin, reply, call_id=call_id, progress=progress)

    def mcp_request(self, method: McpMethod, params: dict[str, Any], reply: ReplyTo) -> None:
        """Forward one read-only request; `reply` gets the MCP result JSON or an error, once."""
        self.calls.mcp_request(method, params, reply)

    def screen_elicitation(self, params: ElicitParams) -> ElicitationResult | CallError | None:
        """What to answer a request at once, before anyone sees it (None: ask): see server_elicitation.py."""
        return self.elicitation.screen_elicitation(params)
