"""How a grant's pattern matches a call's arguments (main_process/consent/grants.py), the same in main
and on the cards that let the person edit it: one shell-style glob per argument (`*`, `?`,
`[...]`, case-sensitive, the whole value), matched against a string as it is and anything else as
canonical JSON (keys sorted, no spaces)."""

import fnmatch
import functools
import re
from collections.abc import Mapping
from typing import Any

import msgspec


def value_text(value: Any) -> str:
    return value if isinstance(value, str) else msgspec.json.encode(value, order="sorted").decode()


def matches(glob: str, value: Any) -> bool:
    return _compiled(glob).match(value_text(value)) is not None


def uncovered(pattern: Mapping[str, str], arguments: Mapping[str, Any]) -> list[str]:
    """The arguments of the call a pattern does not cover (missing from it, or not matching), and
    the names it has that the call does not; empty when it covers the call."""
    names = sorted(set(pattern) | set(arguments))
    return [name for name in names if name not in pattern or name not in arguments
            or not matches(pattern[name], arguments[name])]


@functools.lru_cache(maxsize=1024)
def _compiled(glob: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(glob), re.DOTALL)
