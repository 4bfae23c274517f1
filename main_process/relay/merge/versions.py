"""Who Elicitron says it is to a host of every server at once, and the handshake versions it
knows. Pure: no I/O, and no import of `mcp` (mcp_types' list would load the SDK's types).

The host's `initialize` goes to every server and the answer is theirs merged, under Elicitron's
`serverInfo`; with no server to answer, the version is what the spec's rule gives
(`negotiated_version`).
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Final

from shared.merged_names import Exposure

# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS, oldest to newest (importing it loads the SDK's types)
HANDSHAKE_VERSIONS: Final[tuple[str, ...]] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SERVER_NAME: Final = "elicitron"
SERVER_TITLE: Final = "Elicitron"


def package_version() -> str:
    try:
        return version("elicitron")
    except PackageNotFoundError:
        return "0"


def server_info(exposure: Exposure) -> dict[str, str]:
    """The gateway's `serverInfo`: Elicitron, or the one server it stands in for (`--server`)."""
    if exposure.only is not None:
        return {"name": exposure.only, "version": package_version()}
    return {"name": SERVER_NAME, "title": SERVER_TITLE, "version": package_version()}


def negotiated_version(requested: str) -> str:
    """The spec's rule: the host's version when we speak it, else our latest handshake version."""
    return requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
