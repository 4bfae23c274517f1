"""The config keys of the consent layer, parsed strictly (a typo in a rule must not go unnoticed).

Per server:
- `toolApproval`: what happens to a tool call a *host* makes (calls typed with `elicitron call` or
  in the window are never asked): `"allow"` (default: the host does its own approvals), `"ask"`,
  `"ask-destructive"` (ask only for tools whose annotations, with MCP's defaults, say they may
  destroy or reach the open world; read-only tools never), `"deny"`;
- `toolApprovalOverrides`: `{"<tool or glob>": "allow" | "ask" | "deny"}`, first match in file
  order, over `toolApproval`.

Top level, `"elicitron": {"rules": [...]}`, each rule one of:
- `{"server": S, "tool": GLOB, "decision": "allow" | "deny"}` — a host's tool calls;
- `{"server": S, "tool": GLOB, "quorum": N, "approvers": [NAME, ...]}` — a host's tool calls need N
  approvals from different listed people (pending.py counts them);
- `{"server": S, "message": GLOB?, "answer": {"action": "accept", "content": {...}} | {"action":
  "decline"}}` — a server's form requests whose message matches (no `message`: any). The content
  is checked against each request's schema when it is used; one that does not fit is skipped with
  a notice and the request is asked in the windows. `"asker": NAME` in place of `"server"`: the
  same for the questions of a program that asks as NAME (`elicitron ask`); a `"server"` rule never
  answers an asker, whatever it calls itself.
- `{"server": S, "tool": GLOB?, "message": GLOB?, "escalateAfterSeconds": N}` — no answer: a request
  unanswered after N s goes to the `notify` webhooks once more (escalation_rules.py).
Config rules get the ids `config-1`, `config-2`, … in file order.
"""

import time
from typing import Any, Final, Literal, cast

from main_process.consent.escalation_rules import is_escalation
from main_process.consent.rules import CONFIG_ID_PREFIX, Rule
from shared.errors import ConfigError
from shared.messages import ElicitationResult

ToolPolicy = Literal["allow", "ask", "ask-destructive", "deny"]
TOOL_POLICIES: Final = ("allow", "ask", "ask-destructive", "deny")
OVERRIDE_POLICIES: Final = ("allow", "ask", "deny")
_TOOL_RULE_KEYS: Final = {"server", "tool", "decision"}
_QUORUM_RULE_KEYS: Final = {"server", "tool", "quorum", "approvers"}
_ANSWER_RULE_KEYS: Final = {"server", "message", "answer"}
_ASKER_RULE_KEYS: Final = {"asker", "message", "answer"}


def parse_tool_approval(where: str, entry: dict[str, Any]) -> tuple[ToolPolicy, tuple[tuple[str, str], ...]]:
    """(`toolApproval`, `toolApprovalOverrides` as (glob, policy) pairs) of one server entry."""
    policy = entry.get("toolApproval", "allow")
    if policy not in TOOL_POLICIES:
        raise ConfigError(f"{where}: \"toolApproval\" must be one of {', '.join(map(repr, TOOL_POLICIES))}")
    overrides = entry.get("toolApprovalOverrides", {})
    if not isinstance(overrides, dict):
        raise ConfigError(f"{where}: \"toolApprovalOverrides\" must be an object of tool (or glob) -> policy")
    for tool, value in overrides.items():
        if not tool or value not in OVERRIDE_POLICIES:
            raise ConfigError(f"{where}: toolApprovalOverrides[{tool!r}] must be one of "
                              f"{', '.join(map(repr, OVERRIDE_POLICIES))}")
    return cast(ToolPolicy, policy), tuple(overrides.items())


