"""Rules and what they match. Pure: no I/O, no clock of its own, no sockets.

A rule decides something before any window is asked:
- an **answer rule** answers a server's form-mode elicitation (accept with content, or decline);
- a **tool rule** decides a host's tool call (allow or deny).

Rules come from two places. **User rules** are made in a window ("Remember my answer", "Allow
for this session", "Always allow") and match exactly. **Config rules** come from the config's
`"elicitron": {"rules": [...]}` and match by glob (`tool`, `message`); they are read-only here.

"The same question" (user answer rules): the same server, the same message and the same requested
schema, compared after normalising, so nothing a server varies from one request to the next
changes it:
- the message: Unicode NFC, whitespace runs collapsed to one space, trimmed;
- the schema: compared as canonical JSON (keys sorted) with every `default` removed: a default
  only pre-fills the form (a server may put today's date there), it does not change what is asked;
- nothing else of the request: not `_meta`, not request ids. Form mode only: URL-mode requests
  (and sign-ins, which are URL mode) never have a key, so no rule can ever answer them.

Order (first match wins): config rules in file order, then user rules. Config first, so a `deny`
added to the config beats an "Always allow" a user gave before.
"""

import fnmatch
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from shared.messages import ElicitationResult, RuleInfo

Scope = Literal["session", "always", "until"]
Decision = Literal["allow", "deny"]

CONFIG_ID_PREFIX: Final = "config-"


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: str
    source: Literal["user", "config"]
    server: str
    created_at: int  # epoch ms
    created_by: str
    scope: Scope = "always"
    expires_at: int | None = None  # epoch ms; scope "until"
    # a tool rule: `tool` (exact; a glob in config rules) and `decision`
    tool: str | None = None
    decision: Decision | None = None
    # an answer rule: `answer`; user rules match `question`, config rules `message` (a glob, None = any)
    answer: ElicitationResult | None = None
    question: str | None = None
    message: str | None = None
    fields: tuple[str, ...] = ()

    @property
    def kind(self) -> Literal["answer", "tool"]:
        return "tool" if self.tool is not None else "answer"

    def expired(self, now_ms: int) -> bool:
        return self.expires_at is not None and self.expires_at <= now_ms

    def info(self) -> RuleInfo:
        """What windows and the CLI see: never the remembered values."""
        action = self.answer.action if self.answer is not None else None
        return RuleInfo(
            id=self.id, source=self.source, kind=self.kind, server=self.server, scope=self.scope,
            created_at=self.created_at, created_by=self.created_by, expires_at=self.expires_at, tool=self.tool,
            decision=self.decision, message=self.message, fields=list(self.fields) if self.fields else None,
            action=action if action in ("accept", "decline") else None,
        )


# ---- "the same question" ----------------------------------------------------------------


def normalise_message(message: str) -> str:
    return " ".join(unicodedata.normalize("NFC", message).split())


def question_key(params: Mapping[str, Any]) -> str | None:
    """The key of a form-mode request's question (message + schema, normalised); None for
    anything else (URL mode, sign-in): those are never answered by a rule."""
    if params.get("mode", "form") != "form":
        return None
    message = params.get("message")
    schema = params.get("requestedSchema")
    if not isinstance(message, str) or not isinstance(schema, Mapping):
        return None
    canonical = msgspec.json.encode(_without_defaults(schema), order="sorted")
    digest = hashlib.blake2b(normalise_message(message).encode() + b"\0" + canonical, digest_size=16)
    return digest.hexdigest()


def _without_defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    copy = dict(schema)
    properties = copy.get("properties")
    if isinstance(properties, Mapping):
        copy["properties"] = {
            name: {k: v for k, v in prop.items() if k != "default"} if isinstance(prop, Mapping) else prop
            for name, prop in properties.items()
        }
    return copy


def schema_fields(params: Mapping[str, Any]) -> tuple[str, ...]:
    schema = params.get("requestedSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return tuple(str(name) for name in properties) if isinstance(properties, Mapping) else ()


# ---- globs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Glob:
    """A shell-style pattern (`*`, `?`, `[...]`), case-sensitive, matched against the whole text."""

    pattern: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile(fnmatch.translate(self.pattern), re.DOTALL))

    def matches(self, text: str) -> bool:
        return self._regex.match(text) is not None  # type: ignore[attr-defined]


# ---- the book of rules -------------------------------------------------------------------


