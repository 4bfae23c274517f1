"""What a configured server's own session does with its elicitations (the gate decides first:
elicitation_gate.py): its screening (schemas the windows cannot show, "Decline all", the burst
limit), the origin and call it belongs to, and the windows' answer."""

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from mcp_types import INVALID_PARAMS, ElicitRequestParams, ElicitResult, ErrorData

from main_process.clock import Clock
from main_process.config import ServerConfig
from main_process.consent.elicitation_gate import Answered, ElicitationGate, Refused
from main_process.consent.pending import Elicitation, RequestOptions, Unanswered
from main_process.servers.server_calls import call_channel, call_origin
from shared.elicit_params import ElicitParams, FormParams
from shared.errors import UndeliverableRequestError, UnsupportedSchemaError
from shared.messages import CallError, ElicitationResult
from shared.schema import CheckedSchemas

logger = logging.getLogger(__name__)


class _Ports(Protocol):
    @property
    def gate(self) -> ElicitationGate: ...

    async def elicit(self, elicitation: Elicitation, options: RequestOptions,
                     cancel_reason: Callable[[], Unanswered] = ...) -> ElicitationResult: ...

    def publish_notice(self, level: str, message: str, server: str | None) -> None: ...


class _Server(Protocol):
    """What the elicitation path reads of its server (servers.ManagedServer)."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> ServerConfig: ...

    @property
    def decline_all(self) -> bool: ...

    @property
    def ports(self) -> _Ports: ...

    @property
    def inflight(self) -> list[tuple[str | None, str | None]]: ...

    @property
    def connection_lost(self) -> bool: ...

    @property
    def stopping(self) -> asyncio.Event: ...

    @property
    def clock(self) -> Clock: ...

    def screen_elicitation(self, params: ElicitParams) -> ElicitationResult | CallError | None: ...


class ServerElicitation:
    """One server session's elicitations (the face is ManagedServer.screen_elicitation)."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._recent_requests: deque[float] = deque()
        self._checked_schemas = CheckedSchemas()

    def screen_elicitation(self, params: ElicitParams) -> ElicitationResult | CallError | None:
        """What to answer a request at once, before anyone sees it (None: ask): an error for a
        schema the windows cannot show, decline under "Decline all", cancel past the burst limit."""
        server = self._server
        if isinstance(params, FormParams):
            try:
                self._checked_schemas.check(params.requested_schema)
            except UnsupportedSchemaError as exc:
                logger.warning("server %s sent an unsupported schema: %s", server.name, exc)
                server.ports.publish_notice("warning", f"refused a request with an unsupported schema: {exc}",
                                          server.name)
                return CallError(code=INVALID_PARAMS, message=f"unsupported requestedSchema: {exc}")
        if server.decline_all:
            return ElicitationResult(action="decline")
        if not self._within_burst():
            server.ports.publish_notice(
                "warning", f"more than {server.config.burst} requests within {server.config.burst_window_s:.0f} s; "
                           "answered cancel", server.name)
            return ElicitationResult(action="cancel")
        return None

    async def on_elicit(self, context: Any, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        server = self._server
        wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        wire.setdefault("mode", "form")  # the windows' JSON names its mode
        try:
            elicitation = Elicitation.read(server.name, wire)
        except UndeliverableRequestError as exc:
            server.ports.publish_notice("warning", f"refused a request: {exc}", server.name)
            return ErrorData(code=INVALID_PARAMS, message=f"request not shown: {exc}")
        origin, call = call_origin.get(), call_channel.get()
        if origin is None and server.inflight:
            # Legacy-era requests arrive on the session's own task; one caller means it is theirs.
            if len({o for o, _ in server.inflight}) == 1:
                origin = server.inflight[0][0]
            if len(server.inflight) == 1:
                call = server.inflight[0][1]
        options = RequestOptions(timeout_s=server.config.elicitation_timeout_s, origin=origin,
                                 max_bytes=server.config.max_request_bytes, call=call)
        decided = server.ports.gate.decide(elicitation, self._server)  # main's own session: no host, the windows
        if isinstance(decided, Refused):
            return ErrorData(code=decided.error.code, message=decided.error.message)
        if isinstance(decided, Answered):
            recorded = asyncio.get_running_loop().create_future()
            server.ports.gate.record(elicitation, decided, options, lambda: recorded.set_result(None))
            await recorded  # a rule's answer is on disk before the server has it
            return ElicitResult(action=decided.result.action, content=decided.result.content)
        try:
            answer = await self.ask(elicitation, options)
        except UndeliverableRequestError as exc:
            return ErrorData(code=INVALID_PARAMS, message=f"request not shown: {exc}")
        return ElicitResult(action=answer.action, content=answer.content)

    async def ask(self, elicitation: Elicitation, options: RequestOptions) -> ElicitationResult:
        """Put one request in front of the windows; one the windows can't be sent is refused
        (UndeliverableRequestError) and the windows get a notice saying so."""
        server = self._server
        try:
            return await server.ports.elicit(elicitation, options, self.cancel_reason)
        except UndeliverableRequestError as exc:
            logger.warning("server %r sent a request that was not shown: %s", server.name, exc)
            server.ports.publish_notice("warning", f"refused a request: {exc}", server.name)
            raise

    def cancel_reason(self) -> Unanswered:
        server = self._server
        return "server-closed" if server.connection_lost or server.stopping.is_set() else "cancelled"

    def _within_burst(self) -> bool:
        """Sliding-window rate limit (the spec's SHOULD): at most `burst` requests per window."""
        server = self._server
        now = server.clock.now()
        window = self._recent_requests
        while window and now - window[0] > server.config.burst_window_s:
            window.popleft()
        if len(window) >= server.config.burst:
            return False
        window.append(now)
        return True
