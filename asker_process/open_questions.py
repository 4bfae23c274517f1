"""An asker's open questions, with no socket: each with its deadline, the future its caller awaits
and the response channel it is asked on now (a fresh one each time a new main is asked it again).
"""

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from shared import channels
from shared.codec import DEFAULT_MAX_BODY_BYTES, encode_request
from shared.errors import QuestionRefusedError, RpcCode, UndeliverableRequestError
from shared.messages import Ask, AskerInfo, ChannelReply, QuestionAnswer


def _new_channel() -> str:
    return f"ask-{uuid.uuid4()}"  # any fresh name does (uuid4: no uuid6 import on the asking path)


@dataclass(eq=False)
class Question:
    """One open question; `reply` gets main's answer on its current response channel (a loss
    leaves it open: it is asked again once a main is back, `OpenQuestions.renew`)."""

    params: dict[str, Any]
    deadline: float  # monotonic
    answer: asyncio.Future[QuestionAnswer]
    asker: AskerInfo
    channel: str = field(default_factory=_new_channel)
    sent: bool = False  # to the main attached now (a re-attach asks only these again)
    resumes: str | None = None  # the channel it was asked on before a loss (a shared store keeps its answer)

    def frames(self, timeout_s: float) -> list[bytes]:
        """The question as main reads it, on its channel; QuestionRefusedError when it is too large."""
        body = Ask(response_channel=self.channel, params=self.params, asker=self.asker,
                   timeout_seconds=timeout_s, resumes=self.resumes)
        try:
            return encode_request(channels.ASK, body, DEFAULT_MAX_BODY_BYTES)
        except UndeliverableRequestError as exc:
            raise QuestionRefusedError(RpcCode.INVALID_PARAMS, f"question not sent: {exc}") from None

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


class OpenQuestions:
    """The open questions by the channel each is asked on now."""

    def __init__(self) -> None:
        self._by_channel: dict[str, Question] = {}

    def __bool__(self) -> bool:
        return bool(self._by_channel)

    def add(self, question: Question) -> None:
        self._by_channel[question.channel] = question

    def remove(self, question: Question) -> None:
        self._by_channel.pop(question.channel, None)

    def holds(self, question: Question) -> bool:
        return self._by_channel.get(question.channel) is question

    def unanswered(self) -> list[Question]:
        return [question for question in self._by_channel.values() if not question.answer.done()]

    def fail(self, error: Exception) -> None:
        for question in self.unanswered():
            question.answer.set_exception(error)

    def renew(self, now: float) -> list[tuple[Question, float]]:
        """After a loss: every question the lost main was asked, each on a fresh channel naming
        the one before (`resumes`), with the seconds it has left; one whose time ran out meanwhile
        ends `expired`."""
        again: list[tuple[Question, float]] = []
        for old_channel, question in list(self._by_channel.items()):
            if not question.sent or question.answer.done():
                continue  # not asked yet (its own call asks it), or over
            del self._by_channel[old_channel]
            left = question.deadline - now
            if left <= 0:
                question.answer.set_result(QuestionAnswer(action="cancel", outcome="expired"))
                continue
            question.resumes, question.channel = old_channel, _new_channel()
            self.add(question)
            again.append((question, left))
        return again