def parse_rules(value: Any, source: str) -> tuple[Rule, ...]:
    """The `elicitron.rules` list; ConfigError names the entry and what is wrong with it."""
    if not isinstance(value, list):
        raise ConfigError(f"{source}: elicitron.rules must be a list of rule objects")
    loaded_at = time.time_ns() // 1_000_000
    return tuple(_parse_rule(f"{source}: elicitron.rules[{index}]", index, item, source, loaded_at)
                 for index, item in enumerate(value) if not is_escalation(item))  # escalation_rules.py


def _parse_rule(where: str, index: int, item: Any, source: str, loaded_at: int) -> Rule:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: must be an object")
    asker = "asker" in item
    server = item.get("asker" if asker else "server")
    if not isinstance(server, str) or not server:
        raise ConfigError(f"{where}: needs \"server\" (a configured server's name) or \"asker\" (a program's name)")
    common = {"id": f"{CONFIG_ID_PREFIX}{index + 1}", "source": "config", "server": server,
              "created_at": loaded_at, "created_by": f"config {source}", "party": "asker" if asker else "server"}
    if "tool" in item and "quorum" in item:
        _only(where, item, _QUORUM_RULE_KEYS)
        return _parse_quorum(where, item, common)
    if "tool" in item:
        _only(where, item, _TOOL_RULE_KEYS)
        tool, decision = item["tool"], item.get("decision")
        if not isinstance(tool, str) or not tool:
            raise ConfigError(f"{where}: \"tool\" must be a tool name or glob")
        if decision not in ("allow", "deny"):
            raise ConfigError(f"{where}: a tool rule needs \"decision\": \"allow\" or \"deny\"")
        return Rule(tool=tool, decision=decision, **common)  # type: ignore[arg-type]
    if "answer" in item:
        _only(where, item, _ASKER_RULE_KEYS if asker else _ANSWER_RULE_KEYS)
        message = item.get("message")
        if message is not None and not isinstance(message, str):
            raise ConfigError(f"{where}: \"message\" must be a glob string")
        return Rule(answer=_parse_answer(where, item["answer"]), message=message, **common)  # type: ignore[arg-type]
    raise ConfigError(f"{where}: needs \"tool\" + \"decision\" (a tool rule) or \"answer\" (an answer rule)")


def _parse_quorum(where: str, item: dict[str, Any], common: dict[str, Any]) -> Rule:
    tool, quorum, approvers = item["tool"], item["quorum"], item.get("approvers")
    if not isinstance(tool, str) or not tool:
        raise ConfigError(f"{where}: \"tool\" must be a tool name or glob")
    if not isinstance(approvers, list) or not approvers \
            or not all(isinstance(name, str) and name for name in approvers):
        raise ConfigError(f"{where}: \"approvers\" must be a list of people's names")
    people = tuple(dict.fromkeys(approvers))
    if isinstance(quorum, bool) or not isinstance(quorum, int) or not 1 <= quorum <= len(people):
        raise ConfigError(f"{where}: \"quorum\" must be a whole number from 1 to the number of "
                          f"different approvers ({len(people)})")
    return Rule(tool=tool, quorum=quorum, approvers=people, **common)


def _parse_answer(where: str, answer: Any) -> ElicitationResult:
    if not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline"):
        raise ConfigError(f"{where}: \"answer\" must be {{\"action\": \"accept\", \"content\": {{...}}}} "
                          "or {\"action\": \"decline\"}")
    unknown = set(answer) - {"action", "content"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) in \"answer\": {', '.join(sorted(unknown))}")
    content = answer.get("content")
    if answer["action"] == "decline":
        if content is not None:
            raise ConfigError(f"{where}: a decline carries no \"content\"")
        return ElicitationResult(action="decline")
    if content is None:
        content = {}
    if not isinstance(content, dict):
        raise ConfigError(f"{where}: \"answer.content\" must be an object of field values")
    return ElicitationResult(action="accept", content=content)


def _only(where: str, item: dict[str, Any], allowed: set[str]) -> None:
    unknown = set(item) - allowed
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                          f"(this kind of rule takes {', '.join(sorted(allowed))})")
