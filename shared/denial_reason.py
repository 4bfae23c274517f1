"""The reason a person types when they deny a tool call on an approval card ("Reason (sent to the
agent)"): one cleaning for every window and for main, which cleans again what any window sent.

It goes to the model as text, so it is one line of plain text: control and format characters
(newlines, escapes, bidi overrides, zero-width ones) become spaces, runs of white space one space,
and it is at most REASON_MAX_CHARS characters (the card's field takes no more; the wire refuses a
longer one, shared/messages.py).
"""

import unicodedata
from typing import Final

REASON_MAX_CHARS: Final = 500  # a few sentences; the card's field and the wire cap it here
_NOT_TEXT: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def clean_reason(text: str | None) -> str | None:
    """`text` as one line of at most REASON_MAX_CHARS plain characters; None when nothing is left."""
    if not text:
        return None
    kept = "".join(" " if unicodedata.category(char) in _NOT_TEXT else char for char in text)
    line = " ".join(kept.split())[:REASON_MAX_CHARS].rstrip()
    return line or None
