"""Escalation rules of the config (`"elicitron": {"rules": [...]}`, issue 35): a request still
unanswered after N seconds goes to the `notify` webhooks once more, to reach someone else.

`{"server": S, "tool": GLOB?, "message": GLOB?, "escalateAfterSeconds": N}` (`"asker": NAME` in place
of `"server"` for `elicitron ask`'s questions): no answer and no decision, so it is a rule of its own
kind, read here and left out of the answering rules (consent_config.py). `tool` matches a tool
approval's tool, `message` a form's message (globs; absent: any). The notifier (notify/escalation.py)
applies them.
"""

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from shared.errors import ConfigError
from shared.messages import ElicitationInvoke

ESCALATE_KEY: Final = "escalateAfterSeconds"
MAX_ESCALATE_S: Final = 86_400.0
_KEYS: Final = {"server", "asker", "tool", "message", ESCALATE_KEY}


def _glob(pattern: str | None) -> re.Pattern[str] | None:
    return None if pattern is None else re.compile(fnmatch.translate(pattern), re.DOTALL)


@dataclass(frozen=True)
class Escalation:
    """One escalation rule: which requests, and after how long they go out again."""

    name: str  # the server's name, or the asker's
    party: Literal["server", "asker"]
    after_s: float
    tool: str | None = None
    message: str | None = None
    _tool: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _message: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tool", _glob(self.tool))
        object.__setattr__(self, "_message", _glob(self.message))

    def matches(self, invoke: ElicitationInvoke, message: str) -> bool:
        if self.party == "asker":
            if invoke.asker is None or invoke.asker.name != self.name:
                return False
        elif invoke.asker is not None or invoke.request.server != self.name:
            return False
        if self._tool is not None and (invoke.approval is None or not self._tool.fullmatch(invoke.approval.tool)):
            return False
        return self._message is None or self._message.fullmatch(message) is not None


def is_escalation(item: Any) -> bool:
    return isinstance(item, dict) and ESCALATE_KEY in item


def parse_escalations(value: Any, source: str) -> tuple[Escalation, ...]:
    """The escalation rules of the `elicitron.rules` list (its other entries: consent_config.py)."""
    if not isinstance(value, list):
        return ()  # parse_rules says what is wrong with the list
    return tuple(_parse(f"{source}: elicitron.rules[{index}]", item)
                 for index, item in enumerate(value) if is_escalation(item))


def _parse(where: str, item: dict[str, Any]) -> Escalation:
    if unknown := sorted(set(item) - _KEYS):
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (an escalation rule takes "
                          f"{', '.join(sorted(_KEYS))})")
    asker = "asker" in item
    name = item.get("asker" if asker else "server")
    if not isinstance(name, str) or not name or ("asker" in item and "server" in item):
        raise ConfigError(f"{where}: needs \"server\" (a configured server's name) or \"asker\" (a program's name)")
    after = item[ESCALATE_KEY]
    if isinstance(after, bool) or not isinstance(after, int | float) or not 0 < after <= MAX_ESCALATE_S:
        raise ConfigError(f"{where}: \"{ESCALATE_KEY}\" must be a number of seconds above 0 (at most "
                          f"{MAX_ESCALATE_S:.0f})")
    for key in ("tool", "message"):
        if key in item and not (isinstance(item[key], str) and item[key]):
            raise ConfigError(f"{where}: \"{key}\" must be a glob string")
    return Escalation(name=name, party="asker" if asker else "server", after_s=float(after),
                      tool=item.get("tool"), message=item.get("message"))
