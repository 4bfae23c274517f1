"""Tool-call approval: which host calls are asked and what the request looks like (what a denial
says: denial.py).

An approval travels as a plain form-mode invoke, so any v1 window can answer it: its schema has
one required enum property `decision` (`allow-once`, `allow-session`, `allow-always`, `deny`), and
its message says who wants to call what, with the arguments. The invoke's extension fields
(`kind: "approval"`, `via`, `approval: {server, tool, arguments, title, description, annotations}`)
let Elicitron's own window draw an approval card instead; `approval.grants` offers grants (grants.py)
and an answer's `grant` says which one an allow-session / allow-always makes. Any answer other than
an accepted `allow-*` (deny, decline, cancel, expiry, the host going away) means the call is not made.
"""

import functools
import json
from collections.abc import Callable
from typing import Any, Final

from main_process.config import ServerConfig
from main_process.consent import grants
from main_process.consent.consent_config import ToolPolicy
from main_process.consent.rules import Glob
from shared import tool_hints
from shared.messages import (
    APPROVAL_DECISIONS,
    DECISION_PROPERTY,
    ApprovalDecision,
    ApprovalInfo,
    ElicitationResult,
    GrantChoice,
    GrantOffer,
)

_ARGUMENTS_IN_MESSAGE: Final = 600  # characters of JSON arguments a v1 window shows in the message
_DECISION_TITLES: Final = ("Allow once", "Allow for this session", "Always allow", "Deny")

APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        DECISION_PROPERTY: {
            "type": "string",
            "title": "Decision",
            "enum": list(APPROVAL_DECISIONS),
            "enumNames": list(_DECISION_TITLES),
        },
    },
    "required": [DECISION_PROPERTY],
}


def policy_for(config: ServerConfig, tool: str, annotations: Callable[[], dict[str, Any] | None]) -> ToolPolicy:
    """"allow", "ask" or "deny" for a host's call of `tool` (overrides first, then toolApproval;
    "ask-destructive" resolved with the tool's annotations, which are read only then)."""
    policy: str = config.tool_approval
    for pattern, override in config.tool_approval_overrides:
        if _glob(pattern).matches(tool):
            policy = override
            break
    if policy == "ask-destructive":
        return "ask" if tool_hints.warrants_asking(annotations()) else "allow"
    return policy  # type: ignore[return-value]


def may_ask(config: ServerConfig) -> bool:
    """Whether `policy_for` can say "ask" for some tool of this server."""
    asking = ("ask", "ask-destructive")
    return config.tool_approval in asking or any(policy in asking for _, policy in config.tool_approval_overrides)


@functools.lru_cache(maxsize=1024)
def _glob(pattern: str) -> Glob:
    return Glob(pattern)


def approval_params(host: str, info: ApprovalInfo) -> dict[str, Any]:
    """The form-mode `ElicitRequestParams` of an approval (what a v1 window shows)."""
    arguments = json.dumps(info.arguments, ensure_ascii=False, sort_keys=True, default=str)
    if len(arguments) > _ARGUMENTS_IN_MESSAGE:
        arguments = arguments[:_ARGUMENTS_IN_MESSAGE - 1] + "…"
    what = f"{info.server}/{info.tool}" + (f" ({info.title})" if info.title else "")
    return {
        "mode": "form",
        "message": f"{host} wants to call {what} with {arguments}. Allow it?",
        "requestedSchema": APPROVAL_SCHEMA,
    }


def decision_of(answer: ElicitationResult) -> ApprovalDecision:
    """What an answer to an approval decides: anything but an accepted allow-* denies."""
    if answer.action == "accept" and answer.content is not None:
        decision = answer.content.get(DECISION_PROPERTY)
        if decision in APPROVAL_DECISIONS:
            return decision  # type: ignore[no-any-return]
    return "deny"


def allowed(decision: ApprovalDecision) -> bool:
    return decision != "deny"


GRANT_DECISIONS: Final = ("allow-session", "allow-always")  # the decisions a `grant` may go with


def grant_offer(arguments: dict[str, Any]) -> GrantOffer:
    """What an approval card may offer besides allow once and deny (`approval.grants`)."""
    return GrantOffer(arguments=["exact", "pattern", "any"], durations=["session", "hour", "until", "always"],
                      pattern=grants.proposed_pattern(arguments))


def grant_of(answer: ElicitationResult) -> GrantChoice | None:
    """The grant an approval's answer makes, None for allow-once and any denial: its `grant`, or
    for a v1 answer, allow-session and allow-always for any arguments, as before grants."""
    decision = decision_of(answer)
    if decision in GRANT_DECISIONS and answer.grant is not None:
        return answer.grant
    if decision == "allow-session":
        return GrantChoice(arguments="any", duration="session")
    if decision == "allow-always":
        return GrantChoice(arguments="any", duration="always")
    return None
