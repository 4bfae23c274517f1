"""Remembered answers and approvals as the page lists them, and what it may send about them.

main keeps the rules (shared/PROTOCOL.md §11): a page asks for them after each welcome (`msgRules`),
hears every change (`rules`, to every window), and revokes by id or all at once (`msgRevokeRules`).
Each row reads as in the Qt window's Remembered panel and `elicitron rules` (shared/rule_text.py);
remembered values never reach a window, only the fields a rule fills. Config rules are listed but
cannot be revoked from a window.

An answer's `remember` goes to main as the page sent it (page_peer.py decodes it as main's
`Remember`): main refuses what it cannot keep, and the page shows that refusal.
"""

from typing import Any

from shared.messages import RevokeReport, RuleInfo
from shared.rule_text import describe, scope_text, when, who

CONFIG_RULE = "config rule: change it in the config file"


def rule_row(rule: RuleInfo) -> dict[str, Any]:
    """One row of the page's Remembered list."""
    return {"id": rule.id, "who": who(rule), "what": describe(rule), "scope": scope_text(rule),
            "made": f"made by {rule.created_by}, {when(rule.created_at)}", "revocable": rule.source == "user",
            "note": CONFIG_RULE if rule.source == "config" else "", "applies": rule.applies}


def rules_message(rules: list[RuleInfo]) -> dict[str, Any]:
    return {"type": "rules", "rules": [rule_row(rule) for rule in rules]}


def revoked_message(report: RevokeReport | None, error: str | None = None) -> dict[str, Any]:
    """What main answered a revoke, as one sentence per line for the page."""
    if report is None:
        return {"type": "revoked", "lines": [f"Not revoked: {error or 'main gave no answer'}"], "problem": True}
    lines = [f"Revoked {', '.join(report.revoked)}." if report.revoked else "Nothing was revoked."]
    lines += [f"Not revoked: {problem}" for problem in report.refused]
    return {"type": "revoked", "lines": lines, "problem": bool(report.refused)}
