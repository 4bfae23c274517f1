"""AskerClient: one asker peer of main (asyncio), written against shared/PROTOCOL.md alone.

It attaches when a question is asked and detaches (`bye`) once no question is open, so an idle
agent is not a peer, and every new question finds the main that runs *now* (re-reading the
connection file: after a restart the token is new). While questions are open it heartbeats and
listens for main's (shared/peer.py's core on shared/peer_asyncio.py's adapter): a main that goes
quiet for 3 s, whose pid is gone, that says `bye` or `not-attached` is lost; the client then
attaches again (for up to REATTACH_GRACE_S, so a main being restarted is found) and asks every open
question again with the time it has left. A new socket after a loss: if the old main still held
this window, the new hello replaces it and main withdraws the old copies, so no question shows twice.

Failure is an exception, never a wait without end: MainNotRunningError when no main runs (no
connection file, a stale pid, no welcome within the attach timeout, or main lost for good);
QuestionRefusedError when main refuses the question (bad schema, bad timeout). A cancelled `ask`
withdraws its question (`msgWithdraw`): the windows drop the card.
"""

import asyncio
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from shared import channels, peer
from shared.codec import DEFAULT_MAX_BODY_BYTES, encode_request
from shared.connection_file import resolve_connection_path
from shared.errors import MainNotRunningError, QuestionRefusedError, RpcCode, UndeliverableRequestError
from shared.messages import Ask, AskerInfo, ChannelReply, ErrorNotice, QuestionAnswer, Withdraw
from shared.peer_asyncio import AsyncPeer
from shared.peer_requests import Answer
from shared.questions import check_asker, check_question, check_timeout

logger = logging.getLogger(__name__)


def _new_channel() -> str:
    return f"ask-{uuid.uuid4()}"  # any fresh name does (uuid4: no uuid6 import on the asking path)


@dataclass(eq=False)
class _Question:
    """One open question; `reply` gets main's answer on its current response channel (a loss
    leaves it open: it is asked again once a main is back, `_ask_again`)."""

    params: dict[str, Any]
    deadline: float  # monotonic
    answer: asyncio.Future[QuestionAnswer]
    asker: AskerInfo
    channel: str = field(default_factory=_new_channel)
    sent: bool = False  # to the main attached now (a re-attach asks only these again)

    def reply(self, reply: ChannelReply) -> None:
        if self.answer.done():
            return  # a withdrawn question's confirmation
        if reply.answer is not None:
            self.answer.set_result(reply.answer)
        elif reply.error is not None:
            self.answer.set_exception(QuestionRefusedError(reply.error.code, reply.error.message))
        else:
            self.answer.set_exception(QuestionRefusedError(
                RpcCode.INTERNAL_ERROR, "main answered the question with nothing usable"))


