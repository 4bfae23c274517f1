"""One supervised `mcp.Client` per configured server (step 1-2 and 9 of the round trip).

Each server lives in its own task: connect, list tools, then watch the connection; a lost
connection is restarted with backoff up to a limit within a stable-start window. Tool calls are
tasks tied to their connection: when it ends, they end too, each with a clear error reply; the
caller may cancel one (the server then gets MCP's cancellation). Whenever the server's tools,
resources or prompts may have changed (it said so, its listing changed, it became ready or stopped),
host peers hear of it (`publish_list_changed`).

`protocolMode: "auto"` never fails what "legacy" would serve: a server that claims 2026-07-28 but
answers it outside that schema (its `server/discover`, checked strictly once per connection, or any
later result, e.g. a `tools/call` without `resultType`) is spoken to in the handshake era from then
on, until its config changes: the connection is replaced (its other calls finish first, for up to
ERA_DRAIN_S) and the request that showed the fault is sent once more on the new connection.
"""

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TextIO

import anyio
from mcp import Client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged
from mcp_types import (
    INVALID_PARAMS,
    URL_ELICITATION_REQUIRED,
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    Implementation,
    PromptListChangedNotification,
    ResourceListChangedNotification,
    Tool,
    ToolListChangedNotification,
)
from mcp_types import methods as mcp_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from main_process.broker import ProgressTo, ReplyTo
from main_process.clock import MONOTONIC, Clock, wait_event
from main_process.config import HttpServerConfig, ServerConfig, StdioServerConfig, differs_beyond_approval
from main_process.elicitation_gate import Answered, ElicitationGate, Refused
from main_process.oauth.sign_in import SignIn
from main_process.oauth.token_store import shared_store
from main_process.peer_calls import Cancel
from main_process.pending import Elicitation, PendingRequests, RequestOptions, Unanswered
from main_process.private_files import open_private, safe_filename
from main_process.stdio_transport import capped_stdio_client
from main_process.upstream import spawn_error
from shared.elicit_params import ElicitParams, FormParams
from shared.errors import OversizedLineError, RpcCode, UndeliverableRequestError, UnsupportedSchemaError
from shared.messages import (
    CallError,
    ChannelReply,
    ElicitationResult,
    ListName,
    McpMethod,
    ServerInfo,
    ServerStatus,
)
from shared.schema import CheckedSchemas

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 30.0  # a call to a starting server waits this long for it
WATCH_INTERVAL_S = 2.0
WATCH_TIMEOUT_S = 10.0
RESTART_LIMIT = 5
STABLE_START_S = 10.0  # a connection that lived this long resets the restart count


def restart_backoff_s(failures: int) -> float:
    """The pause before the next start after `failures` failed starts in a row: 0.5 s, doubling, at most 8 s."""
    return min(0.5 * 2.0 ** (failures - 1), 8.0)
STDERR_TAIL_LINES = 20
ERA_DRAIN_S = 10.0  # a connection replaced for its era lets its other calls finish this long

ALL_LISTS: list[ListName] = ["tools", "resources", "prompts"]
_LIST_NOTIFICATIONS: dict[type, ListName] = {  # handshake era: notifications
    ToolListChangedNotification: "tools", ResourceListChangedNotification: "resources",
    PromptListChangedNotification: "prompts",
}
_LIST_EVENTS: dict[type, ListName] = {  # 2026-07-28: events on a subscriptions/listen stream
    ToolsListChanged: "tools", ResourcesListChanged: "resources", PromptsListChanged: "prompts",
}

