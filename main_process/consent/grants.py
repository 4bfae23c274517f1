"""Grants: what an approval's allow covers besides the call on its card. Pure: no I/O, no clock.

A grant is a user tool rule (rules.Rule) bound to what was approved:
- **which arguments** (`Coverage`): `any` (every call of the tool: what "Allow for this session"
  and "Always allow" gave before grants), `exact` (only calls whose arguments, as canonical JSON,
  are the approved ones: kept as a digest, never as the values), or `pattern` (one shell-style glob
  per argument, which the card proposes and the person may edit; a call matches only with exactly
  those argument names, each value matching its glob: a string as it is, anything else as
  canonical JSON);
- **how long**: the rule's scope (`session`, `until`: an hour is now + 3600 s on main's clock,
  `always`);
- **single use**: it covers one later call, then it is gone.

Each stored grant keeps `covers_digest` of what it covers (server, tool, decision, coverage): a row
whose coverage does not hash to its digest is refused at load (rows.py), so an edited row never
covers more than what the person approved.
"""

import glob
import hashlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from shared.grant_pattern import matches, uncovered, value_text
from shared.messages import GrantChoice

ArgumentsScope = Literal["any", "exact", "pattern"]
BREADTH: Final[dict[str, int]] = {"exact": 0, "pattern": 1, "any": 2}  # the narrowest applies first
HOUR_MS: Final = 3_600_000


class GrantError(ValueError):
    """A grant that cannot be made as chosen (a pattern that does not cover the call it was given on)."""


@dataclass(frozen=True)
class Coverage:
    """Which arguments of a call a grant covers."""

    arguments: ArgumentsScope = "any"
    digest: str | None = None  # "exact": arguments_digest of the approved arguments
    pattern: tuple[tuple[str, str], ...] = ()  # "pattern": (argument name, glob), sorted by name

    def matches(self, arguments: Mapping[str, Any]) -> bool:
        if self.arguments == "any":
            return True
        if self.arguments == "exact":
            return arguments_digest(arguments) == self.digest
        if sorted(arguments) != [name for name, _ in self.pattern]:
            return False
        return all(matches(pattern, arguments[name]) for name, pattern in self.pattern)

    def key(self) -> str:
        """Canonical text of what it covers: equal for equal coverage (the book's index, the digest)."""
        return msgspec.json.encode({"arguments": self.arguments, "digest": self.digest,
                                    "pattern": [list(item) for item in self.pattern]}).decode()

    def pattern_dict(self) -> dict[str, str] | None:
        return dict(self.pattern) if self.arguments == "pattern" else None


ANY: Final = Coverage()


def exact(arguments: Mapping[str, Any]) -> Coverage:
    return Coverage("exact", digest=arguments_digest(arguments))


def pattern_of(globs: Mapping[str, str], approved: Mapping[str, Any]) -> Coverage:
    """A pattern coverage, checked against the call it is given on: it names exactly that call's
    arguments and covers their values (else GrantError: the person meant something else)."""
    if sorted(globs) != sorted(approved):
        raise GrantError(f"the pattern must name each argument of the call ({', '.join(sorted(approved)) or 'none'}), "
                         f"and only those; it names {', '.join(sorted(globs)) or 'none'}")
    coverage = Coverage("pattern", pattern=tuple(sorted((str(name), str(glob_)) for name, glob_ in globs.items())))
    missed = uncovered(dict(coverage.pattern), approved)
    if missed:
        raise GrantError(f"the pattern does not cover the call it is given on: {', '.join(missed)}")
    return coverage


def coverage_of(choice: GrantChoice, approved: Mapping[str, Any], now_ms: int) -> Coverage:
    """What `choice` covers of calls like `approved` (`now_ms`: main's time, epoch ms); GrantError
    when it cannot be given."""
    if choice.duration == "until" and (choice.until is None or choice.until <= now_ms):
        raise GrantError("a grant until a time needs `until` in the future (epoch ms)")
    if choice.duration != "until" and choice.until is not None:
        raise GrantError("`until` goes only with duration \"until\"")
    if choice.arguments != "pattern" and choice.pattern is not None:
        raise GrantError("`pattern` goes only with arguments \"pattern\"")
    if choice.arguments == "exact":
        return exact(approved)
    if choice.arguments == "pattern":
        return pattern_of(choice.pattern or {}, approved)
    return ANY


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    canonical = msgspec.json.encode(dict(arguments), order="sorted")
    return hashlib.blake2b(canonical, digest_size=16).hexdigest()


def proposed_pattern(arguments: Mapping[str, Any]) -> dict[str, str]:
    """What a card proposes for "arguments like these": a path-like string's folder and anything
    under it, every other value exactly as it is (escaped, so it matches only itself)."""
    proposed = {}
    for name, value in arguments.items():
        text = value_text(value)
        folder = posixpath.dirname(text) if isinstance(value, str) and "/" in text else ""
        proposed[name] = glob.escape(folder.rstrip("/")) + "/*" if folder else glob.escape(text)
    return proposed


def covers_digest(server: str, tool: str, decision: str | None, coverage: Coverage) -> str:
    """The digest stored with a grant: of everything it covers."""
    text = msgspec.json.encode([server, tool, decision, coverage.key()])
    return hashlib.blake2b(text, digest_size=16).hexdigest()
