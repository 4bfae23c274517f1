"""A server's tool calls (msgMcpCallTool, step 1 and 9) and read-only MCP requests (msgMcpRequest).

Tool calls are tasks tied to their connection: when it ends, they end too, each with a clear error
reply; the caller may cancel one (the server then gets MCP's cancellation). A call that shows the
server's 2026-07-28 results do not fit that schema is sent once more in the handshake era
(server_era.py). A -32042 (URL elicitation required) shows each URL, then retries the call once.
"""

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from mcp import Client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from mcp_types import URL_ELICITATION_REQUIRED
from pydantic import ValidationError

from main_process.consent.pending import Elicitation, RequestOptions
from main_process.oauth.sign_in import SignIn
from main_process.servers.server_era import READY_TIMEOUT_S, ConnectedServer, ProtocolEra
from main_process.servers.server_faults import (
    NotReconnectedError,
    cancelled_reply,
    describe,
    error_reply,
    leaf,
    result_fault,
)
from main_process.wire.peer_calls import Cancel
from main_process.wire.topic_routes import ProgressTo, ReplyTo
from shared.errors import RpcCode, UndeliverableRequestError
from shared.messages import ChannelReply, ElicitationResult, McpMethod

logger = logging.getLogger(__name__)

# The peer whose msgMcpCallTool is running in this task, and that call's response channel, for
# `origin` and `call` of its elicitations.
call_origin: contextvars.ContextVar[str | None] = contextvars.ContextVar("call_origin", default=None)
call_channel: contextvars.ContextVar[str | None] = contextvars.ContextVar("call_channel", default=None)


class _Asks(Protocol):
    async def ask(self, elicitation: Elicitation, options: RequestOptions) -> ElicitationResult: ...


class _Server(ConnectedServer, Protocol):
    """What the calls read of their server (servers.ManagedServer)."""

    @property
    def sign_in(self) -> SignIn | None: ...

    @property
    def inflight(self) -> list[tuple[str | None, str | None]]: ...

    @property
    def completions(self) -> dict[str, asyncio.Event]: ...

    @property
    def tasks(self) -> set[asyncio.Task[None]]: ...

    @property
    def era(self) -> ProtocolEra: ...

    @property
    def elicitation(self) -> _Asks: ...


