"""One call decided by the loaded policies: forbid, permit, or no match (Cedar's "deny" with no
policy behind it, which here means "not decided: today's flow").

Only a *slice* of the set is looked at (scope.py): for each (principal, action, resource) met, the
policies whose scope can match it, less those whose `has` tests the call's arguments fail; a slice
with no policy is "no match" at once. A slice whose policies are all plain is decided in Python
(direct.py, compiled once per policy); otherwise, or when a value is one Cedar would refuse, Cedar
decides, with a policy set of the slice's own and only the context it reads (no datetime unless a
policy reads the time). The decision is Cedar's over the whole set either way
(test_policy_fast.py checks it); docs/benchmarks.md has the costs. One difference, on purpose: text
Cedar cannot read (a lone surrogate, which JSON escapes can carry) in an argument no policy reads
no longer makes the whole request fail, so it no longer slips a call past a forbid.
"""

import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from main_process.policy import direct, schema, scope
from main_process.policy.load import LoadedPolicies, PolicyInfo

logger = logging.getLogger(__name__)

Decision = Literal["permit", "forbid", "none"]

_SCOPES = 1024  # (principal, action, resource) triples whose policies are kept
_SLICES_PER_SCOPE = 64  # of those, the sets of tested arguments calls sent
_REPORTED = 256  # evaluation errors logged once each (a policy reading an argument most calls lack)


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    policy: PolicyInfo | None  # the one that decided (the first in file order); None: no match
    errors: tuple[str, ...] = ()  # policies that could not be evaluated (e.g. an argument not sent)


_NO_MATCH = Verdict("none", None)
Annotations = dict[str, Any] | None | Callable[[], dict[str, Any] | None]  # a tool's, or how to get them
_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Slice:
    policies: Any  # cedarpy.PolicySet of the policies that can apply; None when none can
    reads: scope.Reads  # what of the context they read
    compiled: tuple[tuple[PolicyInfo, direct.Compiled], ...] | None  # each in Python, in file order; None: Cedar only


@dataclass(frozen=True)
class _Scoped:
    """The policies whose scope can match one (principal, action, resource), and its request."""

    matching: dict[str, dict[str, Any]]  # by id, as parsed
    guards: dict[str, frozenset[str]]  # by id: the arguments without which it cannot apply
    tested: frozenset[str]  # all of those
    entities: Any  # cedarpy.Entities of the request
    request: dict[str, Any]  # principal, action, resource (the context is added per call)
    slices: dict[frozenset[str], _Slice]  # by which of `tested` a call has
    principal: tuple[str, str]
    resource: tuple[str, str]
    attributes: dict[tuple[str, str], dict[str, str]]  # the entities' attributes, as schema.py gives them


