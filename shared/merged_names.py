"""How the servers behind the gateway are named to a host. Pure: no sockets, no mcp.

All servers at once (`elicitron serve`): every tool and prompt is `<server>__<name>` (the double
underscore MetaMCP and Claude Code use), every resource's `name` likewise; resource URIs stay as the
server wrote them (a host reads them back verbatim), and a read goes to the server that listed the
URI or whose template matches it (main_process/relay/merge/ applies these rules). One server alone (`elicitron serve --server NAME`): its own names,
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


def merged_name(server: str, own: str) -> str:
    """What a host of every server at once calls `own` of `server`."""
    return f"{server}{SEPARATOR}{own}"


def name_clashes(names: dict[str, list[str]]) -> dict[str, list[tuple[str, str]]]:
    """The merged names more than one server would produce (`a`'s `b__c` and `a__b`'s `c` are both
    `a__b__c`), each with its (server, own name) pairs in the order given; `names`: each server's."""
    found: dict[str, list[tuple[str, str]]] = {}
    for server, owned in names.items():
        for own in dict.fromkeys(owned):
            found.setdefault(merged_name(server, own), []).append((server, own))
    return {public: owners for public, owners in found.items() if len({server for server, _ in owners}) > 1}


def clash_notice(kind: str, public: str, owners: list[tuple[str, str]]) -> str:
    """Why `public` is left out of the merged list, and how to reach each of its owners."""
    named = " and ".join(f"{kind} {own!r} of server {server!r}" for server, own in owners)
    reach = " or ".join(f"`elicitron serve --server {server}`" for server in dict.fromkeys(s for s, _ in owners))
    return (f"{public!r} would name both {named}: Elicitron leaves it out (a call to it is refused); rename "
            f"one of the servers in the config, or reach them one at a time with {reach}")
