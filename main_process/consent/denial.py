"""Every denied tool call's result, built in one place (issue 36, item 3): what a host gets when a
person, a rule, the config or a policy file says no.

MCP wants a denial as a tool result, not a protocol error: `isError: true` and text the model reads
and can act on. The text says who denied the call, why (when anyone said), that it was not made,
and whether asking again may help. `_meta` carries the same facts for a host that reads them:

- `io.modelcontextprotocol/authorization`: the authorization denial envelope of SEP-2643
  (Structured Authorization Denials, a draft: the revision of PR #2643 with the `remediation`
  member and the envelope in the result's `_meta`). `reason` is always
  `insufficient_authorization`; `remediation` is `available` when asking again may succeed (a
  person decides afresh) and `unavailable` when it will not (a policy, a rule or the config decides
  the same way again); `authorizationContextId` is the audit row's id (its `channel`: the card's
  reply channel, or consent/row_ids.py's id when no card opened), so a person asking why can find
  it in `elicitron audit --json`. No remediation hints: the draft's hint types
  (a URL, a task, an OAuth remediation) are not how a denial here is undone.
- `elicitron/denial` (ours, as SEP-2643 has no member for who decided): `deniedBy` (`person`,
  `nobody` (no answer in time), `rule`, `config` or `policy`), `id` (the rule's or policy's id, or
  `toolApproval`), `window` and `device` (the person's window and the paired device it answered
  for), `reason` (what the person typed on the card, or the policy's `@reason`), `retry` (`yes`,
  `maybe`, `no`, `until-revoked` or `until-config-changed`), `server`, `tool`.
"""

from dataclasses import dataclass
from typing import Any, Final, Literal

DeniedBy = Literal["person", "nobody", "rule", "config", "policy"]
Retry = Literal["yes", "maybe", "no", "until-revoked", "until-config-changed"]

SEP_2643_KEY: Final = "io.modelcontextprotocol/authorization"
DENIAL_KEY: Final = "elicitron/denial"
TOOL_APPROVAL_ID: Final = "toolApproval"  # `id` of a denial by the server's toolApproval "deny"

_RETRY: Final[dict[DeniedBy, Retry]] = {
    "person": "maybe",  # the person may allow it when asked again, e.g. once told why it is needed
    "nobody": "yes",  # nobody decided: asking again shows a new card
    "rule": "until-revoked",  # a remembered rule answers the same way until the person revokes it
    "config": "until-config-changed",  # a config rule or toolApproval: until the file is edited
    "policy": "no",  # a forbid policy forbids it again
}


@dataclass(frozen=True, slots=True)
class Denial:
    """Why one host's call of `server`/`tool` was not made."""

    server: str
    tool: str
    by: DeniedBy
    id: str | None = None  # the rule's id, the policy's id, or TOOL_APPROVAL_ID
    window: str | None = None  # a person: the name of the window they answered in
    device: str | None = None  # ... and of the paired device a web window's page answered for
    reason: str | None = None  # what the person typed on the card, or the policy's @reason
    context: str | None = None  # the audit row's channel

    @property
    def retry(self) -> Retry:
        return _RETRY[self.by]

    def result(self) -> dict[str, Any]:
        """The CallToolResult the host gets: the sentence as text, the structured denial in `_meta`."""
        envelope: dict[str, Any] = {"reason": "insufficient_authorization",
                                    "remediation": "available" if self.retry in ("yes", "maybe") else "unavailable"}
        if self.context is not None:
            envelope["authorizationContextId"] = self.context
        ours: dict[str, Any] = {"deniedBy": self.by}
        for key, value in (("id", self.id), ("window", self.window), ("device", self.device),
                           ("reason", self.reason)):
            if value is not None:
                ours[key] = value
        ours.update(retry=self.retry, server=self.server, tool=self.tool)
        return {"content": [{"type": "text", "text": self.sentence()}], "isError": True,
                "_meta": {SEP_2643_KEY: envelope, DENIAL_KEY: ours}}

    def sentence(self) -> str:
        """Who denied it and why, that it was not called, and what the model may do next."""
        call = f"{self.server}/{self.tool}"
        match self.by:
            case "person":
                return (f"The user denied this call in Elicitron{self._where()}: {call} was not called."
                        f"{_said(self.reason)} Do not repeat it unchanged: continue without it, or tell the user why "
                        "it is needed; if you call it again they are asked again and may allow it.")
            case "nobody":
                return (f"Nobody answered the approval request in Elicitron in time: {call} was not called. "
                        "You may call it again; the user will be asked again.")
            case "policy":
                why = f": {self.reason.rstrip('.')}" if self.reason else ""
                return (f"Policy {self.id!r} in the user's Elicitron configuration forbids this call{why}. "
                        f"{call} was not called. Do not retry it: the policy forbids it every time; continue "
                        "without it, or ask the user to change the policy.")
            case "rule":
                return (f"A rule the user saved in Elicitron ({self.id}) denies this call: {call} was not called. "
                        "Do not retry it: it stays denied until the user revokes the rule in Elicitron.")
            case "config" if self.id == TOOL_APPROVAL_ID:
                return (f"The user's Elicitron configuration does not allow this tool (toolApproval \"deny\"): "
                        f"{call} was not called. Do not retry it: it stays denied until the user changes "
                        "the configuration.")
            case "config":
                return (f"A rule in the user's Elicitron configuration ({self.id}) denies this call: {call} was "
                        "not called. Do not retry it: it stays denied until the user changes the configuration.")

    def _where(self) -> str:
        if self.device is not None:
            return f' (on the device "{self.device}")'
        return f' (in the window "{self.window}")' if self.window is not None else ""


def _said(reason: str | None) -> str:
    return f' The user\'s reason: "{reason.rstrip(".")}".' if reason else ""
