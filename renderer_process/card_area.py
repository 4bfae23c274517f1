"""CardArea: the one modal card, "N more waiting" and "waiting in another window", as WindowCore says.

Which request shows as the card, which wait in the queue and which are listed as waiting in another
window (with "Answer here") is shared/window_core.py's WindowCore, the same core a browser page's
peer uses. The area feeds it main's pushes and the user's answers and renders the effects it
returns (`_render`); what reaches beyond the cards leaves as signals: the answer for main, a card
accepted (a link to wait for, a sign-in to finish), requests to announce, a status line, the
number waiting.
"""

import logging
from functools import partial
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QLabel, QWidget

from renderer_process.approval_card import ApprovalCard
from renderer_process.card import URL, UrlOpener
from renderer_process.consent_cards import Card, card_for, grant_given, reason_given, remember_choice
from renderer_process.elsewhere import ElsewhereList
from shared import messages
from shared.window_core import (
    AnswerRefused,
    Arrived,
    Effect,
    ElsewhereChanged,
    SendAnswer,
    Show,
    WindowCore,
    Withdraw,
)

logger = logging.getLogger(__name__)

STATUS_MS = 8000
BRIEF_MS = 4000  # "cancelled by the server": worth a glance, not a long stay


def refusal_text(topic: str | None, message: str) -> str:
    return f"main refused {topic or 'a message'}: {message}"


