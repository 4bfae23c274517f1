"""How the servers behind the gateway are named to a host. Pure: no sockets, no mcp.

All servers at once (`elicitron serve`): every tool and prompt is `<server>__<name>` (the double
underscore MetaMCP and Claude Code use), every resource's `name` likewise; resource URIs stay as the
server wrote them (a host reads them back verbatim), and a read goes to the server that listed the
URI or whose template matches it (gateway_process/merge.py applies these rules). One server alone (`elicitron serve --server NAME`): its own names,
unchanged, a drop-in replacement for the host's direct entry for that server.
"""

from dataclasses import dataclass

from shared.messages import ServerInfo

SEPARATOR = "__"


@dataclass(frozen=True)
class Exposure:
    only: str | None = None  # `--server NAME`


def combined_instructions(exposure: Exposure, known: dict[str, ServerInfo]) -> str | None:
    """What the host gets as the server's `instructions`: one server's own, or every server's
    under its name, after a line saying how names are built."""
    if exposure.only is not None:
        info = known.get(exposure.only)
        return info.instructions if info is not None else None
    parts = [f"## {name}\n{info.instructions.strip()}" for name, info in known.items() if info.instructions]
    header = (f"Tools and prompts of {len(known)} MCP servers through Elicitron, each named "
              f"<server>{SEPARATOR}<name>; servers: {', '.join(known) or 'none'}.")
    return "\n\n".join([header, *parts])