class Engine:
    """A loaded set and the slices of the requests met so far."""

    def __init__(self, loaded: LoadedPolicies) -> None:
        self.loaded = loaded
        self._scoped: OrderedDict[tuple[str, str, str, str], _Scoped] = OrderedDict()
        self._reported: set[str] = set()
        self._hints: dict[tuple[Any, ...], str] = {}  # a tool's hints as JSON, by the names sent and values
        self._time: tuple[int, str] = (-1, "")  # the last millisecond's datetime as JSON
        self._compiled = {policy_id: direct.compile_policy(policy) for policy_id, policy in loaded.parsed.items()}
        # What a policy decides when Python decides it, made once (a Verdict is immutable).
        self._verdicts = {policy_id: Verdict("forbid" if info.effect == "forbid" else "permit", info)
                          for policy_id, info in loaded.infos.items()}

    def decide_call(self, host: str, server: str, tool: str, arguments: dict[str, Any],
                    annotations: Annotations, now: float | None = None) -> Verdict:
        """A host's `tools/call` (action `callTool`, resource `Tool::"<server>/<tool>"`); `annotations`
        may be a function giving them, called only if a policy that can apply reads them."""
        return self._decide(("Host", host), "callTool", server, tool, arguments, annotations, now)

    def decide_elicit(self, principal: tuple[str, str], server: str, now: float | None = None) -> Verdict:
        """A server's elicitation (action `elicit`, resource `Server::"<server>"`), asked on behalf of
        `principal` (`("Host", name)`): the context has no arguments and MCP's default hints."""
        return self._decide(principal, "elicit", server, None, {}, None, now)

    def _decide(self, principal: tuple[str, str], action: str, server: str, tool: str | None,
                arguments: dict[str, Any], annotations: Annotations, now: float | None) -> Verdict:
        scoped = self._scoped_for(principal, action, server, tool)
        sent = frozenset(name for name in scoped.tested if schema.sent(arguments, name)) if scoped.tested else _NONE
        found = self._slice(scoped, sent)
        if found.policies is None:
            return _NO_MATCH
        if callable(annotations):
            reads = found.reads
            annotations = annotations() if reads.everything or "annotations" in reads.attributes else None
        directly = self._directly(found, scoped, arguments, annotations, now)
        if directly is not None:
            return directly
        import cedarpy

        request = dict(scoped.request)
        request["context"] = self._context(found.reads, arguments, annotations, now)
        result = cedarpy.is_authorized(request, found.policies, scoped.entities)
        diagnostics = result.diagnostics
        errors = tuple(diagnostics.errors)
        for error in errors:
            if error not in self._reported and len(self._reported) < _REPORTED:
                self._reported.add(error)
                logger.warning("policies: %s (a policy that errs does not apply; `has` tests an argument)", error)
        infos = self.loaded.infos
        deciding = [infos[r] for r in diagnostics.reasons if r in infos]
        first = min(deciding, key=lambda info: info.order) if deciding else None
        if result.allowed:
            return Verdict("permit", first, errors)
        if first is not None:
            return Verdict("forbid", first, errors)
        return Verdict("none", None, errors)

    def _directly(self, found: _Slice, scoped: _Scoped, arguments: dict[str, Any],
                  annotations: dict[str, Any] | None, now: float | None) -> Verdict | None:
        """The verdict decided in Python (direct.py), or None: Cedar decides."""
        if found.compiled is None:
            return None
        names = found.reads.of("arguments")
        chosen = arguments if names is None else {name: arguments[name] for name in names if name in arguments}
        read = schema.cedar_value(chosen)
        if not _unicode(read):
            return None  # text Cedar cannot read (a lone surrogate): Cedar reports it, decides nothing
        call = direct.Call(scoped.principal, scoped.resource, scoped.attributes, read,
                           schema.hints(annotations), schema.millis(now))
        forbid: PolicyInfo | None = None
        permit: PolicyInfo | None = None
        try:
            for info, applies in found.compiled:  # in file order: the first that applies is the one named
                if applies(call):
                    if info.effect == "forbid":
                        forbid = forbid or info
                    else:
                        permit = permit or info
        except direct.Unsure:
            return None
        deciding = forbid or permit
        return _NO_MATCH if deciding is None else self._verdicts[deciding.id]

    def _context(self, reads: scope.Reads, arguments: dict[str, Any], annotations: dict[str, Any] | None,
                 now: float | None) -> str:
        """The context the slice reads, as JSON text (cedarpy takes text as it is)."""
        parts = []
        if reads.everything or "arguments" in reads.attributes:
            names = reads.of("arguments")
            chosen = arguments if names is None else {name: arguments[name] for name in names if name in arguments}
            parts.append('"arguments":' + json.dumps(schema.cedar_value(chosen)))
        if reads.everything or "annotations" in reads.attributes:
            parts.append('"annotations":' + self._hints_json(annotations, reads.of("annotations")))
        if reads.everything or "time" in reads.attributes:
            parts.append('"time":' + self._time_json(now))
        return "{" + ",".join(parts) + "}"

    def _hints_json(self, annotations: dict[str, Any] | None, names: frozenset[str] | None) -> str:
        hints = schema.hints(annotations)
        if names is not None:
            hints = {name: value for name, value in hints.items() if name in names}
        key = (names, *hints.values())
        text = self._hints.get(key)
        if text is None:
            text = self._hints[key] = json.dumps(hints)
        return text

    def _time_json(self, now: float | None) -> str:
        """The time as Cedar reads it, formatted once per millisecond (the most Cedar's datetime holds)."""
        ms = schema.millis(now)
        if self._time[0] != ms:
            self._time = (ms, json.dumps({"__extn": {"fn": "datetime", "arg": schema.time_text(ms)}}))
        return self._time[1]

    def _scoped_for(self, principal: tuple[str, str], action: str, server: str, tool: str | None) -> _Scoped:
        key = (*principal, action, f"{server}/{tool}" if tool is not None else server)
        found = self._scoped.get(key)
        if found is not None:
            self._scoped.move_to_end(key)
            return found
        import cedarpy

        resource = ("Tool", f"{server}/{tool}") if tool is not None else ("Server", server)
        parents = (("Server", server),) if tool is not None else ()
        matching = {policy_id: policy for policy_id, policy in self.loaded.parsed.items()
                    if scope.may_match(policy.get("principal", {}), principal, ())
                    and scope.may_match(policy.get("action", {}), ("Action", action), ())
                    and scope.may_match(policy.get("resource", {}), resource, parents)}
        guards = {policy_id: scope.guards(policy) for policy_id, policy in matching.items()}
        found = _Scoped(
            matching=matching, guards=guards, tested=frozenset().union(*guards.values()),
            entities=cedarpy.Entities.from_json_str(schema.request_entities(principal, server, tool)),
            request={"principal": {"type": principal[0], "id": principal[1]},
                     "action": {"type": "Action", "id": action},
                     "resource": {"type": resource[0], "id": resource[1]}},
            slices={}, principal=principal, resource=resource,
            attributes=schema.attributes(principal, server, tool),
        )
        self._scoped[key] = found
        if len(self._scoped) > _SCOPES:
            self._scoped.popitem(last=False)
        return found

    def _slice(self, scoped: _Scoped, sent: frozenset[str]) -> _Slice:
        """The policies that can apply to a call that sent these of the tested arguments."""
        found = scoped.slices.get(sent)
        if found is not None:
            return found
        import cedarpy

        applying = {policy_id: policy for policy_id, policy in scoped.matching.items()
                    if scoped.guards[policy_id] <= sent}
        policies = cedarpy.PolicySet.from_json_str(json.dumps(
            {"staticPolicies": applying, "templates": {}, "templateLinks": []})) if applying else None
        compiled = sorted(((self.loaded.infos[policy_id], fn) for policy_id in applying
                           if (fn := self._compiled[policy_id]) is not None), key=lambda pair: pair[0].order)
        found = _Slice(policies, scope.reads(list(applying.values())),
                       tuple(compiled) if len(compiled) == len(applying) else None)
        if len(scoped.slices) >= _SLICES_PER_SCOPE:
            scoped.slices.clear()
        scoped.slices[sent] = found
        return found


def _unicode(value: Any) -> bool:
    """Whether every string in `value` is valid Unicode text (JSON's escapes can carry halves of
    surrogate pairs, which Cedar's request refuses)."""
    if isinstance(value, str):
        if value.isascii():
            return True
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_unicode(key) and _unicode(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_unicode(item) for item in value)
    return True
