"""Which card a request gets, and what the user chose to remember with their answer.

The window's one hook into the consent layer's cards: an approval (`kind: "approval"` with an
`approval` block) gets an ApprovalCard; every other request its ElicitationCard, and a form card
also gets "Remember my answer".
"""

from PySide6.QtWidgets import QDialog, QWidget

from renderer_process import remember
from renderer_process.approval_card import ApprovalCard, is_approval
from renderer_process.card import FORM, ElicitationCard, UrlOpener, open_in_browser
from shared import messages

Card = ElicitationCard | ApprovalCard  # what the window shows; both answer through `answered`


def card_for(invoke: messages.ElicitationInvoke, parent: QWidget | None = None, *,
             opener: UrlOpener = open_in_browser) -> Card:
    if is_approval(invoke):
        return ApprovalCard(invoke, parent)
    card = ElicitationCard(invoke, parent, opener=opener)
    if card.kind == FORM and invoke.kind != "sign-in":  # a sign-in's question is never remembered
        remember.add_to_card(card)
    return card


def remember_choice(card: QDialog, action: str) -> messages.Remember | None:
    return remember.choice_of(card, action)