class CardArea(QObject):
    answer_ready = Signal(str, str, object)  # response channel, action, content or None
    answer_remembered = Signal(str, str, object, object)  # ... and what to remember (messages.Remember)
    answer_explained = Signal(str, str, object, str)  # ... an approval denied, and the reason typed on it
    answer_granted = Signal(str, str, object, object)  # ... an approval allowed with a grant (messages.GrantChoice)
    accepted = Signal(object)  # the Card just accepted, before its answer goes
    arrived = Signal(object)  # list[ElicitationInvoke]: new here, for a notification
    decline_all_requested = Signal(str)  # server
    answer_not_taken = Signal(object)  # the ElicitationInvoke asked again
    status = Signal(str, int)  # a status-bar line and how long it stays
    waiting_changed = Signal(int)  # requests waiting here: the card and the queue

    def __init__(self, window_id: str, host: QWidget, opener: UrlOpener) -> None:
        super().__init__(host)
        self._core = WindowCore(window_id)
        self._host = host  # the cards' parent: window-modal to it
        self._opener = opener
        self._card: Card | None = None  # the card of the core's shown request
        self.queue_label = QLabel(host)
        self.queue_label.setObjectName("queue")
        self.queue_label.setStyleSheet("font-weight: bold;")
        self.queue_label.hide()
        self.elsewhere = ElsewhereList(host)
        self.elsewhere.answer_here.connect(lambda channel: self._render(self._core.answer_here(channel)))

    # ---- what it holds ------------------------------------------------------------------------

    def set_window_id(self, window_id: str) -> None:
        self._core.window = window_id

    def current_card(self) -> Card | None:
        return self._card

    def queued_count(self) -> int:
        return len(self._core.queued)

    def waiting_count(self) -> int:
        return self._core.waiting_count

    @property
    def session(self) -> str:
        """main's session of the last welcome ("" before the first: never attached)."""
        return self._core.session

    def open_channels(self) -> set[str]:
        return self._core.open_channels()

    # ---- what main pushes -----------------------------------------------------------------------

    def welcomed(self, welcome: messages.Welcome) -> None:
        self._render(self._core.welcomed(welcome))  # the replay: what main no longer holds goes
        # main sends `peers` right after `welcome`: let it land before a card takes the screen,
        # so a request that another window is already showing is not put in front of the user.
        QTimer.singleShot(0, self, lambda: self._render(self._core.settle()))

    def peers(self, peers: list[messages.PeerInfo]) -> None:
        self._render(self._core.peers(peers))

    def invoked(self, invoke: messages.ElicitationInvoke) -> None:
        self._render(self._core.invoked(invoke))

    def dismissed(self, dismiss: messages.ElicitationDismiss) -> None:
        self._render(self._core.dismissed(dismiss))

    def main_stopped(self) -> None:
        """A cleanly stopped main cancelled its requests: nothing here can be answered any more."""
        dropped = self._core.waiting_count
        self._render(self._core.cleared("main stopped: its requests are gone"))
        if dropped:
            logger.info("main stopped; dropped %d request(s) it held", dropped)

    def refused(self, notice: messages.ErrorNotice) -> bool:
        """main refused a message; True if it was an answer of ours (asked again, or refused)."""
        effects = self._core.refused(notice)
        if not effects:
            return False
        self._render(effects)
        return True

    def completed(self, server: str, elicitation_id: str, status: str) -> bool:
        """URL mode finished: True if it was the link card on screen (then closed)."""
        card = self._card
        if card is None or card.kind != URL or (card.server, card.elicitation_id) != (server, elicitation_id):
            return False
        self._drop_current(status, STATUS_MS)
        self._render(self._core.give_back(card.invoke.response_channel))
        return True

    # ---- the card on screen -------------------------------------------------------------------

    def bring_forward(self) -> None:
        card = self._card
        if card is not None:
            card.open()
            card.raise_()
            card.activateWindow()

    def hide_card(self) -> None:
        """The window went to the tray: the card waits, unanswered, for the window's return."""
        if self._card is not None:
            self._card.hide()

    def close_card(self) -> None:
        """The window closes: not an answer, the request stays pending for other windows."""
        if self._card is not None:
            card, self._card = self._card, None
            card.close_silently()

    # ---- rendering what the core says -----------------------------------------------------------

    def _render(self, effects: list[Effect]) -> None:
        for effect in effects:
            match effect:
                case Show(invoke) if self._card is not None and isinstance(self._card, ApprovalCard) \
                        and self._card.invoke.response_channel == invoke.response_channel:
                    self._card.recount(invoke)  # a quorum approval's new count
                case Show(invoke):
                    self._open_card(invoke)
                case Withdraw(invoke, why, brief) if self._card is not None \
                        and self._card.invoke.response_channel == invoke.response_channel:
                    self._drop_current(why, BRIEF_MS if brief else STATUS_MS)
                case SendAnswer(invoke, action, content, _, _, messages.GrantChoice() as grant):
                    self.answer_granted.emit(invoke.response_channel, action, content, grant)
                case SendAnswer(invoke, action, content, _, str(reason)):  # an approval: never remembered
                    self.answer_explained.emit(invoke.response_channel, action, content, reason)
                case SendAnswer(invoke, action, content, None):
                    self.answer_ready.emit(invoke.response_channel, action, content)
                case SendAnswer(invoke, action, content, remember):
                    self.answer_remembered.emit(invoke.response_channel, action, content, remember)
                case AnswerRefused(invoke, message, True):
                    self.status.emit(
                        f"{invoke.request.server}: answer not taken ({message}); please answer again", STATUS_MS)
                    self.answer_not_taken.emit(invoke)
                case AnswerRefused(invoke, message, False):
                    self.status.emit(refusal_text(invoke.response_channel, message), STATUS_MS)
                case Arrived(invokes):
                    self.arrived.emit(list(invokes))
                case ElsewhereChanged(items):
                    self.elsewhere.set_items(list(items))
                case _:
                    pass  # Closed, NotOpen: a card here is gone once answered
        self._update_queue_text()

    def _open_card(self, invoke: messages.ElicitationInvoke) -> None:
        card = card_for(invoke, self._host, opener=self._opener)
        card.answered.connect(partial(self._on_card_answered, card))
        card.decline_all_requested.connect(self.decline_all_requested)
        self._card = card
        if self._host.isVisible():
            card.open()  # window-modal, non-blocking: the bridge keeps running
        # else the window is in the tray: the card waits for the notification to be clicked
        logger.info("showing card %s from %s", invoke.response_channel, invoke.request.server)

    def _on_card_answered(self, card: Card, action: messages.Action, content: Any) -> None:
        if card is not self._card:
            return
        self._card = None
        card.deleteLater()
        if action == "accept":
            self.accepted.emit(card)
        self._render(self._core.answer(card.invoke.response_channel, action, content, remember_choice(card, action),
                                       reason_given(card, action, content), grant_given(card, action, content)))

    def _drop_current(self, status: str, status_ms: int) -> None:
        card = self._card
        if card is None:
            return
        self._card = None
        card.close_silently()
        card.deleteLater()
        self.status.emit(status, status_ms)

    def _update_queue_text(self) -> None:
        text = self._core.summary()
        self.queue_label.setText(text)
        self.queue_label.setVisible(bool(text))
        if self._card is not None:
            self._card.set_waiting_text(text)
        self.waiting_changed.emit(self._core.waiting_count)
