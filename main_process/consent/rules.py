"""Rules and what they match. Pure: no I/O, no clock of its own, no sockets.

A rule decides something before any window is asked:
- an **answer rule** answers a server's form-mode elicitation (accept with content, or decline);
- a **tool rule** decides a host's tool call (allow or deny).

Rules come from two places. **User rules** are made in a window ("Remember my answer", "Allow
for this session", "Always allow") and match exactly. **Config rules** come from the config's
`"elicitron": {"rules": [...]}` and match by glob (`tool`, `message`); they are read-only here.

Consent is bound to whom it was given to:
- **who asks** (`party`): a configured server, or a program asking through `elicitron ask`
  ("asker"). The two are separate namespaces: an asker that calls itself "demo" gets none of the
  server demo's remembered answers, and an answer remembered on its card never answers the server;
- **which program** (`identity`, user rules of servers): `server_identity` of the server's entry
  (command and arguments, or URL) when the rule was made. A rule applies only while the server of
  that name is that program: a replaced entry is asked again (its old rules are listed as not
  applying, and apply again if the old program comes back). Config rules are not bound: they live
  in the config beside the entry they are about;
- **which host** (`host`, "Allow for this session"): the host's link id; such a rule covers that
  host's calls only. "Always allow" covers every host;
- **which arguments** (user tool rules: grants.py): the approved arguments exactly, arguments like
  them (a glob per argument), or any; a single-use grant covers one call.

"The same question" (user answer rules): the same asker (party and name), the same message and the
same requested schema, compared after normalising, so nothing a server varies from one request to the next
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

from main_process.consent.grants import ANY, BREADTH, Coverage, arguments_digest, covers_digest
from shared.elicit_params import ElicitParams, FormParams
from shared.messages import ElicitationResult, QuorumInfo, RuleInfo

Scope = Literal["session", "always", "until"]
Decision = Literal["allow", "deny"]
Party = Literal["server", "asker"]

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
    decision: Decision | None = None  # None on a quorum rule (config only): it asks, `quorum` of `approvers`
    quorum: int | None = None
    approvers: tuple[str, ...] = ()
    # an answer rule: `answer`; user rules match `question`, config rules `message` (a glob, None = any)
    answer: ElicitationResult | None = None
    question: str | None = None
    message: str | None = None
    fields: tuple[str, ...] = ()
    # who it was given to (see the module's docstring)
    party: Party = "server"
    identity: str | None = None  # user rules of servers: server_identity when made; None = not bound
    host: str | None = None  # a session approval: the host's link id (Peer.window); None = every host
    host_name: str | None = None  # that host's name, to show
    # a grant (user tool rules, grants.py): which arguments it covers, and whether it covers one call only
    coverage: Coverage = ANY
    single_use: bool = False

    @property
    def kind(self) -> Literal["answer", "tool"]:
        return "tool" if self.tool is not None else "answer"

    def expired(self, now_ms: int) -> bool:
        return self.expires_at is not None and self.expires_at <= now_ms

    def applies_to(self, identity: str | None) -> bool:
        """Whether this rule may decide for the server of its name when that server is `identity`
        (the current program; None: no such server configured). Askers' and config rules always."""
        return self.party == "asker" or self.source == "config" or self.identity == identity

    def of(self, server: str | None, asker: str | None) -> bool:
        """Whether it is the server `server`'s rule, or the asker `asker`'s (neither given: any), as
        `revoke --all --server S` / `--asker NAME` take them."""
        if server is not None:
            return self.party == "server" and self.server == server
        return asker is None or (self.party == "asker" and self.server == asker)

    def covers_digest(self) -> str:
        """The digest of what a tool rule covers (grants.py), stored with it."""
        return covers_digest(self.server, self.tool or "", self.decision, self.coverage)

    def info(self, applies: bool = True) -> RuleInfo:
        """What windows and the CLI see: never the remembered values (nor the program's identity)."""
        action = self.answer.action if self.answer is not None else None
        return RuleInfo(
            id=self.id, source=self.source, kind=self.kind, server=self.server, scope=self.scope,
            created_at=self.created_at, created_by=self.created_by, expires_at=self.expires_at, tool=self.tool,
            decision=self.decision, message=self.message, fields=list(self.fields) if self.fields else None,
            action=action if action in ("accept", "decline") else None, party=self.party, host=self.host_name,
            applies=applies, quorum=None if self.quorum is None else
            QuorumInfo(needed=self.quorum, approvers=list(self.approvers), approved=[]),
            arguments=self.coverage.arguments if self.kind == "tool" and self.source == "user" else None,
            pattern=self.coverage.pattern_dict(), single_use=self.single_use,
        )


# ---- "the same question" ----------------------------------------------------------------


def normalise_message(message: str) -> str:
    return " ".join(unicodedata.normalize("NFC", message).split())


def question_key(params: ElicitParams) -> str | None:
    """The key of a form-mode request's question (message + schema, normalised); None for
    anything else (URL mode, sign-in): those are never answered by a rule."""
    if not isinstance(params, FormParams):
        return None
    canonical = msgspec.json.encode(_without_defaults(params.requested_schema), order="sorted")
    digest = hashlib.blake2b(normalise_message(params.message).encode() + b"\0" + canonical, digest_size=16)
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


