"""AskerClient: one asker peer of main (asyncio), written against shared/PROTOCOL.md alone.

It attaches when a question is asked and detaches (`bye`) once no question is open, so an idle
agent is not a peer, and every new question finds the main that runs *now* (re-reading the
connection file: after a restart the token is new). While questions are open it heartbeats and
listens for main's (shared/peer.py's core on shared/peer_asyncio.py's adapter): a main that goes
quiet for 3 s, whose pid is gone, that says `bye` or `not-attached` is lost; the client then
attaches again (for up to REATTACH_GRACE_S, so a main being restarted is found) and asks every open
question again with the time it has left. A new socket after a loss: if the old main still held
this window, the new hello replaces it and main withdraws the old copies, so no question shows twice.

Given several connection files (the mains of one shared PostgreSQL store), it attaches to the first
whose main runs, and after a loss to the next one that does; each question asked again names the
channel it was asked on before (`resumes`), so a main of the store hands over the answer a window
gave while the asker was away, once (docs/teams.md).

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
from typing import Any

from asker_process.open_questions import OpenQuestions, Question
from shared import channels, peer
from shared.connection_file import resolve_connection_path
from shared.errors import MainNotRunningError, QuestionRefusedError, RpcCode
from shared.messages import AskerInfo, ErrorNotice, QuestionAnswer, Withdraw
from shared.peer_asyncio import AsyncPeer
from shared.peer_requests import Answer
from shared.questions import check_asker, check_question, check_timeout

logger = logging.getLogger(__name__)

Connection = str | os.PathLike[str] | list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...] | None
"""A connection file, or several: the mains of one shared store, each tried in turn when one is gone."""


class AskerClient:
    def __init__(self, asker: AskerInfo, connection: Connection = None, *,
                 attach_timeout_s: float = peer.ATTACH_TIMEOUT_S,
                 reattach_grace_s: float = peer.REATTACH_GRACE_S) -> None:
        check_asker(asker)
        self.asker = asker
        paths = [resolve_connection_path(c) for c in connection] \
            if isinstance(connection, list | tuple) else [resolve_connection_path(connection)]
        self.connection_path = paths[0]
        self.window = str(uuid.uuid4())  # the same peer to main across re-attaches
        self._questions = OpenQuestions()
        timing = peer.Timing(attach_timeout=attach_timeout_s, give_up_after=reattach_grace_s)
        self._core = peer.PeerCore(role="asker", name=asker.name, window=self.window, timing=timing)
        self._peer = AsyncPeer(self.connection_path, self._core, self._on_effect, unreachable=MainNotRunningError,
                               fail_on_retry=False, alternates=paths)
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
        question = Question(params=params, deadline=time.monotonic() + timeout_s,
                            answer=asyncio.get_running_loop().create_future(), asker=asker or self.asker)
        frames = question.frames(timeout_s)  # refuses an oversized question before attaching
        self._questions.add(question)  # first: another question ending keeps us attached
        try:
            await self._peer.attach()
            if not question.sent:  # a re-attach meanwhile may have asked it already
                self._send_question(question, frames)
            return await question.answer
        except asyncio.CancelledError:
            self._withdraw(question)
            raise
        finally:
            self._questions.remove(question)
            self._core.forget(question.channel)
            if not self._questions:
                self._peer.detach()

    def _send_question(self, question: Question, frames: list[bytes]) -> None:
        question.sent = True
        self._core.expect(question.channel, Answer(question.reply))
        self._peer.send_frames(frames)

    def _withdraw(self, question: Question) -> None:
        if question.sent and self._questions.holds(question):
            self._peer.send(channels.WITHDRAW, Withdraw(response_channel=question.channel))

    async def aclose(self) -> None:
        """Withdraw whatever is still open and detach."""
        for question in self._questions.unanswered():
            question.answer.cancel()
        self._peer.detach()

    # ---- what main said ------------------------------------------------------------------

    def _on_effect(self, effect: peer.Effect) -> None:
        match effect:
            case peer.Welcomed(welcome, again):
                self.session = welcome.session
                logger.debug("attached to main %s as asker %r", welcome.session, self.asker.name)
                if again:  # a main is back after a loss: ask it what the lost one had, in the time left
                    for question, left in self._questions.renew(time.monotonic()):
                        self._send_question(question, question.frames(left))
            case peer.GaveUp(why):
                self._questions.fail(MainNotRunningError(f"main stopped while a question was open: {why}"))
            case peer.Refused(notice):
                self._on_refused(notice)
            case _:
                pass  # a loss: the core attaches again; a failed try: it tries again

    def _on_refused(self, notice: ErrorNotice) -> None:
        """main refused one of our messages unread (e.g. a question over its size limit). The
        notice does not say which question: fail every open one and take them back."""
        logger.warning("main refused %s: %s: %s", notice.topic, notice.code, notice.message)
        if notice.topic != channels.ASK:
            return
        for question in self._questions.unanswered():
            self._withdraw(question)
            question.answer.set_exception(QuestionRefusedError(
                RpcCode.INVALID_PARAMS, f"main refused the question: {notice.code}: {notice.message}"))