class RuleBook:
    """Every rule main knows, indexed for the lookups a request needs.

    Lookups that find nothing cost one set or dict lookup: servers without rules of a kind are
    known up front."""

    def __init__(self) -> None:
        self._config: list[Rule] = []
        self._config_globs: dict[str, tuple[Glob | None, Glob | None]] = {}  # id -> (tool, message)
        self._answers: dict[tuple[str, str], Rule] = {}  # (server, question key) -> user rule
        self._tools: dict[tuple[str, str], Rule] = {}  # (server, tool) -> user rule
        self._by_id: dict[str, Rule] = {}
        self._answer_servers: set[str] = set()
        self._tool_servers: set[str] = set()

    # ---- changing ----------------------------------------------------------------------

    def set_config(self, rules: Iterable[Rule]) -> None:
        for old in self._config:
            self._by_id.pop(old.id, None)
        self._config = list(rules)
        self._config_globs = {
            rule.id: (Glob(rule.tool) if rule.tool is not None else None,
                      Glob(rule.message) if rule.message is not None else None)
            for rule in self._config
        }
        for rule in self._config:
            self._by_id[rule.id] = rule
        self._reindex_servers()

    def add(self, rule: Rule) -> Rule | None:
        """Add a user rule; returns the user rule it replaces (same server and question or tool)."""
        key = (rule.server, rule.tool if rule.tool is not None else rule.question or "")
        index = self._tools if rule.tool is not None else self._answers
        replaced = index.get(key)
        if replaced is not None:
            self._by_id.pop(replaced.id, None)
        index[key] = rule
        self._by_id[rule.id] = rule
        self._reindex_servers()
        return replaced

    def remove(self, rule_id: str) -> Rule | None:
        """Forget a user rule; None if there is no such user rule."""
        rule = self._by_id.get(rule_id)
        if rule is None or rule.source != "user":
            return None
        del self._by_id[rule_id]
        index = self._tools if rule.tool is not None else self._answers
        key = (rule.server, rule.tool if rule.tool is not None else rule.question or "")
        if index.get(key) is rule:
            del index[key]
        self._reindex_servers()
        return rule

    def _reindex_servers(self) -> None:
        self._answer_servers = {server for server, _ in self._answers}
        self._answer_servers |= {rule.server for rule in self._config if rule.answer is not None}
        self._tool_servers = {server for server, _ in self._tools}
        self._tool_servers |= {rule.server for rule in self._config if rule.tool is not None}

    # ---- reading -----------------------------------------------------------------------

    def get(self, rule_id: str) -> Rule | None:
        return self._by_id.get(rule_id)

    def all(self) -> list[Rule]:
        """Config rules in file order, then user rules oldest first."""
        users = sorted((r for r in self._by_id.values() if r.source == "user"), key=lambda r: (r.created_at, r.id))
        return [*self._config, *users]

    def user_rules(self) -> list[Rule]:
        return [rule for rule in self.all() if rule.source == "user"]

    def has_answer_rules(self, server: str) -> bool:
        return server in self._answer_servers

    def has_tool_rules(self, server: str) -> bool:
        return server in self._tool_servers

    def answer_candidates(self, server: str, params: Mapping[str, Any]) -> list[Rule]:
        """Answer rules that match this request, in the order they apply (config, then user).
        Empty for anything but form mode. Expiry is the caller's to check."""
        if server not in self._answer_servers:
            return []
        key = question_key(params)
        if key is None:
            return []
        message = normalise_message(str(params.get("message", "")))
        found = [
            rule for rule in self._config
            if rule.answer is not None and rule.server == server
            and _glob_ok(self._config_globs[rule.id][1], message)
        ]
        user = self._answers.get((server, key))
        if user is not None:
            found.append(user)
        return found

    def tool_rule(self, server: str, tool: str) -> Rule | None:
        """The first tool rule for this call (config, then user). Expiry is the caller's to check."""
        if server not in self._tool_servers:
            return None
        for rule in self._config:
            if rule.tool is not None and rule.server == server and _glob_ok(self._config_globs[rule.id][0], tool):
                return rule
        return self._tools.get((server, tool))

    def expired(self, now_ms: int) -> list[Rule]:
        return [rule for rule in self._by_id.values() if rule.expired(now_ms)]

    def next_expiry(self) -> int | None:
        times = [rule.expires_at for rule in self._by_id.values() if rule.expires_at is not None]
        return min(times) if times else None


def _glob_ok(glob: Glob | None, text: str) -> bool:
    return glob is None or glob.matches(text)
