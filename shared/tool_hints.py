"""What a tool's MCP annotations say about it, with the spec's defaults. Pure; main decides
`ask-destructive` with it and the window words its warnings with it.

MCP defaults (2025-06-18 on): readOnlyHint false, destructiveHint true (meaningful only when not
read-only), openWorldHint true. So a tool that says nothing is treated as able to destroy and to
reach the outside world; only what the server declares makes it look safer. Annotations are hints
from the server, never proof: that is why "ask-destructive" is a convenience, not a sandbox.
"""

from collections.abc import Mapping
from typing import Any


def _hint(annotations: Mapping[str, Any] | None, key: str, default: bool) -> bool:
    value = annotations.get(key) if annotations else None
    return value if isinstance(value, bool) else default


def read_only(annotations: Mapping[str, Any] | None) -> bool:
    return _hint(annotations, "readOnlyHint", False)


def destructive(annotations: Mapping[str, Any] | None) -> bool:
    return not read_only(annotations) and _hint(annotations, "destructiveHint", True)


def open_world(annotations: Mapping[str, Any] | None) -> bool:
    return _hint(annotations, "openWorldHint", True)


def warrants_asking(annotations: Mapping[str, Any] | None) -> bool:
    """`ask-destructive`: ask for a tool that may destroy or reach the open world; never for a
    read-only one."""
    return not read_only(annotations) and (destructive(annotations) or open_world(annotations))


def warnings(annotations: Mapping[str, Any] | None) -> list[str]:
    """Plain sentences for an approval card, most serious first."""
    declared = annotations or {}
    if read_only(annotations):
        found = ["The server says this tool only reads: it changes nothing."]
        if declared.get("openWorldHint") is True:
            found.append("It reaches outside your computer (the web, other services).")
        return found
    found = []
    if destructive(annotations):
        found.append("May delete or overwrite things." if "destructiveHint" in declared
                     else "The server does not say this tool is harmless: it may delete or overwrite things.")
    if open_world(annotations):
        found.append("Reaches outside your computer (the web, other services)." if "openWorldHint" in declared
                     else "The server does not say whether this tool reaches outside your computer.")
    if not found:
        found.append("The server says this tool only adds things and stays on this computer.")
    return found
