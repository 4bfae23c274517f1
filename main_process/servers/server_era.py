"""Which protocol era a server is spoken to in (its config's `protocolMode`; "auto" is checked).

`protocolMode: "auto"` never fails what "legacy" would serve: a server that claims 2026-07-28 but
answers it outside that schema (its `server/discover`, checked strictly once per connection, or any
later result, e.g. a `tools/call` without `resultType`) is spoken to in the handshake era from then
on, until its config changes: the connection is replaced (its other calls finish first, for up to
ERA_DRAIN_S) and the request that showed the fault is sent once more on the new connection.
"""

import asyncio
import logging
from typing import Protocol

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import methods as mcp_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from main_process.config import ServerConfig, differs_beyond_approval
from main_process.servers.server_faults import NotReconnectedError, describe, leaf, result_fault
from shared.messages import ServerStatus

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 30.0  # a call to a starting server waits this long for it
ERA_DRAIN_S = 10.0  # a connection replaced for an era verdict lets its calls finish for this long


class _Notices(Protocol):
    def publish_notice(self, level: str, message: str, server: str | None) -> None: ...


class ConnectedServer(Protocol):
    """What a server's parts (this era, server_calls.py) read of its connection and state
    (servers.ManagedServer, which imports them: hence a Protocol)."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> ServerConfig: ...

    @property
    def status(self) -> ServerStatus: ...

    @property
    def error(self) -> str | None: ...

    @property
    def stopping(self) -> asyncio.Event: ...

    @property
    def became_ready(self) -> asyncio.Event: ...

    @property
    def client(self) -> Client | None: ...

    @property
    def connection_calls(self) -> set[asyncio.Task[None]] | None: ...


class _Server(ConnectedServer, Protocol):
    """What the era reads and changes of its server."""

    @property
    def ports(self) -> _Notices: ...


class ProtocolEra:
    """One server's era verdict, and the connection switch it causes."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        # Auto mode's era verdict: the config it holds for and why the handshake era is spoken instead.
        self._legacy_verdict: tuple[ServerConfig, str] | None = None
        self._modern_despite_faults = False  # the handshake era failed after a verdict: 2026-07-28 as it is
        self._era_switch: asyncio.Event | None = None  # set: replace the current connection (era verdict)
        self.switching_era = False  # the connection ends for a verdict: reconnect at once, no failure

    def new_connection(self) -> asyncio.Event:
        """The event a verdict sets to replace the connection being made."""
        self._era_switch = asyncio.Event()
        return self._era_switch

    def protocol_mode(self) -> str:
        """The mode to connect in: the config's, or "legacy" while a verdict holds for this config."""
        server = self._server
        verdict = self._legacy_verdict
        if verdict is not None and differs_beyond_approval(server.config, verdict[0]):
            self._legacy_verdict = verdict = None
            self._modern_despite_faults = False
        return "legacy" if verdict is not None else server.config.protocol_mode

    def handshake_failed(self, mode: str, exc: Exception) -> None:
        """A handshake-era connection made on a verdict was refused by the server (it speaks only
        2026-07-28): drop the verdict and take 2026-07-28 as the server gives it, from now on."""
        if mode != "legacy" or self._legacy_verdict is None or not isinstance(leaf(exc), MCPError | RuntimeError):
            return
        logger.warning("server %s refused the handshake era too (%s); speaking 2026-07-28 to it as it is",
                       self._server.name, describe(exc))
        self._legacy_verdict = None
        self._modern_despite_faults = True

    async def modern_era_sound(self, client: Client) -> bool:
        """Auto mode adopted 2026-07-28 on a leniently read `server/discover`; ask once more and
        hold the raw answer to that version's schema. False: it fails, and a verdict was made."""
        server = self._server
        version = client.protocol_version
        if server.config.protocol_mode != "auto" or version not in MODERN_PROTOCOL_VERSIONS \
                or self._modern_despite_faults:
            return True
        try:
            raw = await client.session.send_discover(version)
            mcp_methods.validate_server_result("server/discover", version, raw)
        except ValidationError as exc:
            return not self.fall_back(client, exc, "server/discover")
        except (MCPError, KeyError, ValueError) as exc:  # no evidence either way: the probe already passed
            logger.info("server %s: a second server/discover gave no verdict (%s)", server.name, describe(exc))
        return True

    def fall_back(self, client: Client, exc: BaseException, what: str) -> bool:
        """True when `exc`, from `what` on `client`, is a 2026-07-28 result outside that schema in
        auto mode: this server is then spoken to in the handshake era until its config changes, the
        connection is replaced (ERA_DRAIN_S for its other calls), and the caller may send `what`
        once more on the next connection (`reconnected`)."""
        server = self._server
        fault = result_fault(exc)
        if fault is None or server.config.protocol_mode != "auto" or self._modern_despite_faults \
                or client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return False
        if self._legacy_verdict is None:
            reason = f"its {what} answer does not fit the {client.protocol_version} schema ({fault})"
            self._legacy_verdict = (server.config, reason)
            logger.warning("server %s: %s; it falls back to the handshake era (protocolMode auto)", server.name, reason)
            server.ports.publish_notice("info", f"{reason}; speaking the handshake era to it instead", server.name)
            self.switching_era = True
            server.became_ready.clear()  # calls from now on wait for the next connection
            if self._era_switch is not None:
                self._era_switch.set()
        return True

    async def replace_when_asked(self, era_switch: asyncio.Event, calls: set[asyncio.Task[None]],
                                  group: anyio.abc.TaskGroup) -> None:
        """On a verdict, end this connection once its calls are done (at most ERA_DRAIN_S)."""
        await era_switch.wait()
        with anyio.move_on_after(ERA_DRAIN_S):
            while calls:
                await anyio.sleep(0.05)
        group.cancel_scope.cancel()

    async def reconnected(self, old: Client) -> Client:
        """The next connection, once ready (this task leaves `old`'s calls for its calls)."""
        server = self._server
        task: asyncio.Task[None] = asyncio.current_task()  # type: ignore[assignment]
        if server.client is old and server.connection_calls is not None:
            server.connection_calls.discard(task)  # so that `old` may end without cancelling this call
        waits = [asyncio.ensure_future(server.became_ready.wait()), asyncio.ensure_future(server.stopping.wait())]
        try:
            await asyncio.wait(waits, timeout=READY_TIMEOUT_S + ERA_DRAIN_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        client, calls = server.client, server.connection_calls
        if not server.became_ready.is_set() or client is None or calls is None or client is old:
            raise NotReconnectedError(f"server {server.name!r} did not come back in the handshake era "
                                       f"(status {server.status}{': ' + server.error if server.error else ''})")
        calls.add(task)
        task.add_done_callback(calls.discard)
        return client