class ServerCalls:
    """The calls on one server's connections (the face is ManagedServer.call_tool/mcp_request)."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._cancelled_by_caller: set[asyncio.Task[None]] = set()

    def call_tool(self, tool: str, arguments: dict[str, Any], origin: str | None,
                  reply: ReplyTo, *, call_id: str | None = None,
                  progress: ProgressTo | None = None) -> Cancel | None:
        """Start a call; `reply` gets its result or error exactly once. `call_id` (the caller's
        response channel) marks the requests it causes; `progress` gets the server's progress.
        Returns how to cancel the call at the server, or None when it already replied."""
        server = self._server
        call = _Call(tool, arguments, origin, call_id, reply, progress)
        if server.status == "failed" or server.stopping.is_set():
            reply(error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} is {server.status}: {server.error or 'not running'}"))
            return None
        if server.sign_in is not None and server.status == "needs-sign-in":
            if server.sign_in.hold is not None:
                reply(self._sign_in_refused(server.sign_in))
                return None
            if not server.sign_in.in_progress:
                server.sign_in.login()  # the last card expired or was cancelled: this call asks again
        if not server.became_ready.is_set():  # only a starting server needs a task that waits
            waiting = asyncio.create_task(self._call_when_ready(call))
            server.tasks.add(waiting)
            waiting.add_done_callback(server.tasks.discard)
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
        server = self._server
        if call.replied or not task.cancelled():
            return
        call.answer(cancelled_reply() if task in self._cancelled_by_caller else error_reply(
            RpcCode.SERVER_ERROR, f"server {server.name!r} is {server.status}: the call was not started"))

    def _was_cancelled_by_caller(self) -> bool:
        task = asyncio.current_task()
        if task in self._cancelled_by_caller:
            self._cancelled_by_caller.discard(task)
            return True
        return False

    def _sign_in_refused(self, sign_in: SignIn) -> ChannelReply:
        server = self._server
        return error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} needs sign-in ({sign_in.hold}); sign in "
                                                 f"with `elicitron auth login {server.name}` or Start in a window")

    async def _call_when_ready(self, call: "_Call") -> None:
        server = self._server
        sign_in = server.sign_in
        limit = READY_TIMEOUT_S if sign_in is None else max(READY_TIMEOUT_S, server.config.tool_timeout_s)
        waits = [asyncio.ensure_future(server.became_ready.wait())]
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
        if not server.became_ready.is_set():
            if sign_in is not None and sign_in.hold is not None:
                call.answer(self._sign_in_refused(sign_in))
                return
            call.answer(error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} did not become ready within "
                                                         f"{limit:.0f} s (status {server.status})"))
            return
        client, calls = server.client, server.connection_calls
        if client is None or calls is None:
            call.answer(error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} is {server.status}"))
            return
        task: asyncio.Task[None] = asyncio.current_task()  # type: ignore[assignment]
        calls.add(task)  # from here on the call ends with its connection, like any other
        try:
            await self._do_call(client, call)
        finally:
            calls.discard(task)

    def _start_call(self, call: "_Call") -> Cancel | None:
        server = self._server
        client, calls = server.client, server.connection_calls
        if client is None or calls is None:
            call.answer(error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} is {server.status}"))
            return None
        # A plain asyncio task, not the task group's start_soon: ~20 us less per call, and
        # _end_calls_with_connection still ends it with the connection.
        task = asyncio.create_task(self._do_call(client, call))
        calls.add(task)
        task.add_done_callback(calls.discard)
        task.add_done_callback(partial(self._answer_if_never_run, call))
        return self._canceller(task)

    async def _do_call(self, client: Client, call: "_Call") -> None:
        server = self._server
        call_origin.set(call.origin)
        call_channel.set(call.channel)
        inflight = (call.origin, call.channel)
        server.inflight.append(inflight)
        tool = call.tool
        report = _progress_callback(call.progress)
        answer = error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} closed the connection during the call")
        try:
            async with asyncio.timeout(server.config.tool_timeout_s):  # ~10 us cheaper than anyio's fail_after
                try:
                    result = await self._call_tool(client, call, report)
                except Exception as exc:
                    if not server.era.fall_back(client, exc, "tools/call"):
                        raise
                    # The result was unreadable in 2026-07-28: the one retry, in the handshake era.
                    client = await server.era.reconnected(client)
                    result = await self._call_tool(client, call, report)
            answer = ChannelReply(result=result.model_dump(mode="json", by_alias=True, exclude_none=True))
        except NotReconnectedError as exc:
            answer = error_reply(RpcCode.SERVER_ERROR, f"{server.name}/{tool}: {exc}")
        except TimeoutError:
            answer = error_reply(RpcCode.TIMEOUT, f"{server.name}/{tool} gave no result within "
                                         f"{server.config.tool_timeout_s:.0f} s (toolTimeoutSeconds)")
        except MCPError as exc:
            answer = error_reply(exc.error.code, exc.error.message)
            sign_in = server.sign_in
            if sign_in is not None and sign_in.failure is not None and exc.error.code == RpcCode.INTERNAL_ERROR:
                # The HTTP layer's 401/403 after a sign-in (e.g. a step-up) did not complete: say why.
                answer = error_reply(RpcCode.SERVER_ERROR, f"{server.name}/{tool} needs sign-in: {sign_in.failure}")
        except asyncio.CancelledError:
            if self._was_cancelled_by_caller():
                answer = cancelled_reply()  # the client already told the server (MCP cancellation)
            raise
        # top-level handler of one call: transport faults become an error reply
        except Exception as exc:  # noqa: BLE001
            inner = leaf(exc)
            if isinstance(inner, MCPError):  # raised inside a task group: the server's own error
                answer = error_reply(inner.error.code, inner.error.message)
            else:
                logger.warning("call %s/%s failed: %s", server.name, tool, describe(exc))
                answer = error_reply(RpcCode.INTERNAL_ERROR, f"call failed: {describe(exc)}")
        finally:
            server.inflight.remove(inflight)
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
        server = self._server
        try:
            required = UrlElicitationRequiredError.from_error(exc.error).elicitations
        except (ValueError, ValidationError) as bad:
            logger.warning("server %s sent a malformed -32042: %s", server.name, bad)
            return False
        for params in required:
            elicitation_id = params.elicitation_id
            # No id (2026-07-28 dropped it): no completion notice can name it, so the wait runs out.
            event = asyncio.Event() if elicitation_id is None else server.completions.setdefault(
                elicitation_id, asyncio.Event())
            try:
                wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
                try:
                    # A URL the server's call requires: no rule answers one, and it is no
                    # elicitation of its own to screen (its call already is one request).
                    answer = await server.elicitation.ask(Elicitation.read(server.name, wire), RequestOptions(
                        timeout_s=server.config.elicitation_timeout_s, origin=origin,
                        max_bytes=server.config.max_request_bytes, call=call))
                except UndeliverableRequestError:
                    return False
                if answer.action != "accept":
                    return False
                try:
                    await asyncio.wait_for(event.wait(), server.config.url_completion_timeout_s)
                except TimeoutError:
                    logger.info("server %s sent no completion for %s; retrying anyway", server.name,
                                params.elicitation_id)
            finally:
                if elicitation_id is not None:
                    server.completions.pop(elicitation_id, None)
        return True

    def mcp_request(self, method: McpMethod, params: dict[str, Any], reply: ReplyTo) -> None:
        """Forward one read-only request; `reply` gets the MCP result JSON or an error, once."""
        server = self._server
        if server.status == "failed" or server.stopping.is_set():
            reply(error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} is {server.status}: {server.error or 'not running'}"))
            return
        task = asyncio.create_task(self._do_request(method, params, reply))
        server.tasks.add(task)
        task.add_done_callback(server.tasks.discard)

    async def _do_request(self, method: McpMethod, params: dict[str, Any], reply: ReplyTo) -> None:
        server = self._server
        answer = error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} closed the connection during {method}")
        try:
            await asyncio.wait_for(server.became_ready.wait(), READY_TIMEOUT_S)
            client = server.client
            if client is None:
                answer = error_reply(RpcCode.SERVER_ERROR, f"server {server.name!r} is {server.status}")
                return
            async with asyncio.timeout(server.config.tool_timeout_s):
                try:
                    result = await _MCP_METHODS[method](client, params)
                except Exception as exc:
                    if not server.era.fall_back(client, exc, method):
                        raise
                    client = await server.era.reconnected(client)  # the one retry, in the handshake era
                    result = await _MCP_METHODS[method](client, params)
            answer = ChannelReply(result=result.model_dump(mode="json", by_alias=True, exclude_none=True))
        except NotReconnectedError as exc:
            answer = error_reply(RpcCode.SERVER_ERROR, f"{method}: {exc}")
        except TimeoutError:
            answer = error_reply(RpcCode.TIMEOUT, f"{server.name}: {method} gave no result in time (status {server.status})")
        except MCPError as exc:
            answer = error_reply(exc.error.code, exc.error.message)
        except ValidationError as exc:
            fault = result_fault(exc)
            answer = error_reply(RpcCode.INVALID_PARAMS, f"bad params for {method}: {describe(exc)}") if fault is None \
                else error_reply(RpcCode.INTERNAL_ERROR, f"server {server.name!r} answered {method} outside "
                                                         f"the schema: {fault}")
        except (KeyError, TypeError, ValueError) as exc:
            answer = error_reply(RpcCode.INVALID_PARAMS, f"bad params for {method}: {exc}")
        # top-level handler of one request: transport faults become an error reply
        except Exception as exc:  # noqa: BLE001
            answer = error_reply(RpcCode.INTERNAL_ERROR, f"{method} failed: {describe(exc)}")
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
