"""How the servers behind the gateway are named to a host. Pure: no sockets, no mcp.

All servers at once (`elicitron serve`): every tool and prompt is `<server>__<name>` (the double
underscore MetaMCP and Claude Code use), every resource's `name` likewise; resource URIs stay as the
server wrote them (a host reads them back verbatim), and a read goes to the server that listed the
URI or whose template matches it. One server alone (`elicitron serve --server NAME`): its own names,
unchanged, a drop-in replacement for the host's direct entry for that server.
"""

from collections.abc import Container
from dataclasses import dataclass

from shared.errors import UnknownNameError
from shared.messages import ServerInfo

SEPARATOR = "__"


@dataclass(frozen=True)
class Exposure:
    only: str | None = None  # `--server NAME`

    def servers(self, known: dict[str, ServerInfo]) -> list[str]:
        """The servers a host sees, in config order."""
        if self.only is not None:
            return [self.only]
        return list(known)

    def public(self, server: str, name: str) -> str:
        return name if self.only is not None else f"{server}{SEPARATOR}{name}"

    def resolve(self, kind: str, public: str, known: dict[str, ServerInfo],
                listed: Container[str] = ()) -> tuple[str, str]:
        """(server, its own name) for a name a host used; raises UnknownNameError naming the problem.
        `kind` is "tool" or "prompt"; a tool is also checked against the server's tool names, unless
        the host saw it in a listing (`listed`: a server may add one before main hears of it)."""
        if self.only is not None:
            server, name = self.only, public
        else:
            owners = sorted((s for s in known if public.startswith(s + SEPARATOR) and len(public) > len(s) + 2),
                            key=len, reverse=True)
            if not owners:
                listed = ", ".join(known) or "none are configured"
                raise UnknownNameError(f"unknown {kind} {public!r}: names here are <server>{SEPARATOR}<{kind}>, "
                                       f"with <server> one of: {listed}")
            server = next((s for s in owners if public[len(s) + 2:] in known[s].tools), owners[0])
            name = public[len(server) + 2:]
        info = known.get(server)
        if kind == "tool" and info is not None and info.status == "ready" and name not in info.tools \
                and public not in listed:
            tools = ", ".join(self.public(server, t) for t in info.tools[:20]) or "none"
            raise UnknownNameError(f"unknown tool {public!r}: server {server!r} has no tool {name!r} "
                                   f"(its tools: {tools})")
        return server, name


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
