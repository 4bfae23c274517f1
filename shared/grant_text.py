"""What a grant covers, in one line: the same words on the approval card (Qt and web), in
`elicitron rules` and in the window's Remembered panel (rule_text.py). Grants: main_process/consent/grants.py."""

import time
from collections.abc import Mapping


def arguments_text(tool: str, arguments: str | None, pattern: Mapping[str, str] | None) -> str:
    """ "read_file with any arguments", "read_file with exactly the approved arguments",
    "read_file with path like “/tmp/*”"."""
    if arguments == "exact":
        return f"{tool} with exactly the approved arguments"
    if arguments == "pattern":
        likes = ", ".join(f"{name} like “{glob}”" for name, glob in sorted((pattern or {}).items()))
        return f"{tool} with {likes}" if likes else f"{tool} with no arguments"
    return f"{tool} with any arguments"


def duration_text(duration: str, until_ms: int | None = None) -> str:
    """ "for this session", "for an hour", "until 2026-12-07 18:00", "always"."""
    if duration == "until" and until_ms is not None:
        return "until " + time.strftime("%Y-%m-%d %H:%M", time.localtime(until_ms / 1000))
    return {"session": "for this session", "hour": "for an hour", "always": "always"}.get(duration, duration)


def covers(tool: str, arguments: str | None, pattern: Mapping[str, str] | None, how_long: str,
           single_use: bool) -> str:
    """The one line: "Allows read_file with path like “/tmp/*”, for this session, one call only"."""
    return f"Allows {arguments_text(tool, arguments, pattern)}, {how_long}" + (", one call only" if single_use else "")
