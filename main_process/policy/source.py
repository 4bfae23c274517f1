"""A policy file's text split into its policies, each with where it starts: cedarpy's errors name a
policy by its position in the file (`policy3`) but give no line or column, so we find them here."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Chunk:
    text: str
    offset: int  # of its first non-blank character in the file


def split(text: str) -> list[Chunk]:
    """The file's policies in order: every `;` outside a string or a comment ends one (Cedar has no
    other `;`). A trailing piece with no `;` is kept (its parse error then names where it starts)."""
    chunks: list[Chunk] = []
    start = i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                i = n
            continue
        elif c == ";":
            _add(chunks, text, start, i + 1)
            start = i + 1
        i += 1
    _add(chunks, text, start, n)
    return chunks


def _add(chunks: list[Chunk], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    offset = start + _first_code(piece)
    if offset < end:
        chunks.append(Chunk(text[offset:end], offset))


def _first_code(piece: str) -> int:
    """The index of the first character that is neither blank nor in a comment (len if none)."""
    i = 0
    while i < len(piece):
        if piece[i].isspace():
            i += 1
        elif piece.startswith("//", i):
            nl = piece.find("\n", i)
            i = len(piece) if nl < 0 else nl + 1
        else:
            return i
    return len(piece)


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of `offset` in `text`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
