"""Questions from programs (extension `msgAsk`): checked, perhaps answered by a rule, then opened
as pending requests of kind "question", and answered to the asker once, typed.

A question lives like a server's request (one-time channel, replay to windows that attach, first
answer wins, expiry, dismissals, audit with kind "question"): all of that is `PendingRequests`.
What is particular to questions is here:

- the checks of `shared.questions` run before anything opens, so a bad question reaches no window
  and its asker gets -32602 naming the problem;
- the gate (elicitation_gate.py) may answer a form question before it opens, by a rule of that
  asker (never a server's): the answer is audited with the rule's id, then the asker hears it;
  url-mode questions are always put to a person;
- the asker's peer owns its questions: when it detaches (bye, or silence after kill -9) the broker's
  `withdraw_owner` closes them `cancelled`, and `msgWithdraw` closes one the same way;
- on a store many mains share a question outlives its main (kill -9): the asker re-attaches to
  another main and asks again naming the channel it asked on (`Ask.resumes`); the store hands over
  the answer given meanwhile, once, or the question opens here anew (shared_requests.py);
- the asker hears how it ended as `ChannelReply.answer`: accept, decline, cancel, expired, withdrawn.
"""

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from main_process.consent.elicitation_gate import Answered, ElicitationGate
from main_process.consent.pending import (
    DEFAULT_MAX_REQUEST_BYTES,
    Elicitation,
    PendingRequest,
    PendingRequests,
    RequestOptions,
)
from main_process.store.records import ResumedQuestion
from main_process.tasks import Tasks
from main_process.wire.topic_routes import ReplyTo
from shared import channels
from shared.errors import ProtocolError, QuestionRefusedError, RpcCode, UndeliverableRequestError, WireCode
from shared.messages import (
    Ask,
    CallError,
    ChannelReply,
    ElicitationResult,
    QuestionAnswer,
    QuestionOutcome,
    Withdraw,
)
from shared.questions import check_asker, check_question, check_timeout

logger = logging.getLogger(__name__)

MAX_OPEN_PER_ASKER: Final = 100  # one peer cannot fill every window's queue
Resume = Callable[[str, str], Awaitable[ResumedQuestion]]  # (the asker's channel before, its name)


