"""The pairing link as a QR code drawn with block characters for a terminal (segno).

segno's compact mode draws two rows of modules per line with half blocks, so a pairing link (about
80 characters) stays about 40 columns wide and 21 lines high; the quiet zone around it is segno's.
The blocks are the light modules: right on a terminal with light text on a dark background, the
colours inverted on a light one (many readers take an inverted code too; the link above it works
either way).
"""

import io

import segno


def terminal_qr(link: str) -> str:
    """The QR code of `link` as lines of text, ending with a newline."""
    out = io.StringIO()
    segno.make(link).terminal(out=out, compact=True)  # segno picks the smallest version, then the best error level that fits
    return out.getvalue()
