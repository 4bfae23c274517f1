"""Which card a request gets, what the user chose to remember with their answer, and the reason
they gave for denying an approval.

The window's one hook into the consent layer's cards: an approval (`kind: "approval"` with an
`approval` block) gets an ApprovalCard; every other request its ElicitationCard, built to offer
"Remember my answer" when it is a form.
"""

from PySide6.QtWidgets import QWidget

from renderer_process.approval_card import ApprovalCard, is_approval
from renderer_process.card import ElicitationCard, UrlOpener, offers_for, open_in_browser
from shared import messages

Card = ElicitationCard | ApprovalCard  # what the window shows; both answer through `answered`


def card_for(invoke: messages.ElicitationInvoke, parent: QWidget | None = None, *,
             opener: UrlOpener = open_in_browser) -> Card:
    if is_approval(invoke):
        return ApprovalCard(invoke, parent)
    return ElicitationCard(invoke, parent, opener=opener, offers=offers_for(invoke, remember=True))


def remember_choice(card: Card, action: str) -> messages.Remember | None:
    """None for an approval: it offers no "Remember my answer"."""
    return card.remember_choice(action) if isinstance(card, ElicitationCard) else None


def reason_given(card: Card, action: str, content: object) -> str | None:
    """An approval's deny: the reason typed on it (None when none); only an approval asks for one."""
    return card.reason_for(action, content) if isinstance(card, ApprovalCard) else None


def grant_given(card: Card, action: str, content: object) -> messages.GrantChoice | None:
    """An approval's "Allow as chosen": the grant chosen on it (None for anything else)."""
    return card.grant_for(action, content) if isinstance(card, ApprovalCard) else None
