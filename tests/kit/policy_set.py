"""A generated team policy file (issue 36): N policies shaped like the docs' examples, over many
servers and tools, and calls that hit them. The `policy` bench figure times decisions on it and
test_policy_fast.py checks the fast path decides as cedarpy's plain `is_authorized` does."""

import random
from dataclasses import dataclass
from typing import Any

SERVERS = 20
TOOLS = 10  # per server: `tool0` … `tool9`
HOSTS = ("Claude Desktop", "Cursor", "codex", "agent-3")


@dataclass(frozen=True)
class Call:
    host: str
    server: str
    tool: str
    arguments: dict[str, Any]
    annotations: dict[str, Any] | None


def policies(n: int) -> str:
    """`n` policies: per-tool path permits and forbids, per-server forbids, a few host-wide and
    unscoped ones (annotations, time), and elicitation forbids; each with an @id."""
    rng = random.Random(36)
    out: list[str] = []
    for index, (server, tool) in enumerate(_targets(n, 36)):
        shape = index % 10
        if shape in (0, 1, 2, 3):
            body = (f'permit(principal, action == Action::"callTool", resource == Tool::"{server}/{tool}")\n'
                    f'when {{ context.arguments has path && context.arguments.path like "/home/u{index}/*" }};')
        elif shape in (4, 5):
            body = (f'forbid(principal, action == Action::"callTool", resource in Server::"{server}")\n'
                    f'when {{ context.arguments has path && context.arguments.path like "/etc/{index}/*" }};')
        elif shape == 6:
            host = HOSTS[rng.randrange(len(HOSTS))]
            body = (f'permit(principal == Host::"{host}", action == Action::"callTool", '
                    f'resource == Tool::"{server}/{tool}")\nwhen {{ context.annotations.readOnlyHint }};')
        elif shape == 7:  # every other one without `has`: it errs (and does not apply) on a call without count
            guard = "context.arguments has count && " if index % 20 == 7 else ""
            body = (f'forbid(principal, action == Action::"callTool", resource == Tool::"{server}/{tool}")\n'
                    f'when {{ {guard}context.arguments.count > {index} }};')
        elif shape == 8:
            body = (f'forbid(principal, action == Action::"elicit", resource == Server::"{server}")\n'
                    f'when {{ context.annotations.openWorldHint }};')
        elif index % 20 == 9:
            body = ('forbid(principal, action == Action::"callTool", resource)\n'
                    f'when {{ context.annotations.destructiveHint && context.time.toTime() > duration("{19 + index % 5}h") '
                    f'&& context.arguments has path && context.arguments.path like "*/secret{index}/*" }};')
        else:
            body = (f'permit(principal == Host::"{HOSTS[index % len(HOSTS)]}", action, resource in Server::"{server}")\n'
                    f'when {{ context.arguments has mode && context.arguments.mode == "dry-run-{index}" }};')
        out.append(f'@id("p{index}")\n@reason("generated policy {index}")\n{body}\n')
    return "\n".join(out)


def _targets(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"s{rng.randrange(SERVERS)}", f"tool{rng.randrange(TOOLS)}") for _ in range(n)]


def calls(n: int, policy_count: int, seed: int = 7) -> list[Call]:
    """Calls that hit the generated policies (their tools, paths under their prefixes, counts
    across their bounds, the modes they name) and ones that miss them, across hosts and tools."""
    rng = random.Random(seed)
    targets = _targets(policy_count, 36)
    made: list[Call] = []
    for _ in range(n):
        index = rng.randrange(policy_count)
        server, tool = targets[index] if rng.randrange(3) else (f"s{rng.randrange(SERVERS)}",
                                                                f"tool{rng.randrange(TOOLS)}")
        arguments: dict[str, Any] = {}
        pick = rng.randrange(6)
        if pick == 0:
            arguments["path"] = f"/home/u{index}/notes.txt"
        elif pick == 1:
            arguments["path"] = f"/etc/{index}/passwd"
        elif pick == 2:
            arguments["count"] = rng.randrange(2 * policy_count) if rng.randrange(4) else 2.5  # a float errs
        elif pick == 3:
            arguments["mode"] = f"dry-run-{index}"
        elif pick == 4:
            arguments["path"] = f"/srv/secret{index}/key"
        arguments["text"] = "x" * rng.randrange(40)
        if rng.randrange(4) == 0:
            arguments["nested"] = {"list": [1, 2.5, None, "a"], "flag": True, "none": None}
        annotations = None if rng.randrange(3) == 0 else {"readOnlyHint": rng.random() < 0.5,
                                                           "destructiveHint": rng.random() < 0.5}
        made.append(Call(HOSTS[rng.randrange(len(HOSTS))], server, tool, arguments, annotations))
    return made
