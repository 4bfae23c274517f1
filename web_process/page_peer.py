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
    {"type": "rules", "rules": [row...]}         after each welcome and every change (remembered.py)
    {"type": "revoked", "lines", "problem"}      main's answer to the page's revoke
    {"type": "completed", "server", "elicitationId"}   a link's step is done (a sign-in arrived)
    {"type": "signed-in" | "sign-in-refused", "elicitationId", "message"}  a pasted sign-in address
    {"type": "server-policy", "server", "declineAll", "sent"}   the page's policy went to main (or not)

and what comes back, checked by `read_page_message`:

    {"type": "answer", "channel", "action", "content"?, "remember"?}   -> msgElicitationTransferResult-*
    {"type": "revoke", "ids": [id...], "all": bool}                   -> msgRevokeRules
    {"type": "sign-in-redirect", "server", "elicitationId", "url"}    -> msgSignInRedirect (a browser
                                     on another machine than main cannot reach its 127.0.0.1)
    {"type": "server-policy", "server", "declineAll": bool}          -> msgServerPolicy (no answer)
"""

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from shared import channels
from shared import peer_requests as requests
from shared.errors import PageMessageError
from shared.messages import (
    MAX_ID_CHARS,
    CallError,
    ChannelReply,
    DeviceRef,
    ElicitationComplete,
    ElicitationDismiss,
    ElicitationInvoke,
    ErrorNotice,
    Progress,
    Remember,
    RulesUpdate,
    ServerPolicy,
)
from shared.peer import (
    TICK_S,
    AttachFailed,
    Effect,
    Lost,
    PeerCore,
    Policy,
    Pushed,
    Refused,
    Timing,
    Welcomed,
)
from shared.peer_asyncio import AsyncPeer
from shared.peer_requests import result
from web_process.cards import card_of
from web_process.remembered import revoked_message, rules_message

logger = logging.getLogger(__name__)
# Every open page is a peer with its own ticker: half as many wake-ups as a window's (a heartbeat
# still leaves within 1.5 s, well inside main's 5 s), so 50 pages cost the web window little.
PAGE_TIMING = Timing(tick=2 * TICK_S)

MAX_PAGE_MESSAGE_BYTES = 1_000_000


ShortText = Annotated[str, msgspec.Meta(max_length=MAX_ID_CHARS)]


class PageAnswer(msgspec.Struct, tag_field="type", tag="answer"):
    channel: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    remember: Remember | None = None


class PageRevoke(msgspec.Struct, tag_field="type", tag="revoke", rename={"revoke_all": "all"}):
    ids: Annotated[list[ShortText], msgspec.Meta(max_length=1000)] = []
    revoke_all: bool = False


class PageSignInRedirect(msgspec.Struct, tag_field="type", tag="sign-in-redirect",
                         rename={"elicitation_id": "elicitationId"}):
    server: str
    elicitation_id: ShortText
    url: Annotated[str, msgspec.Meta(max_length=16_384)]


class PageServerPolicy(msgspec.Struct, tag_field="type", tag="server-policy", rename={"decline_all": "declineAll"}):
    server: ShortText
    decline_all: bool


PageMessage = PageAnswer | PageRevoke | PageSignInRedirect | PageServerPolicy


def read_page_message(text: str | bytes) -> PageMessage:
    """One of the page's messages, or PageMessageError saying what is wrong with it."""
    if len(text) > MAX_PAGE_MESSAGE_BYTES:
        raise PageMessageError(f"a page message over {MAX_PAGE_MESSAGE_BYTES} bytes")
    try:
        return msgspec.json.decode(text, type=PageMessage)
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
    def __init__(self, connection_path: Path, name: str, say: Callable[[dict[str, Any]], None],
                 device: DeviceRef | None = None) -> None:
        self.say = say
        self.window = channels.new_uuid7()
        self.open: set[str] = set()  # channels of the cards the page shows
        # `device` goes in the hello, so main's audit names the paired device that answered
        core = PeerCore(role="renderer", name=name, window=self.window, timing=PAGE_TIMING,
                        policy=Policy(retry_first_attach=True), device=device)
        self._peer = AsyncPeer(connection_path, core, self._on_effect, fail_on_retry=False)

    @property
    def attached(self) -> bool:
        return self._peer.attached

    async def run(self) -> None:
        """Attach (waiting for a main as long as it takes); the peer keeps itself attached after."""
        await self._peer.attach()

    def close(self) -> None:
        self._peer.close()

    def handle(self, message: PageMessage) -> None:
        """What the page sent, to main."""
        match message:
            case PageAnswer():
                self.answer(message)
            case PageRevoke(ids, revoke_all):
                if not self.attached:
                    self.say(revoked_message(None, "not connected to main; try again when it is"))
                    return
                self._request(requests.revoke_rules(list(ids), revoke_all),
                              lambda reply: self.say(revoked_message(reply.revoked, _error_text(reply))))
            case PageServerPolicy(server, decline_all):
                sent = self.attached and self._peer.send(channels.SERVER_POLICY,
                                                         ServerPolicy(server=server, decline_all=decline_all))
                self.say({"type": "server-policy", "server": server, "declineAll": decline_all, "sent": sent})
            case PageSignInRedirect(server, elicitation_id, url):
                def told(reply: ChannelReply) -> None:
                    refused = reply.auth is None
                    self.say({"type": "sign-in-refused" if refused else "signed-in", "elicitationId": elicitation_id,
                              "message": _error_text(reply) if refused else f"Signed in to {server}."})

                self._request(requests.sign_in_redirect(server, elicitation_id, url), told)

    def answer(self, message: PageAnswer) -> None:
        if message.channel not in self.open or not self.attached:
            self.say({"type": "refused", "channel": message.channel,
                      "message": "this request is no longer open here"})
            return
        remember = message.remember if message.action in ("accept", "decline") else None
        self._peer.core.expect(message.channel, _AnswerWaiter(self, message.channel))
        self._peer.send(message.channel, result(message.action, message.content, remember))

    def _request(self, request: requests.Request, on_answer: Callable[[ChannelReply], None]) -> None:
        self._peer.core.expect(request.channel, requests.Answer(on_answer))
        if not self._peer.send(request.topic, request.body):
            self._peer.core.forget(request.channel)
            on_answer(ChannelReply(error=CallError(code=-32000, message=f"{request.what} was not sent")))

    # ---- what main said ----------------------------------------------------------------------

    def _on_effect(self, effect: Effect) -> None:
        match effect:
            case Welcomed(welcome):
                self._forget_all()
                self.open = {invoke.response_channel for invoke in welcome.pending}
                self.say({"type": "attached", "cards": [card_of(invoke) for invoke in welcome.pending]})
                self._request(requests.rules(), lambda reply: self.say(rules_message(reply.rules or [])))
            case Pushed(_, ElicitationInvoke() as invoke):
                self.open.add(invoke.response_channel)
                self.say({"type": "invoke", "card": card_of(invoke)})
            case Pushed(_, ElicitationDismiss() as dismiss):
                self.open.discard(dismiss.response_channel)
                self._peer.core.forget(dismiss.response_channel)
                self.say({"type": "dismiss", "channel": dismiss.response_channel, "reason": dismiss.reason,
                          "mine": dismiss.by == self.window})
            case Pushed(_, RulesUpdate(rules)):
                self.say(rules_message(rules))
            case Pushed(_, ElicitationComplete(server, elicitation_id)):
                self.say({"type": "completed", "server": server, "elicitationId": elicitation_id})
            case Lost(why) | AttachFailed(why):
                self._forget_all()
                self.say({"type": "detached", "why": why})
            case Refused(notice):
                logger.warning("main refused %s: %s: %s", notice.topic, notice.code, notice.message)
            case _:
                pass  # servers, peers, notices: not shown by the web window

    def _forget_all(self) -> None:
        for channel in self.open:
            self._peer.core.forget(channel)
        self.open = set()


def _error_text(reply: ChannelReply) -> str:
    return reply.error.message if reply.error is not None else ""
