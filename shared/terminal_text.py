"""Text that came from a server, host, asker or window, made safe to print on a terminal.

A terminal acts on control characters in what it prints: OSC 52 (`ESC ] 52 ; c ; …`) sets the
clipboard, `ESC [ 2 J` clears the screen, `\\r` writes over a line, C1 controls (U+0080–U+009F) do
the same as their ESC forms on many terminals, and bidi overrides reorder what is read. Every CLI
print of such text goes through one of these:

- `for_terminal(text)`: each such character shown as a visible escape (`\\x1b`, `\\u202e`), so
  nothing acts and nothing is hidden; `lines=True` keeps newlines and tabs (a tool's text);
- `table_cell(text, width)`: the same on one line of at most `width` characters (tables);
- `json_for_terminal(encoded)`: JSON output (`--json`) with every such character that JSON leaves
  raw (C1, DEL, format characters) as a `\\uXXXX` escape: the same value for a program reading it.
"""

import re
import unicodedata
from typing import Final

# Characters a terminal may act on or that hide text: C0, DEL and C1 controls, format characters
# (bidi overrides and isolates, zero-width ones, the BOM, tags), line and paragraph separators.
_UNSAFE_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_NOT_PLAIN: Final = re.compile(r"[^\x20-\x7e]")  # printable ASCII needs no look
_KEPT_IN_LINES: Final = frozenset("\n\t")
_BEYOND_ASCII: Final = re.compile(r"[^\x00-\x7e]")  # JSON text has no raw C0 controls


def is_unsafe(char: str) -> bool:
    """Whether a terminal could act on `char`, or it hides or reorders text."""
    return unicodedata.category(char) in _UNSAFE_CATEGORIES


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def for_terminal(text: str, *, lines: bool = False) -> str:
    """`text` with every character a terminal could act on shown as a visible escape;
    `lines`: newlines and tabs are kept (multi-line text such as a tool's result)."""

    def replace(found: re.Match[str]) -> str:
        char = found.group()
        if lines and char in _KEPT_IN_LINES:
            return char
        return _escape(char) if is_unsafe(char) else char

    return _NOT_PLAIN.sub(replace, text)


def table_cell(text: str, width: int) -> str:
    """`text` safe for a terminal on one line of at most `width` characters (a table's cell)."""
    safe = " ".join(for_terminal(" ".join(text.split())).split())
    return safe if len(safe) <= width else safe[: width - 1] + "…"


def json_for_terminal(encoded: str) -> str:
    """JSON text (from json.dumps or msgspec) with the characters a terminal acts on that JSON
    leaves raw in strings written as `\\uXXXX` escapes: valid JSON, the same value when decoded."""

    def replace(found: re.Match[str]) -> str:
        char = found.group()
        if not is_unsafe(char):
            return char
        code = ord(char)
        if code < 0x10000:
            return f"\\u{code:04x}"
        code -= 0x10000  # outside the BMP: JSON's surrogate pair
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"

    return _BEYOND_ASCII.sub(replace, encoded)
