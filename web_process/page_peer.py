"""PagePeer: one browser page's event stream as one renderer peer of main.

Each page gets its own window id and name, so main treats it as it treats a Qt window: it gets
every request (the welcome's `pending` replayed on attach, then each invoke), the first answer of
any window wins, and every window gets the dismiss. The wire side is shared/peer.py's core on
shared/peer_asyncio.py's adapter, as the gateways' link and the asker use it; a window keeps
trying to attach until a main answers, and after a loss attaches again by itself.

What goes to the page is plain JSON (`say`, never blocking: the app's sender drains it):

    {"type": "attached", "cards": [card...]}     every open request, after each welcome
    {"type": "invoke", "card": card}             one more (cards.py says what a card holds)
    {"type": "dismiss", "channel", "reason", "mine"}
    {"type": "refused", "channel", "message"}    main refused our answer (e.g. invalid-content)
    {"type": "detached", "why"}                  main is gone; the page keeps nothing to answer

and what comes back is `{"type": "answer", "channel", "action", "content"?}`, checked by
`read_page_message`, sent to main as `msgElicitationTransferResult-*`.
"""

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from shared import channels
from shared.errors import PageMessageError
from shared.messages import ChannelReply, ElicitationDismiss, ElicitationInvoke, ErrorNotice, Progress
from shared.peer import AttachFailed, Effect, Lost, PeerCore, Policy, Pushed, Refused, Welcomed
from shared.peer_asyncio import AsyncPeer
from shared.peer_requests import result
from web_process.cards import card_of

logger = logging.getLogger(__name__)

MAX_PAGE_MESSAGE_BYTES = 1_000_000


class PageAnswer(msgspec.Struct, tag_field="type", tag="answer"):
    channel: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


def read_page_message(text: str | bytes) -> PageAnswer:
    """The page's one message kind, or PageMessageError saying what is wrong with it."""
    if len(text) > MAX_PAGE_MESSAGE_BYTES:
        raise PageMessageError(f"a page message over {MAX_PAGE_MESSAGE_BYTES} bytes")
    try:
        return msgspec.json.decode(text, type=PageAnswer)
    except msgspec.ValidationError as exc:
        raise PageMessageError(f"bad page message: {exc}") from None
    except msgspec.DecodeError as exc:
        raise PageMessageError(f"a page message that is not JSON: {exc}") from None


class _AnswerWaiter:
    """The core's waiter on a channel we answered: main's refusal of the answer goes to the page."""

    def __init__(self, page: "PagePeer", channel: str) -> None:
        self._page, self._channel = page, channel

    def reply(self, answer: ChannelReply) -> None:
        pass

    def progress(self, update: Progress) -> None:
        pass

    def refused(self, notice: ErrorNotice) -> None:
        self._page.say({"type": "refused", "channel": self._channel, "message": notice.message})

    def lost(self, why: str) -> None:
        pass  # the page hears `detached` for the whole window


class PagePeer:
    def __init__(self, connection_path: Path, name: str, say: Callable[[dict[str, Any]], None]) -> None:
        self.say = say
        self.window = channels.new_uuid7()
        self.open: set[str] = set()  # channels of the cards the page shows
        core = PeerCore(role="renderer", name=name, window=self.window, policy=Policy(retry_first_attach=True))
        self._peer = AsyncPeer(connection_path, core, self._on_effect, fail_on_retry=False)

    @property
    def attached(self) -> bool:
        return self._peer.attached

    async def run(self) -> None:
        """Attach (waiting for a main as long as it takes); the peer keeps itself attached after."""
        await self._peer.attach()

    def close(self) -> None:
        self._peer.close()

    def answer(self, message: PageAnswer) -> None:
        if message.channel not in self.open or not self.attached:
            self.say({"type": "refused", "channel": message.channel,
                      "message": "this request is no longer open here"})
            return
        self._peer.core.expect(message.channel, _AnswerWaiter(self, message.channel))
        self._peer.send(message.channel, result(message.action, message.content))

    # ---- what main said ----------------------------------------------------------------------

    def _on_effect(self, effect: Effect) -> None:
        match effect:
            case Welcomed(welcome):
                self._forget_all()
                self.open = {invoke.response_channel for invoke in welcome.pending}
                self.say({"type": "attached", "cards": [card_of(invoke) for invoke in welcome.pending]})
            case Pushed(_, ElicitationInvoke() as invoke):
                self.open.add(invoke.response_channel)
                self.say({"type": "invoke", "card": card_of(invoke)})
            case Pushed(_, ElicitationDismiss() as dismiss):
                self.open.discard(dismiss.response_channel)
                self._peer.core.forget(dismiss.response_channel)
                self.say({"type": "dismiss", "channel": dismiss.response_channel, "reason": dismiss.reason,
                          "mine": dismiss.by == self.window})
            case Lost(why) | AttachFailed(why):
                self._forget_all()
                self.say({"type": "detached", "why": why})
            case Refused(notice):
                logger.warning("main refused %s: %s: %s", notice.topic, notice.code, notice.message)
            case _:
                pass  # servers, peers, rules, notices: not shown by this first web window

    def _forget_all(self) -> None:
        for channel in self.open:
            self._peer.core.forget(channel)
        self.open = set()
