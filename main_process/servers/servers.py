"""One supervised `mcp.Client` per configured server (step 1-2 and 9 of the round trip).

Each server lives in its own task: connect, list tools, then watch the connection; a lost
connection is restarted with backoff up to a limit within a stable-start window. Whenever the
server's tools, resources or prompts may have changed (it said so, its listing changed, it became
ready or stopped), host peers hear of it (`publish_list_changed`).

`ManagedServer` is the face the rest of main uses and the supervisor (start, stop, restart with
backoff, status); its parts live beside it: server_session.py (the mcp.Client connection, its
watch and list changes), server_calls.py (tool calls and read-only requests, tied to their
connection), server_era.py (which protocol era it is
spoken to in, `protocolMode: "auto"`), server_elicitation.py (its session's elicitations once the
gate let them through, and their screening), server_faults.py (error replies, one-line errors).
"""

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
from mcp import Client
from mcp.client.stdio import get_default_environment
from mcp_types import (
    Tool,
)

from main_process.clock import MONOTONIC, Clock, wait_event
from main_process.config import HttpServerConfig, ServerConfig, StdioServerConfig
from main_process.consent.elicitation_gate import ElicitationGate
from main_process.consent.pending import Elicitation, PendingRequests, RequestOptions, Unanswered
from main_process.oauth.sign_in import SignIn
from main_process.oauth.token_store import shared_store
from main_process.private_files import safe_filename
from main_process.relay.upstream import spawn_error
from main_process.servers.server_calls import ServerCalls
from main_process.servers.server_elicitation import ServerElicitation
from main_process.servers.server_era import ProtocolEra
from main_process.servers.server_faults import describe, leaf
from main_process.servers.server_session import ALL_LISTS, ServerSession
from main_process.wire.peer_calls import Cancel
from main_process.wire.topic_routes import ProgressTo, ReplyTo
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

RESTART_LIMIT = 5
STABLE_START_S = 10.0  # a connection that lived this long resets the restart count


def restart_backoff_s(failures: int) -> float:
    """The pause before the next start after `failures` failed starts in a row: 0.5 s, doubling, at most 8 s."""
    return min(0.5 * 2.0 ** (failures - 1), 8.0)


STDERR_TAIL_LINES = 20

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
        self.session = ServerSession(self)  # the mcp.Client connection and its list changes
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
        self.set_status("starting", None)  # now, not once the task runs: a control reply says "starting"

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
            self.set_status("starting" if failures == 0 else "restarting", self.error)
            started = self.clock.now()
            error = "connection closed"
            if self.sign_in is not None:
                self.sign_in.failure = None
            try:
                await self.session.run()
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
                self.set_status("failed", self.error)
                await self.stopping.wait()
                break
            self.set_status("restarting", self.error)
            await wait_event(self.clock, self.stopping, restart_backoff_s(failures))
        self.set_status("stopped", None)

    async def _wait_for_sign_in(self, sign_in: SignIn) -> None:
        """Status needs-sign-in until someone asks to sign in (a call, `auth login`) or stop."""
        self.set_status("needs-sign-in", sign_in.failure)
        sign_in.login_requested.clear()
        waits = [asyncio.ensure_future(sign_in.login_requested.wait()), asyncio.ensure_future(self.stopping.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def _sign_in_needed(self, needed: bool) -> None:
        if needed:
            self.set_status("needs-sign-in", None)
        elif self.status == "needs-sign-in":
            self.set_status("ready" if self.became_ready.is_set() else "starting", None)


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

    def set_status(self, status: ServerStatus, error: str | None) -> None:
        if (status, error) != (self.status, self.error):
            before = self.status
            self.status, self.error = status, error
            self.ports.publish_servers()
            # Ready again (after a start, restart or crash) or gone: what it offers may differ.
            if status != before and (status == "ready" or (before == "ready" and status != "restarting")
                                     or status in ("stopped", "failed")):
                self.ports.publish_list_changed(self.name, ALL_LISTS)

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
