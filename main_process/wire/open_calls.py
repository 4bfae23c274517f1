"""The calls main has open for its peers, so that stopping answers each while it still can.

A call's answer travels on the broker's ROUTER. When main stops, every call still open is answered
("main is stopping") while that socket is open, then cancelled at its server; whatever the call's
own task says later (its server stopping, a call that was waiting for a server to start and is
cancelled when the event loop ends) is dropped here instead of being sent on a closed socket.
Calls that arrive while main stops are answered the same way at once. No sockets in here.
"""

from collections.abc import Callable
from dataclasses import dataclass

from main_process.wire.peer_calls import Cancel, ReplyTo
from main_process.wire.topic_routes import ProgressTo
from shared.messages import ChannelReply

Run = Callable[[ReplyTo, ProgressTo | None], Cancel | None]


@dataclass(eq=False)
class _Open:
    reply: ReplyTo
    cancel: Cancel | None = None


class OpenCalls:
    def __init__(self) -> None:
        self._open: set[_Open] = set()
        self._closed_with: ChannelReply | None = None

    def __len__(self) -> int:
        return len(self._open)

    def start(self, reply: ReplyTo, progress: ProgressTo | None, run: Run) -> Cancel | None:
        """`run(answer, report)` starts the call; `answer` passes its first answer on to `reply`, and
        `report` its progress to `progress`, while the call is open. Returns what `run` returned (how
        to cancel the call), None once main stops."""
        if self._closed_with is not None:
            reply(self._closed_with)
            return None
        call = _Open(reply)
        self._open.add(call)

        def answer(result: ChannelReply) -> None:
            if call in self._open:  # once, and never after close() answered it
                self._open.discard(call)
                reply(result)

        def report(value: float, total: float | None, message: str | None) -> None:
            if progress is not None and call in self._open:
                progress(value, total, message)

        cancel = run(answer, report if progress is not None else None)
        if call in self._open:
            call.cancel = cancel
        return cancel

    def close(self, answer: ChannelReply) -> int:
        """main stops: every open call gets `answer` now, then is cancelled at its server. Returns how
        many there were."""
        self._closed_with = answer
        calls, self._open = self._open, set()
        for call in calls:
            call.reply(answer)
        for call in calls:  # after every answer is out: a cancel may answer (dropped) or send
            if call.cancel is not None:
                call.cancel()
        return len(calls)