class AskerClient:
    def __init__(self, asker: AskerInfo, connection: str | os.PathLike[str] | None = None, *,
                 attach_timeout_s: float = peer.ATTACH_TIMEOUT_S,
                 reattach_grace_s: float = peer.REATTACH_GRACE_S) -> None:
        check_asker(asker)
        self.asker = asker
        self.connection_path = resolve_connection_path(connection)
        self.window = str(uuid.uuid4())  # the same peer to main across re-attaches
        self._questions: dict[str, _Question] = {}  # by current response channel
        timing = peer.Timing(attach_timeout=attach_timeout_s, give_up_after=reattach_grace_s)
        self._core = peer.PeerCore(role="asker", name=asker.name, window=self.window, timing=timing)
        self._peer = AsyncPeer(self.connection_path, self._core, self._on_effect, unreachable=MainNotRunningError,
                               fail_on_retry=False)
        self.session: str | None = None  # of the main attached to, for callers and tests

    # ---- asking --------------------------------------------------------------------------

    async def ask(self, params: dict[str, Any], timeout_s: float | None = None, *,
                  asker: AskerInfo | None = None) -> QuestionAnswer:
        """Show one question in the windows and wait for how it ends; `asker` names who asks
        this one, if not the client's own.

        Raises QuestionRefusedError (before anything is sent, or when main refuses it),
        MainNotRunningError; cancelling the call withdraws the question."""
        params = check_question(params)
        timeout_s = check_timeout(timeout_s)
        if asker is not None:
            check_asker(asker)
        question = _Question(params=params, deadline=time.monotonic() + timeout_s,
                             answer=asyncio.get_running_loop().create_future(), asker=asker or self.asker)
        frames = self._ask_frames(question, timeout_s)  # refuses an oversized question before attaching
        self._questions[question.channel] = question  # first: another question ending keeps us attached
        try:
            await self._peer.attach()
            if not question.sent:  # a re-attach meanwhile may have asked it already
                self._send_question(question, frames)
            return await question.answer
        except asyncio.CancelledError:
            self._withdraw(question)
            raise
        finally:
            self._questions.pop(question.channel, None)
            self._core.forget(question.channel)
            if not self._questions:
                self._peer.detach()

    def _ask_frames(self, question: _Question, timeout_s: float) -> list[bytes]:
        body = Ask(response_channel=question.channel, params=question.params, asker=question.asker,
                   timeout_seconds=timeout_s)
        try:
            return encode_request(channels.ASK, body, DEFAULT_MAX_BODY_BYTES)
        except UndeliverableRequestError as exc:
            raise QuestionRefusedError(RpcCode.INVALID_PARAMS, f"question not sent: {exc}") from None

    def _send_question(self, question: _Question, frames: list[bytes]) -> None:
        question.sent = True
        self._core.expect(question.channel, Answer(question.reply))
        self._peer.send_frames(frames)

    def _withdraw(self, question: _Question) -> None:
        if question.sent and self._questions.get(question.channel) is question:
            self._peer.send(channels.WITHDRAW, Withdraw(response_channel=question.channel))

    async def aclose(self) -> None:
        """Withdraw whatever is still open and detach."""
        for question in list(self._questions.values()):
            if not question.answer.done():
                question.answer.cancel()
        self._peer.detach()

    # ---- what main said ------------------------------------------------------------------

    def _on_effect(self, effect: peer.Effect) -> None:
        match effect:
            case peer.Welcomed(welcome, again):
                self.session = welcome.session
                logger.debug("attached to main %s as asker %r", welcome.session, self.asker.name)
                if again:
                    self._ask_again()
            case peer.GaveUp(why):
                error = MainNotRunningError(f"main stopped while a question was open: {why}")
                for question in list(self._questions.values()):
                    if not question.answer.done():
                        question.answer.set_exception(error)
            case peer.Refused(notice):
                self._on_refused(notice)
            case _:
                pass  # a loss: the core attaches again; a failed try: it tries again

    def _ask_again(self) -> None:
        """A main is back after a loss: ask every question the lost one had, with the time it has left."""
        now = time.monotonic()
        for old_channel, question in list(self._questions.items()):
            if not question.sent or question.answer.done():
                continue  # not asked yet (its own call asks it), or over
            del self._questions[old_channel]
            left = question.deadline - now
            if left <= 0:
                question.answer.set_result(QuestionAnswer(action="cancel", outcome="expired"))
                continue
            question.channel = _new_channel()
            self._questions[question.channel] = question
            self._send_question(question, self._ask_frames(question, left))

    def _on_refused(self, notice: ErrorNotice) -> None:
        """main refused one of our messages unread (e.g. a question over its size limit). The
        notice does not say which question: fail every open one and take them back."""
        logger.warning("main refused %s: %s: %s", notice.topic, notice.code, notice.message)
        if notice.topic != channels.ASK:
            return
        for question in list(self._questions.values()):
            if not question.answer.done():
                self._withdraw(question)
                question.answer.set_exception(QuestionRefusedError(
                    RpcCode.INVALID_PARAMS, f"main refused the question: {notice.code}: {notice.message}"))