class QuestionDesk:
    def __init__(self, pending: PendingRequests, gate: ElicitationGate,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, *, resume: Resume | None = None) -> None:
        self._pending = pending
        self._gate = gate
        self._max_request_bytes = max_request_bytes
        self._resume = resume  # a shared store's (shared_requests.py); None: questions end with their main
        self._open: dict[tuple[bytes, str], PendingRequest] = {}  # (asker's routing id, its channel)
        self._resuming: dict[tuple[bytes, str], bool] = {}  # asked again, the store not read yet -> withdrawn?
        self._tasks = Tasks()

    def ask(self, asker_id: bytes, request: Ask, reply: ReplyTo) -> None:
        """Open one question, or refuse it on its channel. Raises ProtocolError (bad-body) for a
        channel that already carries an open question of this asker: an error there would read as
        that question's answer."""
        key = (asker_id, request.response_channel)
        if key in self._open or key in self._resuming:
            raise ProtocolError(WireCode.BAD_BODY, f"responseChannel {request.response_channel!r} already "
                                "has an open question", channels.ASK)
        try:
            params = check_question(request.params)
            timeout_s = check_timeout(request.timeout_seconds)
            check_asker(request.asker)
            if sum(1 for owner, _ in self._open if owner == asker_id) >= MAX_OPEN_PER_ASKER:
                raise QuestionRefusedError(RpcCode.INVALID_PARAMS, f"this asker already has "
                                           f"{MAX_OPEN_PER_ASKER} open questions; withdraw some or wait")
            elicitation = Elicitation.read(request.asker.name, params)
        except QuestionRefusedError as exc:
            logger.info("refused a question from %r: %s", request.asker.name[:80], exc.message)
            reply(ChannelReply(error=CallError(code=exc.code, message=exc.message)))
            return
        except UndeliverableRequestError as exc:  # (check_question lets no such params through)
            reply(ChannelReply(error=CallError(code=RpcCode.INVALID_PARAMS, message=f"question not shown: {exc}")))
            return
        if request.resumes is not None and self._resume is not None:
            self._resuming[key] = False
            self._tasks.start(self._resume_then_open(asker_id, request, elicitation, timeout_s, reply))
            return
        self._open_question(asker_id, request, elicitation, timeout_s, reply)

    async def _resume_then_open(self, asker_id: bytes, request: Ask, elicitation: Elicitation, timeout_s: float,
                                reply: ReplyTo) -> None:
        """A question its asker asked on a main now gone (`resumes`), asked here: the answer the
        store kept for it, or how it ended, or else it opens here as a new question."""
        assert request.resumes is not None and self._resume is not None
        key = (asker_id, request.response_channel)
        resumed = await self._resume(request.resumes, request.asker.name)
        logger.info("question %s of %r asked again as %s: on the store it was %s", request.resumes,
                    request.asker.name[:80], request.response_channel, resumed.state)
        if self._resuming.pop(key, False):  # withdrawn meanwhile
            reply(ChannelReply(answer=QuestionAnswer(action="cancel", outcome="withdrawn")))
            return
        match resumed.state:
            case "answered" if resumed.action in ("accept", "decline", "cancel"):
                answer = ElicitationResult(action=resumed.action,  # type: ignore[arg-type]
                                           content=resumed.content if resumed.action == "accept" else None)
                reply(_answer(answer, answer.action))
            case "expired":
                reply(ChannelReply(answer=QuestionAnswer(action="cancel", outcome="expired")))
            case "taken":
                reply(ChannelReply(error=CallError(code=RpcCode.INVALID_PARAMS, message=(
                    f"question {request.resumes!r} was answered and its answer handed to its asker already"))))
            case _:  # open elsewhere (now ended there), unknown, or the store away: ask it here
                self._open_question(asker_id, request, elicitation, timeout_s, reply)

    def _open_question(self, asker_id: bytes, request: Ask, elicitation: Elicitation, timeout_s: float,
                       reply: ReplyTo) -> None:
        key = (asker_id, request.response_channel)
        decided = self._gate.decide(elicitation, asker=request.asker.name)  # a rule, or the windows
        if isinstance(decided, Answered):
            answer = decided.result
            # Audited with the rule's id (the asker's name where a server's would be), then answered.
            self._gate.record(elicitation, decided, RequestOptions(timeout_s=0, kind="question"),
                              lambda: reply(_answer(answer, answer.action)))
            return

        def resolve(result: ElicitationResult) -> None:
            pending = self._open.pop(key)
            closed = self._pending.closed_reason(pending.channel)
            outcome: QuestionOutcome = result.action if closed == "answered" else \
                "expired" if closed == "expired" else "withdrawn"
            reply(_answer(result, outcome))  # the broker drops it if the asker has left

        try:
            self._open[key] = self._pending.open(
                elicitation,
                RequestOptions(timeout_s=timeout_s, owner=asker_id, max_bytes=self._max_request_bytes,
                               kind="question", asker=request.asker, asked_on=request.response_channel),
                resolve)
        except UndeliverableRequestError as exc:
            reply(ChannelReply(error=CallError(code=RpcCode.INVALID_PARAMS,
                                               message=f"question not shown: {exc}")))

    def asker_gone(self, asker_id: bytes) -> None:
        """Its questions still being looked up on the store (`resumes`) are not opened: nobody
        would take their answer here (the open ones are withdrawn by pending's `withdraw_owner`)."""
        for key in self._resuming:
            if key[0] == asker_id:
                self._resuming[key] = True

    def withdraw(self, asker_id: bytes, request: Withdraw) -> None:
        """The asker takes one question back; one already closed (or never asked) is no error."""
        key = (asker_id, request.response_channel)
        if key in self._resuming:
            self._resuming[key] = True  # answered `withdrawn` once the store has said how it stands
            return
        pending = self._open.get(key)
        if pending is not None:
            self._pending.withdraw(pending, "cancelled")


def _answer(result: ElicitationResult, outcome: QuestionOutcome) -> ChannelReply:
    return ChannelReply(answer=QuestionAnswer(action=result.action, outcome=outcome, content=result.content))
