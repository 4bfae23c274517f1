"""How main answers a peer on its response channel: at once, later (work awaited in a task of its
own), or with progress first. A peer that left gets nothing; a channel it could confuse with a
topic or a result channel is refused before any work starts."""

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from main_process.log_limiter import RateLimitedLog, cut
from main_process.wire.attachments import Attachments
from main_process.wire.peers import Peer
from main_process.wire.topic_routes import ProgressTo, ReplyTo
from shared import channels
from shared.codec import encode
from shared.errors import ProtocolError, RpcCode, WireCode
from shared.messages import CallError, ChannelReply, Progress

logger = logging.getLogger(__name__)


class Replies:
    def __init__(self, attachments: Attachments) -> None:
        self._attachments = attachments
        self._tasks: set[asyncio.Task[Any]] = set()
        self._complaints = RateLimitedLog(logger)

    def replier(self, peer: Peer, topic: str, channel: str) -> ReplyTo:
        """How to answer on a peer's response channel; refuses a channel it could confuse."""
        if not channel.isascii() or not channel.isprintable() or " " in channel or channel in channels.TO_PEER \
                or channels.is_result_channel(channel):
            raise ProtocolError(WireCode.BAD_BODY, f"responseChannel {cut(channel)!r} is not usable", topic)
        routing_id = peer.routing_id
        attachments = self._attachments

        def reply(answer: ChannelReply) -> None:
            attachments.send_to_peer(routing_id, encode(channel, answer))  # a peer that left gets nothing

        return reply

    def progress_sender(self, peer: Peer, channel: str) -> ProgressTo:
        routing_id = peer.routing_id
        attachments = self._attachments

        def progress(value: float, total: float | None, message: str | None) -> None:
            attachments.send_to_peer(routing_id, encode(channels.PROGRESS, Progress(
                response_channel=channel, progress=value, total=total, message=message)))

        return progress

    def later(self, reply: ReplyTo, work: Awaitable[ChannelReply]) -> None:
        """`reply` gets what `work` returns, once it has (an internal error if it raised)."""
        task = asyncio.ensure_future(self._reply_later(reply, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reply_later(self, reply: ReplyTo, work: Awaitable[ChannelReply]) -> None:
        try:
            answer = await work
        # top-level handler of one peer request: report, never crash main
        except Exception as exc:  # noqa: BLE001
            self._complaints.exception(("request", type(exc).__name__), "a peer's request failed")
            answer = ChannelReply(error=CallError(code=RpcCode.INTERNAL_ERROR, message=f"internal error: {exc}"))
        reply(answer)

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
