"""PagePeer: one browser page's event stream as one renderer peer of main.

Each page gets its own window id and name, so main treats it as it treats a Qt window: it gets
every request (the welcome's `pending` replayed on attach, then each invoke), the first answer of
any window wins, and every window gets the dismiss. The wire side is shared/peer.py's core on
shared/peer_asyncio.py's adapter, as the gateways' link and the asker use it; a window keeps
trying to attach until a main answers, and after a loss attaches again by itself. Which requests
the page shows as cards and which it lists as "waiting in another window" (their tool call was made
in another attached window) is shared/window_core.py's WindowCore, the Qt window's own core; the
page shows every card of its own at once.

What goes to the page is plain JSON (`say`, never blocking: the app's sender drains it):

    {"type": "attached", "cards": [card...], "elsewhere": [item...]}   after each welcome: the cards
                                                 still shown; the replay follows as `invoke`s
    {"type": "invoke", "card": card}             one more card (cards.py says what a card holds)
    {"type": "dismiss", "channel", "reason", "mine"}   a card goes (`reason` "gone": main no longer
                                                 holds it, or stopped)
    {"type": "elsewhere", "items": [item...]}    "waiting in another window", oldest first, whenever
                                                 it changes; item: {"channel", "server", "message",
                                                 "window" (its name), "text" (the Qt window's line)}
    {"type": "refused", "channel", "message"}    main refused our answer (e.g. invalid-content; the
                                                 card is asked again), or it was not open here
    {"type": "detached", "why"}                  main is gone; the page keeps nothing to answer
    {"type": "rules", "rules": [row...]}         after each welcome and every change (remembered.py)
    {"type": "revoked", "lines", "problem"}      main's answer to the page's revoke
    {"type": "completed", "server", "elicitationId"}   a link's step is done (a sign-in arrived)
    {"type": "signed-in" | "sign-in-refused", "elicitationId", "message"}  a pasted sign-in address
    {"type": "server-policy", "server", "declineAll", "sent"}   the page's policy went to main (or not)

and what comes back, checked by `read_page_message`:

    {"type": "answer", "channel", "action", "content"?, "remember"?, "reason"?}   -> msgElicitationTransferResult-*
    {"type": "answer-here", "channel"}     a request waiting in another window becomes this page's card
    {"type": "revoke", "ids": [id...], "all": bool}                   -> msgRevokeRules
    {"type": "sign-in-redirect", "server", "elicitationId", "url"}    -> msgSignInRedirect (a browser
                                     on another machine than main cannot reach its 127.0.0.1)
    {"type": "server-policy", "server", "declineAll": bool}          -> msgServerPolicy (no answer)
"""

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from shared import channels, window_core
from shared import peer_requests as requests
from shared.denial_reason import REASON_MAX_CHARS
from shared.errors import PageMessageError
from shared.messages import (
    HOST_GONE,
    MAX_ID_CHARS,
    CallError,
    ChannelReply,
    DeviceRef,
    ElicitationComplete,
    ElicitationDismiss,
    ElicitationInvoke,
    ElicitationResult,
    ErrorNotice,
    GrantChoice,
    PeersUpdate,
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
from shared.window_core import (
    NOT_SENT,
    AnswerRefused,
    Closed,
    Elsewhere,
    ElsewhereChanged,
    NotOpen,
    SendAnswer,
    Show,
    WindowCore,
    Withdraw,
    elsewhere_text,
)
from web_process.cards import card_of
from web_process.remembered import revoked_message, rules_message

logger = logging.getLogger(__name__)
# Every open page is a peer with its own ticker: half as many wake-ups as a window's (a heartbeat
# still leaves within 1.5 s, well inside main's 5 s), so 50 pages cost the web window little.
PAGE_TIMING = Timing(tick=2 * TICK_S)

MAX_PAGE_MESSAGE_BYTES = 1_000_000
_ITEM_MESSAGE_CHARS = 1000  # a listed request's message, for its tooltip (the card has it all)


ShortText = Annotated[str, msgspec.Meta(max_length=MAX_ID_CHARS)]


class PageAnswer(msgspec.Struct, tag_field="type", tag="answer"):
    channel: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    remember: Remember | None = None
    reason: Annotated[str, msgspec.Meta(max_length=REASON_MAX_CHARS)] | None = None  # an approval's deny
    grant: GrantChoice | None = None  # an approval's "Allow as chosen": what it covers (main checks it)


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


class PageAnswerHere(msgspec.Struct, tag_field="type", tag="answer-here"):
    channel: ShortText


PageMessage = PageAnswer | PageAnswerHere | PageRevoke | PageSignInRedirect | PageServerPolicy


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
        self._page.answer_refused(self._channel, notice)

    def lost(self, why: str) -> None:
        pass  # the page hears `detached` for the whole window


class PagePeer:
    def __init__(self, connection_path: Path, name: str, say: Callable[[dict[str, Any]], None],
                 device: DeviceRef | None = None) -> None:
        self.say = say
        self.window = channels.new_uuid7()
        self.cards = WindowCore(self.window, slots=None)  # what the page shows and lists
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
            case PageAnswerHere(channel):
                self._render(self.cards.answer_here(channel))
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
        if not self.attached:
            self._render([NotOpen(message.channel)])
            return
        remember = message.remember if message.action in ("accept", "decline") else None
        grant = message.grant if message.action == "accept" else None
        self._render(self.cards.answer(message.channel, message.action, message.content, remember, message.reason,
                                       grant))

    def answer_refused(self, channel: str, notice: ErrorNotice) -> None:
        """main refused our answer on `channel`: asked again when it is still open."""
        self._render(self.cards.refused(notice) or [NotOpen(channel, notice.message)])

    def _request(self, request: requests.Request, on_answer: Callable[[ChannelReply], None]) -> None:
        self._peer.core.expect(request.channel, requests.Answer(on_answer))
        if not self._peer.send(request.topic, request.body):
            self._peer.core.forget(request.channel)
            on_answer(ChannelReply(error=CallError(code=-32000, message=f"{request.what} was not sent")))

    # ---- what main said ----------------------------------------------------------------------

    def _on_effect(self, effect: Effect) -> None:
        match effect:
            case Welcomed(welcome):
                cards = self.cards.welcomed(welcome)
                self.say({"type": "attached", "cards": [card_of(invoke) for invoke in self.cards.shown],
                          "elsewhere": [_item(item) for item in self.cards.elsewhere]})
                self._render(cards)
                # main's `peers` follows the welcome: the replay shows once it had its chance to land
                asyncio.get_running_loop().call_soon(lambda: self._render(self.cards.settle()))
                self._request(requests.rules(), lambda reply: self.say(rules_message(reply.rules or [])))
            case Pushed(_, ElicitationInvoke() as invoke):
                self._render(self.cards.invoked(invoke))
            case Pushed(_, ElicitationDismiss() as dismiss):
                self._render(self.cards.dismissed(dismiss))
            case Pushed(_, PeersUpdate(peers)):
                self._render(self.cards.peers(peers))
            case Pushed(_, RulesUpdate(rules)):
                self.say(rules_message(rules))
            case Pushed(_, ElicitationComplete(server, elicitation_id)):
                self.say({"type": "completed", "server": server, "elicitationId": elicitation_id})
            case Lost(why) | AttachFailed(why):
                self.say({"type": "detached", "why": why})  # the next welcome says what is still open
            case Refused(notice):
                logger.warning("main refused %s: %s: %s", notice.topic, notice.code, notice.message)
            case _:
                pass  # servers, notices: not shown by the web window

    def _render(self, effects: list[window_core.Effect]) -> None:
        """What the window core decided, to main and to the page."""
        for effect in effects:
            match effect:
                case Show(invoke):
                    self.say({"type": "invoke", "card": card_of(invoke)})
                case Withdraw(invoke, why, _, dismiss) if dismiss is not None and dismiss.cause == HOST_GONE:
                    # The page shows the core's line in place of the card for a few seconds.
                    self._peer.core.forget(invoke.response_channel)
                    self.say({"type": "dismiss", "channel": invoke.response_channel, "reason": dismiss.reason,
                              "mine": False, "note": why})
                case Withdraw(invoke, _, _, dismiss) | Closed(invoke, dismiss):
                    self._peer.core.forget(invoke.response_channel)
                    self.say({"type": "dismiss", "channel": invoke.response_channel,
                              "reason": dismiss.reason if dismiss is not None else "gone",
                              "mine": dismiss is not None and dismiss.by == self.window})
                case SendAnswer(invoke, action, content, remember, reason, grant):
                    self._send_answer(invoke.response_channel, result(action, content, remember, reason, grant))
                case NotOpen(channel, why):
                    self.say({"type": "refused", "channel": channel, "message": why})
                case AnswerRefused(invoke, message, _):
                    self.say({"type": "refused", "channel": invoke.response_channel, "message": message})
                case ElsewhereChanged(items):
                    self.say({"type": "elsewhere", "items": [_item(item) for item in items]})
                case _:
                    pass  # Arrived: the page notifies of each new card itself

    def _send_answer(self, channel: str, body: ElicitationResult) -> None:
        self._peer.core.expect(channel, _AnswerWaiter(self, channel))
        if not self._peer.send(channel, body):
            self._peer.core.forget(channel)
            notice = ErrorNotice(code=NOT_SENT, message="not connected to main; the answer was not sent", topic=channel)
            self._render(self.cards.refused(notice))


def _item(item: Elsewhere) -> dict[str, Any]:
    invoke = item.invoke
    return {"channel": invoke.response_channel, "server": invoke.request.server,
            "message": str(invoke.request.params.get("message", ""))[:_ITEM_MESSAGE_CHARS], "window": item.window,
            "text": elsewhere_text(item)}


def _error_text(reply: ChannelReply) -> str:
    return reply.error.message if reply.error is not None else ""
