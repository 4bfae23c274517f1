"""AskerClient: one asker peer of main (asyncio), written against shared/PROTOCOL.md alone.

It attaches when a question is asked and detaches (`bye`) once no question is open, so an idle
agent is not a peer, and every new question finds the main that runs *now* (re-reading the
connection file: after a restart the token is new). While questions are open it heartbeats and
listens for main's: a main that goes quiet for SILENCE_LIMIT_S, whose pid is gone, or that says
`not-attached` is lost; the client then attaches again (for up to REATTACH_GRACE_S, so a main being
restarted is found) and asks every open question again with the time it has left. A new socket
each time: if the old main still held this window, the new hello replaces it and main withdraws
the old copies, so no question shows twice.

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
from typing import Any, Final

import zmq
import zmq.asyncio

from shared import PROTOCOL_VERSION, channels
from shared.codec import DEFAULT_MAX_BODY_BYTES, decode_from_main, encode, encode_request
from shared.connection_file import (
    ConnectionInfo,
    main_is_gone,
    read_connection_file,
    resolve_connection_path,
    set_curve_client,
)
from shared.errors import (
    ConnectionFileError,
    MainNotRunningError,
    ProtocolError,
    QuestionRefusedError,
    RpcCode,
    UndeliverableRequestError,
    WireCode,
)
from shared.messages import (
    Ask,
    AskerInfo,
    Bye,
    ChannelReply,
    ErrorNotice,
    Heartbeat,
    Hello,
    QuestionAnswer,
    Welcome,
    Withdraw,
)
from shared.questions import check_asker, check_question, check_timeout

logger = logging.getLogger(__name__)

HEARTBEAT_S: Final = 1.0  # contract: a peer silent for 1 s sends a heartbeat
SILENCE_LIMIT_S: Final = 3.0  # contract: main heartbeats every second; 3 s of nothing means it is gone
ATTACH_TIMEOUT_S: Final = 5.0
REATTACH_GRACE_S: Final = 10.0  # how long a lost main may take to come back before open questions fail
REATTACH_EVERY_S: Final = 0.25
CLOSE_LINGER_MS: Final = 500  # a withdraw or bye queued at close still leaves


def _new_channel() -> str:
    return f"ask-{uuid.uuid4()}"  # any fresh name does (uuid4: no uuid6 import on the asking path)


@dataclass(eq=False)
class _Question:
    params: dict[str, Any]
    deadline: float  # monotonic
    answer: asyncio.Future[QuestionAnswer]
    asker: AskerInfo
    channel: str = field(default_factory=_new_channel)
    sent: bool = False  # to the main attached now (a re-attach asks only these again)


class AskerClient:
    def __init__(self, asker: AskerInfo, connection: str | os.PathLike[str] | None = None, *,
                 attach_timeout_s: float = ATTACH_TIMEOUT_S,
                 reattach_grace_s: float = REATTACH_GRACE_S) -> None:
        check_asker(asker)
        self.asker = asker
        self.connection_path = resolve_connection_path(connection)
        self.window = str(uuid.uuid4())  # the same peer to main across re-attaches
        self._attach_timeout_s = attach_timeout_s
        self._reattach_grace_s = reattach_grace_s
        self._questions: dict[str, _Question] = {}  # by current response channel
        self._sock: zmq.asyncio.Socket | None = None
        self._info: ConnectionInfo | None = None
        self._pump: asyncio.Task[None] | None = None  # the listener, or the task re-attaching
        self._attaching: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._last_sent = 0.0
        self._last_heard = 0.0
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
            await self._ensure_attached()
            if not question.sent:  # a re-attach meanwhile may have asked it already
                question.sent = True
                self._send_frames(frames)
            return await question.answer
        except asyncio.CancelledError:
            self._withdraw(question)
            raise
        finally:
            self._questions.pop(question.channel, None)
            if not self._questions:
                self._detach()

    def _ask_frames(self, question: _Question, timeout_s: float) -> list[bytes]:
        body = Ask(response_channel=question.channel, params=question.params, asker=question.asker,
                   timeout_seconds=timeout_s)
        try:
            return encode_request(channels.ASK, body, DEFAULT_MAX_BODY_BYTES)
        except UndeliverableRequestError as exc:
            raise QuestionRefusedError(RpcCode.INVALID_PARAMS, f"question not sent: {exc}") from None

    def _withdraw(self, question: _Question) -> None:
        if self._sock is not None and question.sent and self._questions.get(question.channel) is question:
            self._send(channels.WITHDRAW, Withdraw(response_channel=question.channel))

    async def aclose(self) -> None:
        """Withdraw whatever is still open and detach."""
        for question in list(self._questions.values()):
            if not question.answer.done():
                question.answer.cancel()
        self._detach()

    # ---- attaching -----------------------------------------------------------------------

    async def _ensure_attached(self) -> None:
        async with self._attach_lock():
            if self._sock is None:
                await self._attach()

    def _attach_lock(self) -> asyncio.Lock:
        """One attach at a time; a lock per event loop, so a callback outlives an `asyncio.run`."""
        loop = asyncio.get_running_loop()
        if self._attaching is None or self._attaching[0] is not loop:
            self._attaching = (loop, asyncio.Lock())
        return self._attaching[1]

    async def _attach(self) -> None:
        """Read the connection file, connect, hello, wait for welcome. Raises MainNotRunningError."""
        try:
            info = read_connection_file(self.connection_path)
        except ConnectionFileError as exc:
            raise MainNotRunningError(str(exc)) from None
        if main_is_gone(info):
            raise MainNotRunningError(f"no main is running (stale connection file {self.connection_path}: "
                                      f"pid {info.pid} is gone)")
        sock = zmq.asyncio.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, CLOSE_LINGER_MS)
        try:
            set_curve_client(sock, info, self.connection_path)  # tcp: the keypair `elicitron pair` wrote
        except ConnectionFileError as exc:
            sock.close(linger=0)
            raise MainNotRunningError(str(exc)) from None
        sock.connect(info.endpoint)
        self._sock, self._info = sock, info
        self._send(channels.HELLO, Hello(protocol=PROTOCOL_VERSION, token=info.token, window=self.window,
                                         name=self.asker.name, role="asker"))
        try:
            async with asyncio.timeout(self._attach_timeout_s):
                while True:
                    _topic, body = await self._receive(sock)
                    if isinstance(body, Welcome):
                        break
                    if isinstance(body, ErrorNotice) and body.topic == channels.HELLO:
                        raise MainNotRunningError(f"main refused this asker: {body.code}: {body.message}")
        except TimeoutError:
            self._drop_socket()
            raise MainNotRunningError(f"no answer from main at {info.endpoint} within "
                                      f"{self._attach_timeout_s:.0f} s ({self.connection_path})") from None
        except BaseException:
            self._drop_socket()
            raise
        self.session = body.session
        self._last_heard = time.monotonic()
        logger.debug("attached to main %s as asker %r", body.session, self.asker.name)
        self._pump = asyncio.ensure_future(self._listen(sock))

    def _detach(self) -> None:
        if self._sock is None:
            return
        self._send(channels.BYE, Bye())
        self._drop_socket()

    def _drop_socket(self) -> None:
        sock, self._sock = self._sock, None
        pump, self._pump = self._pump, None
        if pump is not None and pump is not asyncio.current_task():
            pump.cancel()
        if sock is not None:
            sock.close()  # LINGER: a queued withdraw or bye still leaves

    # ---- listening -----------------------------------------------------------------------

    async def _listen(self, sock: zmq.asyncio.Socket) -> None:
        """Replies to questions, heartbeats both ways; re-attach when main is lost."""
        while True:
            now = time.monotonic()
            if now - self._last_sent >= HEARTBEAT_S:
                self._send(channels.HEARTBEAT, Heartbeat())
            lost = self._lost_reason(now)
            if lost is not None:
                await self._reattach(lost)
                return
            # flags default to POLLIN (pyzmq's _future.pyi omits the parameter)
            if not await sock.poll(int(HEARTBEAT_S * 1000 / 2)):
                continue
            topic, body = await self._receive(sock)
            if isinstance(body, ChannelReply):
                self._on_reply(topic, body)
            elif isinstance(body, ErrorNotice):
                if body.code == WireCode.NOT_ATTACHED:
                    await self._reattach("main no longer knows this asker")
                    return
                self._on_refused(body)

    def _lost_reason(self, now: float) -> str | None:
        if now - self._last_heard > SILENCE_LIMIT_S:
            return f"main silent for {now - self._last_heard:.1f} s"
        info = self._info
        if info is not None and main_is_gone(info):
            return f"main (pid {info.pid}) is gone"
        return None

    async def _receive(self, sock: zmq.asyncio.Socket) -> tuple[str, Any]:
        while True:
            frames = await sock.recv_multipart()
            self._last_heard = time.monotonic()
            try:
                return decode_from_main(frames)
            except ProtocolError as exc:
                logger.warning("ignored a bad frame from main: %s", exc)

    def _on_reply(self, channel: str, reply: ChannelReply) -> None:
        question = self._questions.get(channel)
        if question is None or question.answer.done():
            return  # a withdrawn question's confirmation, or an answer nobody waits for
        if reply.answer is not None:
            question.answer.set_result(reply.answer)
        elif reply.error is not None:
            question.answer.set_exception(QuestionRefusedError(reply.error.code, reply.error.message))
        else:
            question.answer.set_exception(QuestionRefusedError(
                RpcCode.INTERNAL_ERROR, "main answered the question with nothing usable"))

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

    async def _reattach(self, why: str) -> None:
        """main was lost: find it again (a new socket, a fresh file) and ask again what was open."""
        logger.warning("%s; attaching again", why)
        stale = list(self._questions.items())  # questions asked after this are the new main's already
        self._drop_socket()
        self._pump = asyncio.current_task()  # so the last question ending stops this search too
        deadline = time.monotonic() + self._reattach_grace_s
        async with self._attach_lock():
            while self._sock is None:
                if all(question.answer.done() for _, question in stale):
                    return  # nobody is waiting any more
                try:
                    await self._attach()  # starts a new listener
                except MainNotRunningError as exc:
                    if time.monotonic() >= deadline:
                        error = MainNotRunningError(f"main stopped while a question was open: {exc}")
                        for _, question in stale:
                            if not question.answer.done():
                                question.answer.set_exception(error)
                        return
                    await asyncio.sleep(REATTACH_EVERY_S)  # a restarting main writes its file within moments
        now = time.monotonic()
        for old_channel, question in stale:
            moved = self._questions.get(old_channel) is not question
            if not question.sent or question.answer.done() or moved:
                continue  # not asked yet (its own call asks it), over, or handled already
            del self._questions[old_channel]
            left = question.deadline - now
            if left <= 0:
                question.answer.set_result(QuestionAnswer(action="cancel", outcome="expired"))
                continue
            question.channel = _new_channel()
            self._questions[question.channel] = question
            self._send_frames(self._ask_frames(question, left))
        if not self._questions:
            self._detach()

    # ---- sending -------------------------------------------------------------------------

    def _send(self, topic: str, body: Any) -> None:
        self._send_frames(encode(topic, body))

    def _send_frames(self, frames: list[bytes]) -> None:
        if self._sock is None:
            return
        # NOBLOCK on an asyncio socket: the send happens now and the future is already done.
        sent = self._sock.send_multipart(frames, zmq.NOBLOCK)
        problem = sent.exception()  # type: ignore[attr-defined]
        if problem is not None:
            logger.debug("%r not sent: %s", frames[0], problem)
            return
        self._last_sent = time.monotonic()