def schema_fields(params: ElicitParams) -> tuple[str, ...]:
    properties = params.requested_schema.get("properties") if isinstance(params, FormParams) else None
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
        self._answers: dict[tuple[Party, str, str], Rule] = {}  # (party, name, question key) -> user rule
        # (server, tool, host) -> {coverage key -> user rule}: grants of one tool differ by the arguments they cover
        self._tools: dict[tuple[str, str, str | None], dict[str, Rule]] = {}
        self._by_id: dict[str, Rule] = {}
        self._answer_askers: set[tuple[Party, str]] = set()
        self._tool_servers: set[str] = set()

    # ---- changing ----------------------------------------------------------------------

    def asks_quorum(self, server: str) -> bool:
        """Whether a config rule asks a quorum of people for a tool of `server`."""
        return any(rule.quorum is not None and rule.server == server for rule in self._config)

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
        """Add a user rule; returns the user rule it replaces (the same asker and question, or the
        same server, tool, host and coverage of arguments), whichever program that one was given to."""
        replaced = self._index_get(rule)
        if replaced is not None:
            self._by_id.pop(replaced.id, None)
        if rule.tool is not None:
            self._tools.setdefault((rule.server, rule.tool, rule.host), {})[rule.coverage.key()] = rule
        else:
            self._answers[(rule.party, rule.server, rule.question or "")] = rule
        self._by_id[rule.id] = rule
        self._reindex_servers()
        return replaced

    def _index_get(self, rule: Rule) -> Rule | None:
        if rule.tool is not None:
            return self._tools.get((rule.server, rule.tool, rule.host), {}).get(rule.coverage.key())
        return self._answers.get((rule.party, rule.server, rule.question or ""))

    def remove(self, rule_id: str) -> Rule | None:
        """Forget a user rule; None if there is no such user rule."""
        rule = self._by_id.get(rule_id)
        if rule is None or rule.source != "user":
            return None
        del self._by_id[rule_id]
        if self._index_get(rule) is rule:
            if rule.tool is not None:
                grants = self._tools[(rule.server, rule.tool, rule.host)]
                del grants[rule.coverage.key()]
                if not grants:
                    del self._tools[(rule.server, rule.tool, rule.host)]
            else:
                del self._answers[(rule.party, rule.server, rule.question or "")]
        self._reindex_servers()
        return rule

    def _reindex_servers(self) -> None:
        self._answer_askers = {(party, name) for party, name, _ in self._answers}
        self._answer_askers |= {(rule.party, rule.server) for rule in self._config if rule.answer is not None}
        self._tool_servers = {server for server, _, _ in self._tools}
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

    def has_answer_rules(self, server: str, party: Party = "server") -> bool:
        return (party, server) in self._answer_askers

    def has_tool_rules(self, server: str) -> bool:
        return server in self._tool_servers

    def answer_candidates(self, server: str, params: ElicitParams, *, party: Party = "server",
                          identity: str | None = None) -> list[Rule]:
        """Answer rules that match this request of `server` (an asker's name with party "asker"),
        in the order they apply (config, then user); a server's user rule only if it was given to
        the program `identity`. Empty for anything but form mode. Expiry is the caller's to check."""
        if (party, server) not in self._answer_askers:
            return []
        key = question_key(params)
        if key is None:
            return []
        message = normalise_message(params.message)
        found = [
            rule for rule in self._config
            if rule.answer is not None and rule.server == server and rule.party == party
            and _glob_ok(self._config_globs[rule.id][1], message)
        ]
        user = self._answers.get((party, server, key))
        if user is not None and user.applies_to(identity):
            found.append(user)
        return found

    def tool_rule(self, server: str, tool: str, *, host: str | None = None, identity: str | None = None,
                  arguments: Mapping[str, Any] | None = None) -> Rule | None:
        """The first tool rule for this call of `host` (its link id) with `arguments` (None: not
        known, so only grants for any arguments): config rules, then the user grants of this host and
        of every host: one that lasts before a single-use one, the narrowest first, this host's first; user rules
        only if given to the program `identity`. Expiry is the caller's to check."""
        if server not in self._tool_servers:
            return None
        for rule in self._config:
            if rule.tool is not None and rule.server == server and _glob_ok(self._config_globs[rule.id][0], tool):
                return rule
        keys = ((server, tool, host), (server, tool, None)) if host is not None else ((server, tool, None),)
        users = [rule for key in keys for rule in self._tools.get(key, {}).values()]
        if len(users) > 1:
            users.sort(key=_grant_order)
        digest: str | None = None  # the call's arguments digest, made once and only for an exact grant
        for user in users:
            coverage = user.coverage
            if not user.applies_to(identity) or (arguments is None and coverage.arguments != "any"):
                continue
            if coverage.arguments == "exact":
                digest = digest or arguments_digest(arguments or {})
                if coverage.digest == digest:
                    return user
            elif coverage.arguments == "any" or coverage.matches(arguments or {}):
                return user
        return None

    def expired(self, now_ms: int) -> list[Rule]:
        return [rule for rule in self._by_id.values() if rule.expired(now_ms)]

    def next_expiry(self) -> int | None:
        times = [rule.expires_at for rule in self._by_id.values() if rule.expires_at is not None]
        return min(times) if times else None


def _grant_order(rule: Rule) -> tuple[bool, int, bool]:
    """A lasting grant before a single-use one, the narrowest first, a host's own first."""
    return rule.single_use, BREADTH[rule.coverage.arguments], rule.host is None


def _glob_ok(glob: Glob | None, text: str) -> bool:
    return glob is None or glob.matches(text)
