"""Driving one host `tools/call` through main, in the era the host's session speaks.

Handshake era (legacy): the handler waits for the call's result; progress goes to the host as
`notifications/progress`; a request main sends this host (elicitationRoute "host" or "first") goes
to it as `elicitation/create` related to the call, and its answer back on the one-time channel. If
main dismisses that request meanwhile (a window answered first), the host's request is cancelled.

2026-07-28: a host request cannot be sent mid-call, so the handler returns an
`InputRequiredResult` carrying the requests (keyed by their response channels) and the call waits in
the session under its `requestState`; the host's retry carries the answers, which go to main, and
the call is driven on. A request dismissed before the host's answer comes back is left alone.

Either way, a handler that is cancelled (the host sent `notifications/cancelled`, or went away)
cancels the call at the server.
"""

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import SERVER_INFO_META_KEY
from pydantic import ValidationError

from gateway_process.session import HostCall, HostSession, Lost
from shared.errors import RpcCode
from shared.messages import ChannelReply, ElicitationDismiss, ElicitationInvoke, ElicitationResult, Progress

logger = logging.getLogger(__name__)


def result_of(reply: ChannelReply) -> dict[str, Any]:
    """main's answer as the host's result (MCP JSON, unchanged), or the MCPError it carries."""
    if reply.error is not None:
        raise MCPError(code=reply.error.code, message=reply.error.message)
    if reply.result is None:
        raise MCPError(code=RpcCode.INTERNAL_ERROR, message="main sent an empty answer")
    result = dict(reply.result)
    result.setdefault("resultType", "complete")
    meta = result.get("_meta")
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        # The server behind main stamped itself; the host is talking to the gateway, which stamps its own.
        meta = {key: value for key, value in meta.items() if key != SERVER_INFO_META_KEY}
        if meta:
            result["_meta"] = meta
        else:
            del result["_meta"]
    return result


def _lost(event: Lost) -> MCPError:
    return MCPError(code=RpcCode.SERVER_ERROR, message=f"the call was lost: {event.why}")


def elicit_request(params: dict[str, Any]) -> types.ElicitRequest:
    """main's invoke params (MCP's own JSON) as the request a host answers."""
    if params.get("mode") == "url":
        return types.ElicitRequest(params=types.ElicitRequestURLParams.model_validate(params))
    return types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(params))


def answer_of(result: types.ElicitResult) -> ElicitationResult:
    content = result.content if result.action == "accept" else None
    return ElicitationResult(action=result.action, content=dict(content) if content is not None else None)


async def drive_legacy(ctx: ServerRequestContext[Any, Any], call: HostCall) -> dict[str, Any]:
    # The answer is read after the task group: an MCPError raised inside it would reach the host
    # wrapped in an exception group (the SDK's code 0 and "unhandled errors in a TaskGroup").
    reply = await _drive_legacy_events(ctx, call)
    if isinstance(reply, Lost):
        raise _lost(reply)
    return result_of(reply)


async def _drive_legacy_events(ctx: ServerRequestContext[Any, Any], call: HostCall) -> ChannelReply | Lost:
    forwarding: dict[str, anyio.CancelScope] = {}
    dismissed: set[str] = set()
    async with anyio.create_task_group() as group:
        while True:
            event = await call.next_event()
            match event:
                case ChannelReply():
                    group.cancel_scope.cancel()
                    return event
                case Progress():
                    await ctx.session.report_progress(event.progress, event.total, event.message)
                case ElicitationInvoke():
                    if event.response_channel in dismissed:
                        continue  # answered elsewhere before the host was asked
                    scope = forwarding[event.response_channel] = anyio.CancelScope()
                    call.outstanding[event.response_channel] = event
                    group.start_soon(_ask_legacy_host, ctx, call.session, event, scope)
                case ElicitationDismiss():
                    dismissed.add(event.response_channel)
                    asking = forwarding.pop(event.response_channel, None)
                    if asking is not None:
                        asking.cancel()  # the SDK tells the host its request is cancelled
                case Lost():
                    group.cancel_scope.cancel()
                    return event
    raise AssertionError("unreachable: the loop above only returns")


async def _ask_legacy_host(ctx: ServerRequestContext[Any, Any], session: HostSession, invoke: ElicitationInvoke,
                           scope: anyio.CancelScope) -> None:
    with scope:
        try:
            request = elicit_request(invoke.request.params)
            result = await ctx.session.send_request(request, types.ElicitResult, metadata=ServerMessageMetadata(
                related_request_id=ctx.request_id))
            answer = answer_of(result)
        except (MCPError, ValidationError, NoBackChannelError) as exc:
            logger.info("the host could not answer %s: %s", invoke.response_channel, exc)
            answer = ElicitationResult(action="cancel")
        session.answer(invoke.response_channel, answer)


async def drive_modern(ctx: ServerRequestContext[Any, Any], call: HostCall) -> dict[str, Any] | types.InputRequiredResult:
    while True:
        event = await call.next_event()
        match event:
            case ChannelReply():
                return result_of(event)
            case Progress():
                await ctx.session.report_progress(event.progress, event.total, event.message)
            case ElicitationInvoke():
                asks = [event]
                while call.events and isinstance(call.events[0], ElicitationInvoke):
                    asks.append(call.events.popleft())  # type: ignore[arg-type]
                dismissed = {e.response_channel for e in call.events if isinstance(e, ElicitationDismiss)}
                asks = [invoke for invoke in asks if invoke.response_channel not in dismissed]
                requests: dict[str, types.InputRequest] = {}
                for invoke in asks:
                    try:
                        requests[invoke.response_channel] = elicit_request(invoke.request.params)
                    except ValidationError as exc:
                        logger.info("request %s cannot go to the host: %s", invoke.response_channel, exc)
                        call.session.answer(invoke.response_channel, ElicitationResult(action="cancel"))
                        continue
                    call.outstanding[invoke.response_channel] = invoke
                if requests:
                    return types.InputRequiredResult(input_requests=requests, request_state=call.session.suspend(call))
            case ElicitationDismiss():
                pass  # the session already took it off `outstanding`
            case Lost():
                raise _lost(event)


def take_answers(call: HostCall, responses: dict[str, Any] | None) -> None:
    """A 2026-07-28 host's retry: its answers go to main, except for requests dismissed meanwhile."""
    for channel, response in (responses or {}).items():
        invoke = call.outstanding.pop(channel, None)
        if invoke is None:
            continue  # answered elsewhere first, or not ours
        if isinstance(response, types.ElicitResult):
            call.session.answer(channel, answer_of(response))
        else:
            call.session.answer(channel, ElicitationResult(action="cancel"))
