"""How a rule reads to a person, the same in `elicitron rules` and in the window's Remembered panel."""

import time

from shared import grant_text
from shared.messages import RuleInfo


def who(rule: RuleInfo) -> str:
    """Whose requests it decides: the server's name, or "program deploy.sh" for an asker's."""
    return f"program {rule.server}" if rule.party == "asker" else rule.server


def describe(rule: RuleInfo) -> str:
    """ "tool read_* → allow", "“Book a table?” → accept (name, party_size)", with "(Claude only)"
    for a host's session approval and "[not applying: …]" for a rule given to another program."""
    return _what(rule) + (f" ({rule.host} only)" if rule.host is not None else "") + (
        "" if rule.applies else f" [not applying: {rule.server} is another program now; asked again]")


def _what(rule: RuleInfo) -> str:
    if rule.kind == "tool" and rule.quorum is not None:
        return f"tool {rule.tool} → ask {rule.quorum.needed} of {', '.join(rule.quorum.approvers)}"
    if rule.kind == "tool" and rule.arguments is not None:  # a grant: what it covers, in the card's words
        once = ", one call only" if rule.single_use else ""
        return f"tool {grant_text.arguments_text(rule.tool or '', rule.arguments, rule.pattern)} → {rule.decision}{once}"
    if rule.kind == "tool":
        return f"tool {rule.tool} → {rule.decision}"
    if rule.message is None:
        asked = "any form request"
    elif rule.source == "config":
        asked = f"messages like “{rule.message}”"
    else:
        asked = f"“{rule.message}”"
    fields = f" ({', '.join(rule.fields)})" if rule.fields and rule.action == "accept" else ""
    return f"{asked} → {rule.action}{fields}"


def scope_text(rule: RuleInfo) -> str:
    if rule.source == "config":
        return "config"
    if rule.scope == "until" and rule.expires_at is not None:
        return "until " + when(rule.expires_at)
    return {"session": "this session", "always": "always"}.get(rule.scope, rule.scope)


def when(epoch_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch_ms / 1000))