# The peer whose msgMcpCallTool is running in this task, and that call's response channel, for
# `origin` and `call` of its elicitations.
_call_origin: contextvars.ContextVar[str | None] = contextvars.ContextVar("call_origin", default=None)
_call_channel: contextvars.ContextVar[str | None] = contextvars.ContextVar("call_channel", default=None)


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
        self._clock = clock  # restart backoff and the stable-start window run on it
        self.name = config.name
        self.status: ServerStatus = "stopped"
        self.tools: list[str] = []
        self.listed: dict[str, Tool] = {}  # the last tools/list, by name (annotations for tool approval)
        self.error: str | None = None
        self.instructions: str | None = None  # from the server's handshake
        self.decline_all = False  # the user chose "Decline all from this server" for this session
        self._ports = ports
        self._recent_requests: deque[float] = deque()
        self._checked_schemas = CheckedSchemas()
        self._completions: dict[str, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None
        self._connection_lost = False
        self._stderr_path = log_dir / f"server-{safe_filename(config.name)}.stderr.log"
        self._client: Client | None = None
        self._call_group: anyio.abc.TaskGroup | None = None
        self._calls: set[asyncio.Task[None]] | None = None  # the calls on the current connection
        self._ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._inflight: list[tuple[str | None, str | None]] = []  # (origin, response channel) of each call
        self._waiting_calls: set[asyncio.Task[None]] = set()  # calls that arrived while starting
        self.sign_in: SignIn | None = None  # OAuth for a `url` server (main_process/oauth)
        if isinstance(config, HttpServerConfig) and config.oauth.enabled:
            self.sign_in = SignIn(config, shared_store(), requests=lambda: ports.pending,
                                  on_needed=self._sign_in_needed,
                                  publish_complete=lambda eid: ports.publish_complete(self.name, eid))
        self._cancelled_by_caller: set[asyncio.Task[None]] = set()
        self._listing_digest = ""  # of the last tools listing, to notice a change
        # Auto mode's era verdict: the config it holds for and why the handshake era is spoken instead.
        self._legacy_verdict: tuple[ServerConfig, str] | None = None
        self._modern_despite_faults = False  # the handshake era failed after a verdict: 2026-07-28 as it is
        self._era_switch: asyncio.Event | None = None  # set: replace the current connection (era verdict)
        self._switching_era = False  # the connection ends for a verdict: reconnect at once, no failure

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
        return self._ready.is_set()

    async def wait_ready(self, timeout_s: float) -> bool:
        """True once the server is ready (at once if it is); False after `timeout_s`."""
        if self._ready.is_set():
            return True
        try:
            await asyncio.wait_for(self._ready.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def start(self, sign_in: bool = True) -> None:
        if self.sign_in is not None and sign_in:
            self.sign_in.login()  # Start / Restart asks to sign in again, after a decline too
        if self.running:
            return
        self._stopping = asyncio.Event()
        self.error = None
        self._task = asyncio.create_task(self.run(), name=f"server {self.name}")
        self._set_status("starting", None)  # now, not once the task runs: a control reply says "starting"

    async def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping.set()
        if self._call_group is not None:
            self._call_group.cancel_scope.cancel()
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
        while not self._stopping.is_set():
            self._set_status("starting" if failures == 0 else "restarting", self.error)
            started = self._clock.now()
            error = "connection closed"
            if self.sign_in is not None:
                self.sign_in.failure = None
            try:
                await self._run_connection()
            # top-level handler of one connection's life: it becomes a status
            except Exception as exc:  # noqa: BLE001
                error = self._connection_error(exc)
            finally:
                self._client = None
                self._call_group = None
                self._calls = None
                self._ready.clear()
                self._ports.withdraw_server(self.name)
            if self._stopping.is_set():
                break
            if self._switching_era:  # not a failure: the same server, spoken to in the handshake era
                self._switching_era = False
                failures = 0
                continue
            if self.sign_in is not None and self.sign_in.failure is not None:
                await self._wait_for_sign_in(self.sign_in)  # no restart loop re-asking the user
                failures = 0
                continue
            failures = 1 if self._clock.now() - started > STABLE_START_S else failures + 1
            tail = self._stderr_tail()
            self.error = f"{error}\n{tail}".strip() if tail else error
            logger.warning("server %s stopped (%s); failure %d of %d", self.name, error, failures, RESTART_LIMIT)
            if failures >= RESTART_LIMIT:
                self._set_status("failed", self.error)
                await self._stopping.wait()
                break
            self._set_status("restarting", self.error)
            await wait_event(self._clock, self._stopping, restart_backoff_s(failures))
        self._set_status("stopped", None)

    async def _run_connection(self) -> None:
        self._connection_lost = False
        mode = self._protocol_mode()
        era_switch = self._era_switch = asyncio.Event()
        async with AsyncExitStack() as stack:
            client = Client(
                await self._transport(stack),
                elicitation_callback=self._on_elicit,
                message_handler=self._on_message,
                mode=mode,
                client_info=Implementation(name="elicitron", version="0.1.0"),
                cache=None,  # tool listings double as a liveness probe, so never serve them from cache
            )
            try:
                await stack.enter_async_context(client)
            except Exception as exc:
                self._handshake_failed(mode, exc)
                raise
            if not await self._modern_era_sound(client):
                return  # a verdict: run() reconnects in the handshake era
            try:
                with anyio.fail_after(READY_TIMEOUT_S):
                    listing = await client.list_tools()
            except Exception as exc:
                if self._fall_back(client, exc, "tools/list"):
                    return
                raise
            async with anyio.create_task_group() as group:
                calls: set[asyncio.Task[None]] = set()
                self._client, self._call_group, self._calls = client, group, calls
                self.tools = [tool.name for tool in listing.tools]
                self.listed = {tool.name: tool for tool in listing.tools}
                self._listing_digest = listing.model_dump_json()
                self.instructions = client.instructions
                # Logged before anyone is told: a reader of the log who saw `ready` finds the line.
                logger.info("server %s ready (protocol %s, %d tools)", self.name, client.protocol_version,
                            len(self.tools))
                self._set_status("ready", None)
                self._ready.set()
                group.start_soon(self._watch, client, group)
                group.start_soon(self._end_calls_with_connection, calls)
                group.start_soon(self._listen_for_list_changes, client)
                group.start_soon(self._replace_when_asked, era_switch, calls, group)

    # ---- the protocol era (protocolMode "auto") ------------------------------------------

    def _protocol_mode(self) -> str:
        """The mode to connect in: the config's, or "legacy" while a verdict holds for this config."""
        verdict = self._legacy_verdict
        if verdict is not None and differs_beyond_approval(self.config, verdict[0]):
            self._legacy_verdict = verdict = None
            self._modern_despite_faults = False
        return "legacy" if verdict is not None else self.config.protocol_mode

    def _handshake_failed(self, mode: str, exc: Exception) -> None:
        """A handshake-era connection made on a verdict was refused by the server (it speaks only
        2026-07-28): drop the verdict and take 2026-07-28 as the server gives it, from now on."""
        if mode != "legacy" or self._legacy_verdict is None or not isinstance(_leaf(exc), MCPError | RuntimeError):
            return
        logger.warning("server %s refused the handshake era too (%s); speaking 2026-07-28 to it as it is",
                       self.name, _describe(exc))
        self._legacy_verdict = None
        self._modern_despite_faults = True

    async def _modern_era_sound(self, client: Client) -> bool:
        """Auto mode adopted 2026-07-28 on a leniently read `server/discover`; ask once more and
        hold the raw answer to that version's schema. False: it fails, and a verdict was made."""
        version = client.protocol_version
        if self.config.protocol_mode != "auto" or version not in MODERN_PROTOCOL_VERSIONS \
                or self._modern_despite_faults:
            return True
        try:
            raw = await client.session.send_discover(version)
            mcp_methods.validate_server_result("server/discover", version, raw)
        except ValidationError as exc:
            return not self._fall_back(client, exc, "server/discover")
        except (MCPError, KeyError, ValueError) as exc:  # no evidence either way: the probe already passed
            logger.info("server %s: a second server/discover gave no verdict (%s)", self.name, _describe(exc))
        return True

    def _fall_back(self, client: Client, exc: BaseException, what: str) -> bool:
        """True when `exc`, from `what` on `client`, is a 2026-07-28 result outside that schema in
        auto mode: this server is then spoken to in the handshake era until its config changes, the
        connection is replaced (ERA_DRAIN_S for its other calls), and the caller may send `what`
        once more on the next connection (`_reconnected`)."""
        fault = _result_fault(exc)
        if fault is None or self.config.protocol_mode != "auto" or self._modern_despite_faults \
                or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return False
        if self._legacy_verdict is None:
            reason = f"its {what} answer does not fit the {client.protocol_version} schema ({fault})"
            self._legacy_verdict = (self.config, reason)
            logger.warning("server %s: %s; it falls back to the handshake era (protocolMode auto)", self.name, reason)
            self._ports.publish_notice("info", f"{reason}; speaking the handshake era to it instead", self.name)
            self._switching_era = True
            self._ready.clear()  # calls from now on wait for the next connection
            if self._era_switch is not None:
                self._era_switch.set()
        return True

    async def _replace_when_asked(self, era_switch: asyncio.Event, calls: set[asyncio.Task[None]],
                                  group: anyio.abc.TaskGroup) -> None:
        """On a verdict, end this connection once its calls are done (at most ERA_DRAIN_S)."""
        await era_switch.wait()
        with anyio.move_on_after(ERA_DRAIN_S):
            while calls:
                await anyio.sleep(0.05)
        group.cancel_scope.cancel()

    async def _reconnected(self, old: Client) -> Client:
        """The next connection, once ready (this task leaves `old`'s calls for its calls)."""
        task: asyncio.Task[None] = asyncio.current_task()  # type: ignore[assignment]
        if self._client is old and self._calls is not None:
            self._calls.discard(task)  # so that `old` may end without cancelling this call
        waits = [asyncio.ensure_future(self._ready.wait()), asyncio.ensure_future(self._stopping.wait())]
        try:
            await asyncio.wait(waits, timeout=READY_TIMEOUT_S + ERA_DRAIN_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        client, calls = self._client, self._calls
        if not self._ready.is_set() or client is None or calls is None or client is old:
            raise _NotReconnectedError(f"server {self.name!r} did not come back in the handshake era "
                                       f"(status {self.status}{': ' + self.error if self.error else ''})")
        calls.add(task)
        task.add_done_callback(calls.discard)
        return client

    async def _wait_for_sign_in(self, sign_in: SignIn) -> None:
        """Status needs-sign-in until someone asks to sign in (a call, `auth login`) or stop."""
        self._set_status("needs-sign-in", sign_in.failure)
        sign_in.login_requested.clear()
        waits = [asyncio.ensure_future(sign_in.login_requested.wait()), asyncio.ensure_future(self._stopping.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def _sign_in_needed(self, needed: bool) -> None:
        if needed:
            self._set_status("needs-sign-in", None)
        elif self.status == "needs-sign-in":
            self._set_status("ready" if self._ready.is_set() else "starting", None)

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
            if self._fall_back(client, exc, "subscriptions/listen"):
                return
            # Not fatal: the tool listing is still polled by _watch.
            logger.info("server %s: no list-change stream (%s)", self.name, _describe(exc))

    def _list_changed(self, changed: ListName) -> None:
        """The server says a list changed: tools are listed again first, so the `servers` push
        (the names callers check) is current before host peers hear of it."""
        client = self._client
        if changed != "tools" or client is None:
            self._ports.publish_list_changed(self.name, [changed])
            return
        task = asyncio.create_task(self._relist_tools(client))
        self._waiting_calls.add(task)
        task.add_done_callback(self._waiting_calls.discard)

    async def _relist_tools(self, client: Client) -> None:
        try:
            async with asyncio.timeout(WATCH_TIMEOUT_S):
                listing = await client.list_tools()
        except (MCPError, TimeoutError, ValidationError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            if not self._fall_back(client, exc, "tools/list"):
                logger.info("server %s: listing its tools after a change failed: %s", self.name, _describe(exc))
        else:
            self._listing_digest = listing.model_dump_json()
            names = [tool.name for tool in listing.tools]
            if names != self.tools:
                self.tools = names
                self._ports.publish_servers()
        self._ports.publish_list_changed(self.name, ["tools"])

    async def _watch(self, client: Client, group: anyio.abc.TaskGroup) -> None:
        """End the connection when stop is asked or the server stops answering."""
        while True:
            with anyio.move_on_after(WATCH_INTERVAL_S):
                await self._stopping.wait()
            if self._stopping.is_set():
                group.cancel_scope.cancel()
                return
            if self.sign_in is not None and self.sign_in.in_progress:
                continue  # a probe would wait behind the sign-in's lock, which is no sign of a dead server
            try:
                with anyio.fail_after(WATCH_TIMEOUT_S):
                    listing = await client.list_tools()
            except Exception as exc:
                if self._fall_back(client, exc, "tools/list"):
                    return  # the connection is being replaced
                self._connection_lost = True
                raise
            except BaseException:
                # Set before the task group cancels the calls, so their requests read server-closed.
                self._connection_lost = True
                raise
            names = [tool.name for tool in listing.tools]
            self.listed = {tool.name: tool for tool in listing.tools}
            if names != self.tools:
                self.tools = names
                self._ports.publish_servers()
            digest = listing.model_dump_json()
            if digest != self._listing_digest:  # a server that changes its tools without saying so
                self._listing_digest = digest
                self._ports.publish_list_changed(self.name, ["tools"])

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
        leaf, config = _leaf(exc), self.config
        if isinstance(leaf, OversizedLineError):
            return str(leaf)
        if (isinstance(config, StdioServerConfig) and isinstance(leaf, FileNotFoundError | PermissionError)
                and self.status != "ready"):
            if config.cwd and not Path(config.cwd).is_dir():
                return (f"the cwd {config.cwd!r} of server {config.name!r} is not a directory; "
                        "fix \"cwd\" in the config")
            return spawn_error(config, leaf, (get_default_environment() | config.env).get("PATH"))
        return _describe(exc)

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
            self._ports.publish_servers()
            # Ready again (after a start, restart or crash) or gone: what it offers may differ.
            if status != before and (status == "ready" or (before == "ready" and status != "restarting")
                                     or status in ("stopped", "failed")):
                self._ports.publish_list_changed(self.name, ALL_LISTS)

    # ---- elicitation (steps 2 and 9) ---------------------------------------------------

    def screen_elicitation(self, params: ElicitParams) -> ElicitationResult | CallError | None:
        """What to answer a request at once, before anyone sees it (None: ask): an error for a
        schema the windows cannot show, decline under "Decline all", cancel past the burst limit."""
        if isinstance(params, FormParams):
            try:
                self._checked_schemas.check(params.requested_schema)
            except UnsupportedSchemaError as exc:
                logger.warning("server %s sent an unsupported schema: %s", self.name, exc)
                self._ports.publish_notice("warning", f"refused a request with an unsupported schema: {exc}",
                                          self.name)
                return CallError(code=INVALID_PARAMS, message=f"unsupported requestedSchema: {exc}")
        if self.decline_all:
            return ElicitationResult(action="decline")
        if not self._within_burst():
            self._ports.publish_notice(
                "warning", f"more than {self.config.burst} requests within {self.config.burst_window_s:.0f} s; "
                           "answered cancel", self.name)
            return ElicitationResult(action="cancel")
        return None

    async def _on_elicit(self, context: Any, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        wire.setdefault("mode", "form")  # the windows' JSON names its mode
        try:
            elicitation = Elicitation.read(self.name, wire)
        except UndeliverableRequestError as exc:
            self._ports.publish_notice("warning", f"refused a request: {exc}", self.name)
            return ErrorData(code=INVALID_PARAMS, message=f"request not shown: {exc}")
        origin, call = _call_origin.get(), _call_channel.get()
        if origin is None and self._inflight:
            # Legacy-era requests arrive on the session's own task; one caller means it is theirs.
            if len({o for o, _ in self._inflight}) == 1:
                origin = self._inflight[0][0]
            if len(self._inflight) == 1:
                call = self._inflight[0][1]
        options = RequestOptions(timeout_s=self.config.elicitation_timeout_s, origin=origin,
                                 max_bytes=self.config.max_request_bytes, call=call)
        decided = self._ports.gate.decide(elicitation, self)  # main's own session: no host, the windows
        if isinstance(decided, Refused):
            return ErrorData(code=decided.error.code, message=decided.error.message)
        if isinstance(decided, Answered):
            recorded = asyncio.get_running_loop().create_future()
            self._ports.gate.record(elicitation, decided, options, lambda: recorded.set_result(None))
            await recorded  # a rule's answer is on disk before the server has it
            return ElicitResult(action=decided.result.action, content=decided.result.content)
        try:
            answer = await self._ask(elicitation, options)
        except UndeliverableRequestError as exc:
            return ErrorData(code=INVALID_PARAMS, message=f"request not shown: {exc}")
        return ElicitResult(action=answer.action, content=answer.content)

    async def _ask(self, elicitation: Elicitation, options: RequestOptions) -> ElicitationResult:
        """Put one request in front of the windows; one the windows can't be sent is refused
        (UndeliverableRequestError) and the windows get a notice saying so."""
        try:
            return await self._ports.elicit(elicitation, options, self._cancel_reason)
        except UndeliverableRequestError as exc:
            logger.warning("server %r sent a request that was not shown: %s", self.name, exc)
            self._ports.publish_notice("warning", f"refused a request: {exc}", self.name)
            raise

    def _cancel_reason(self) -> Unanswered:
        return "server-closed" if self._connection_lost or self._stopping.is_set() else "cancelled"

    def _within_burst(self) -> bool:
        """Sliding-window rate limit (the spec's SHOULD): at most `burst` requests per window."""
        now = self._clock.now()
        window = self._recent_requests
        while window and now - window[0] > self.config.burst_window_s:
            window.popleft()
        if len(window) >= self.config.burst:
            return False
        window.append(now)
        return True

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
            event = self._completions.get(elicitation_id)
            if event is not None:
                event.set()
            self._ports.publish_complete(self.name, elicitation_id)

    # ---- tool calls --------------------------------------------------------------------

    def call_tool(self, tool: str, arguments: dict[str, Any], origin: str | None,
                  reply: ReplyTo, *, call_id: str | None = None,
                  progress: ProgressTo | None = None) -> Cancel | None:
        """Start a call; `reply` gets its result or error exactly once. `call_id` (the caller's
        response channel) marks the requests it causes; `progress` gets the server's progress.
        Returns how to cancel the call at the server, or None when it already replied."""
        call = _Call(tool, arguments, origin, call_id, reply, progress)
        if self.status == "failed" or self._stopping.is_set():
            reply(error_reply(RpcCode.SERVER_ERROR, f"server {self.name!r} is {self.status}: {self.error or 'not running'}"))
            return None
        if self.sign_in is not None and self.status == "needs-sign-in":
            if self.sign_in.hold is not None:
                reply(self._sign_in_refused(self.sign_in))
                return None
            if not self.sign_in.in_progress:
                self.sign_in.login()  # the last card expired or was cancelled: this call asks again
        if not self._ready.is_set():  # only a starting server needs a task that waits
            waiting = asyncio.create_task(self._call_when_ready(call))
            self._waiting_calls.add(waiting)
            waiting.add_done_callback(self._waiting_calls.discard)
            waiting.add_done_callback(partial(self._answer_if_never_run, call))
            return self._canceller(waiting)
        return self._start_call(call)

    def _canceller(self, task: asyncio.Task[None]) -> Cancel:
        def cancel() -> None:
            if not task.done():
                self._cancelled_by_caller.add(task)
                task.add_done_callback(self._cancelled_by_caller.discard)
                task.cancel()

        return cancel

    def _answer_if_never_run(self, call: "_Call", task: "asyncio.Task[None]") -> None:
        """A call's task cancelled before its first step never ran the code that answers it (its
        caller cancelled at once, or the server stopped): answered here, or its caller would wait,
        and count it in flight, forever. (Runs before _canceller's own done callback.)"""
        if call.replied or not task.cancelled():
            return
        call.answer(cancelled_reply() if task in self._cancelled_by_caller else error_reply(
            RpcCode.SERVER_ERROR, f"server {self.name!r} is {self.status}: the call was not started"))

    def _was_cancelled_by_caller(self) -> bool:
        task = asyncio.current_task()
        if task in self._cancelled_by_caller:
            self._cancelled_by_caller.discard(task)
            return True
        return False

    def _sign_in_refused(self, sign_in: SignIn) -> ChannelReply:
        return error_reply(RpcCode.SERVER_ERROR, f"server {self.name!r} needs sign-in ({sign_in.hold}); sign in "
                                                 f"with `elicitron auth login {self.name}` or Start in a window")

    async def _call_when_ready(self, call: "_Call") -> None:
        sign_in = self.sign_in
        limit = READY_TIMEOUT_S if sign_in is None else max(READY_TIMEOUT_S, self.config.tool_timeout_s)
        waits = [asyncio.ensure_future(self._ready.wait())]
        if sign_in is not None:  # a decline while this call waits fails it at once
            waits.append(asyncio.ensure_future(sign_in.held.wait()))
        try:
            await asyncio.wait(waits, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if not self._was_cancelled_by_caller():
                raise
            call.answer(cancelled_reply())
            return
        finally:
            for wait in waits:
                wait.cancel()
        if not self._ready.is_set():
            if sign_in is not None and sign_in.hold is not None:
                call.answer(self._sign_in_refused(sign_in))
                return
            call.answer(error_reply(RpcCode.SERVER_ERROR, f"server {self.name!r} did not become ready within "
                                                         f"{limit:.0f} s (status {self.status})"))
            return
        client, calls = self._client, self._calls
        if client is None or calls is None:
            call.answer(error_reply(RpcCode.SERVER_ERROR, f"server {self.name!r} is {self.status}"))
            return
        task: asyncio.Task[None] = asyncio.current_task()  # type: ignore[assignment]
        calls.add(task)  # from here on the call ends with its connection, like any other
        try:
            await self._do_call(client, call)
        finally:
            calls.discard(task)

    def _start_call(self, call: "_Call") -> Cancel | None:
        client, calls = self._client, self._calls
        if client is None or calls is None:
            call.answer(error_reply(RpcCode.SERVER_ERROR, f"server {self.name!r} is {self.status}"))
            return None
        # A plain asyncio task, not the task group's start_soon: ~20 us less per call, and
        # _end_calls_with_connection still ends it with the connection.
        task = asyncio.create_task(self._do_call(client, call))
        calls.add(task)
        task.add_done_callback(calls.discard)
        task.add_done_callback(partial(self._answer_if_never_run, call))
        return self._canceller(task)

    async def _do_call(self, client: Client, call: "_Call") -> None:
        _call_origin.set(call.origin)
        _call_channel.set(call.channel)
        inflight = (call.origin, call.channel)
        self._inflight.append(inflight)
        tool = call.tool
        report = _progress_callback(call.progress)
        answer = error_reply(RpcCode.SERVER_ERROR, f"server {self.name!r} closed the connection during the call")
        try:
            async with asyncio.timeout(self.config.tool_timeout_s):  # ~10 us cheaper than anyio's fail_after
                try:
                    result = await self._call_tool(client, call, report)
                except Exception as exc:
                    if not self._fall_back(client, exc, "tools/call"):
                        raise
                    # The result was unreadable in 2026-07-28: the one retry, in the handshake era.
                    client = await self._reconnected(client)
                    result = await self._call_tool(client, call, report)
            answer = ChannelReply(result=result.model_dump(mode="json", by_alias=True, exclude_none=True))
        except _NotReconnectedError as exc:
            answer = error_reply(RpcCode.SERVER_ERROR, f"{self.name}/{tool}: {exc}")
        except TimeoutError:
            answer = error_reply(RpcCode.TIMEOUT, f"{self.name}/{tool} gave no result within "
                                         f"{self.config.tool_timeout_s:.0f} s (toolTimeoutSeconds)")
        except MCPError as exc:
            answer = error_reply(exc.error.code, exc.error.message)
            sign_in = self.sign_in
            if sign_in is not None and sign_in.failure is not None and exc.error.code == RpcCode.INTERNAL_ERROR:
                # The HTTP layer's 401/403 after a sign-in (e.g. a step-up) did not complete: say why.
                answer = error_reply(RpcCode.SERVER_ERROR, f"{self.name}/{tool} needs sign-in: {sign_in.failure}")
        except asyncio.CancelledError:
            if self._was_cancelled_by_caller():
                answer = cancelled_reply()  # the client already told the server (MCP cancellation)
            raise
        # top-level handler of one call: transport faults become an error reply
        except Exception as exc:  # noqa: BLE001
            leaf = _leaf(exc)
            if isinstance(leaf, MCPError):  # raised inside a task group: the server's own error
                answer = error_reply(leaf.error.code, leaf.error.message)
            else:
                logger.warning("call %s/%s failed: %s", self.name, tool, _describe(exc))
                answer = error_reply(RpcCode.INTERNAL_ERROR, f"call failed: {_describe(exc)}")
        finally:
            self._inflight.remove(inflight)
            call.answer(answer)

    async def _call_tool(self, client: Client, call: "_Call", report: ProgressFnT | None) -> Any:
        try:
            return await client.call_tool(call.tool, call.arguments, progress_callback=report)
        except MCPError as exc:
            if exc.error.code != URL_ELICITATION_REQUIRED or not await self._present_required_urls(
                    exc, call.origin, call.channel):
                raise
            return await client.call_tool(call.tool, call.arguments, progress_callback=report)  # the one retry

    async def _present_required_urls(self, exc: MCPError, origin: str | None, call: str | None) -> bool:
        """-32042: show each required URL; True when all were accepted (and completed, or the
        server stayed silent past urlCompletionTimeoutSeconds: completion notices are optional)."""
        try:
            required = UrlElicitationRequiredError.from_error(exc.error).elicitations
        except (ValueError, ValidationError) as bad:
            logger.warning("server %s sent a malformed -32042: %s", self.name, bad)
            return False
        for params in required:
            elicitation_id = params.elicitation_id
            # No id (2026-07-28 dropped it): no completion notice can name it, so the wait runs out.
            event = asyncio.Event() if elicitation_id is None else self._completions.setdefault(
                elicitation_id, asyncio.Event())
            try:
                wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
                try:
                    # A URL the server's call requires: no rule answers one, and it is no
                    # elicitation of its own to screen (its call already is one request).
                    answer = await self._ask(Elicitation.read(self.name, wire), RequestOptions(
                        timeout_s=self.config.elicitation_timeout_s, origin=origin,
                        max_bytes=self.config.max_request_bytes, call=call))
                except UndeliverableRequestError:
                    return False
                if answer.action != "accept":
                    return False
                try:
                    await asyncio.wait_for(event.wait(), self.config.url_completion_timeout_s)
                except TimeoutError:
                    logger.info("server %s sent no completion for %s; retrying anyway", self.name,
                                params.elicitation_id)
            finally:
                if elicitation_id is not None:
                    self._completions.pop(elicitation_id, None)
        return True


    # ---- read-only MCP requests (extension msgMcpRequest) ---------------------------------

    def mcp_request(self, method: McpMethod, params: dict[str, Any], reply: ReplyTo) -> None:
        """Forward one read-only request; `reply` gets the MCP result JSON or an error, once."""
        if self.status == "failed" or self._stopping.is_set():
            reply(error_reply(RpcCode.SERVER_ERROR, f"server {self.name!r} is {self.status}: {self.error or 'not running'}"))
            return
        task = asyncio.create_task(self._do_request(method, params, reply))
        self._waiting_calls.add(task)
        task.add_done_callback(self._waiting_calls.discard)

    async def _do_request(self, method: McpMethod, params: dict[str, Any], reply: ReplyTo) -> None:
        answer = error_reply(RpcCode.SERVER_ERROR, f"server {self.name!r} closed the connection during {method}")
        try:
            await asyncio.wait_for(self._ready.wait(), READY_TIMEOUT_S)
            client = self._client
            if client is None:
                answer = error_reply(RpcCode.SERVER_ERROR, f"server {self.name!r} is {self.status}")
                return
            async with asyncio.timeout(self.config.tool_timeout_s):
                try:
                    result = await _MCP_METHODS[method](client, params)
                except Exception as exc:
                    if not self._fall_back(client, exc, method):
                        raise
                    client = await self._reconnected(client)  # the one retry, in the handshake era
                    result = await _MCP_METHODS[method](client, params)
            answer = ChannelReply(result=result.model_dump(mode="json", by_alias=True, exclude_none=True))
        except _NotReconnectedError as exc:
            answer = error_reply(RpcCode.SERVER_ERROR, f"{method}: {exc}")
        except TimeoutError:
            answer = error_reply(RpcCode.TIMEOUT, f"{self.name}: {method} gave no result in time (status {self.status})")
        except MCPError as exc:
            answer = error_reply(exc.error.code, exc.error.message)
        except ValidationError as exc:
            fault = _result_fault(exc)
            answer = error_reply(RpcCode.INVALID_PARAMS, f"bad params for {method}: {_describe(exc)}") if fault is None \
                else error_reply(RpcCode.INTERNAL_ERROR, f"server {self.name!r} answered {method} outside "
                                                         f"the schema: {fault}")
        except (KeyError, TypeError, ValueError) as exc:
            answer = error_reply(RpcCode.INVALID_PARAMS, f"bad params for {method}: {exc}")
        # top-level handler of one request: transport faults become an error reply
        except Exception as exc:  # noqa: BLE001
            answer = error_reply(RpcCode.INTERNAL_ERROR, f"{method} failed: {_describe(exc)}")
        finally:
            reply(answer)


def _cursor(params: dict[str, Any]) -> str | None:
    cursor = params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise TypeError("cursor must be a string")
    return cursor


_MCP_METHODS: dict[str, Callable[[Client, dict[str, Any]], Awaitable[Any]]] = {
    "tools/list": lambda c, p: c.list_tools(cursor=_cursor(p)),
    "resources/list": lambda c, p: c.list_resources(cursor=_cursor(p)),
    "resources/templates/list": lambda c, p: c.list_resource_templates(cursor=_cursor(p)),
    "resources/read": lambda c, p: c.read_resource(str(p["uri"])),
    "prompts/list": lambda c, p: c.list_prompts(cursor=_cursor(p)),
    "prompts/get": lambda c, p: c.get_prompt(str(p["name"]), p.get("arguments")),
}


@dataclass(eq=False)
class _Call:
    """One msgMcpCallTool as the server runs it."""

    tool: str
    arguments: dict[str, Any]
    origin: str | None
    channel: str | None
    reply: ReplyTo
    progress: ProgressTo | None
    replied: bool = False

    def answer(self, answer: ChannelReply) -> None:
        """`reply`, once: a task cancelled before its first step is answered by its done callback."""
        if not self.replied:
            self.replied = True
            self.reply(answer)


def _progress_callback(send: ProgressTo | None) -> ProgressFnT | None:
    if send is None:
        return None

    async def report(progress: float, total: float | None, message: str | None) -> None:
        send(progress, total, message)

    return report


def cancelled_reply() -> ChannelReply:
    """The answer of a call its caller cancelled (JSON-RPC -32800)."""
    return error_reply(RpcCode.REQUEST_CANCELLED, "the call was cancelled by its caller")


def error_reply(code: int, message: str) -> ChannelReply:
    """The `{error: {code, message}}` answer on a peer's response channel."""
    return ChannelReply(error=CallError(code=code, message=message))


class _NotReconnectedError(Exception):
    """The connection replaced for an era verdict did not come back in time."""


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside the exception groups anyio wraps around it (`exc` if none)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _result_fault(exc: BaseException) -> str | None:
    """What is wrong with a server result the SDK refused for its protocol version (the schema
    check of `send_request`), in one line; None when `exc` is no such refusal."""
    leaf = _leaf(exc)
    if not isinstance(leaf, ValidationError) or "Result" not in leaf.title:
        return None
    return _validation_summary(leaf)


def _validation_summary(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return exc.title
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "(the object)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{exc.title}: {where}: {first['msg']}{more}"


def _describe(exc: BaseException) -> str:
    """One line for a user, unwrapping the exception groups anyio produces."""
    exc = _leaf(exc)
    if isinstance(exc, ValidationError):
        return f"ValidationError: {_validation_summary(exc)}"
    text = str(exc) or type(exc).__name__
    text = " ".join(text.split())  # one line
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text

