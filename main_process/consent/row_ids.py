"""Ids of the audit rows no window answers: a request a rule answered, or a host's call a rule or a
policy decided, before any card opened.

A card's row is keyed by its reply channel (`msgElicitationTransferResult-<uuid7>`, minted per
request: ~8 µs, most of it the random bits). A row nobody answers needs no channel, only a key no
other row has, on this main or on another main of a shared store: this main's prefix (one uuid7,
minted at the first such row) and a count, zero-padded so that one main's ids sort in the order
they were made. A denial's `authorizationContextId` is such an id (consent/denial.py).
"""

import itertools

from shared import channels

PREFIX = "decided-"


class RowIds:
    def __init__(self) -> None:
        self._prefix: str | None = None
        self._count = itertools.count(1)

    def next(self) -> str:
        if self._prefix is None:
            self._prefix = f"{PREFIX}{channels.new_uuid7()}-"
        return f"{self._prefix}{next(self._count):012d}"
