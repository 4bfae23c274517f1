"""What a policy can apply to and what it reads, from its parsed form (EST JSON), so that a decision
asks Cedar only about the policies that can match and sends only the context they read.

Both leave the decision exactly as Cedar's over the whole set: a policy whose scope cannot match
the request is false before its conditions are evaluated (Cedar evaluates the scope first and
stops there: no error either), and an attribute no policy reads cannot change what any evaluates
to. Anything not understood here counts as "may match" and "reads everything".
"""

from dataclasses import dataclass
from typing import Any

Uid = tuple[str, str]  # (entity type, id)


_RECORDS = ("arguments", "annotations")  # the context's records, whose fields are read one by one


@dataclass(frozen=True)
class Reads:
    """The context a set of policies reads: `everything` when one uses `context` as a whole value;
    else its attributes, and of `arguments` and `annotations` the fields read by name (None: the
    record is used as a whole value, so all of it)."""

    everything: bool
    attributes: frozenset[str]
    fields: dict[str, frozenset[str] | None]

    def of(self, record: str) -> frozenset[str] | None:
        """The fields of `record` to send (None: all of them)."""
        return None if self.everything else self.fields.get(record, frozenset())


def may_match(constraint: dict[str, Any], uid: Uid, ancestors: tuple[Uid, ...]) -> bool:
    """Whether a scope constraint (`principal`, `action` or `resource` of the EST) can hold for the
    entity `uid`, which is `in` each of `ancestors` (its parents, transitively)."""
    op = constraint.get("op")
    if op == "All":
        return True
    if op == "==":
        return _uid(constraint.get("entity")) == uid
    if op == "in":
        within = constraint.get("entities") if "entities" in constraint else [constraint.get("entity")]
        return any(_uid(entity) in (uid, *ancestors) for entity in within or [])
    if op == "is":
        if constraint.get("entity_type") != uid[0]:
            return False
        inside = constraint.get("in")
        return inside is None or _uid(inside.get("entity")) in (uid, *ancestors)
    return True  # a slot or a form not known here: let Cedar decide


def _uid(entity: Any) -> Uid | None:
    if isinstance(entity, dict) and isinstance(entity.get("type"), str) and isinstance(entity.get("id"), str):
        return entity["type"], entity["id"]
    return None


def reads(policies: list[dict[str, Any]]) -> Reads:
    """What of the context these policies read."""
    walk = _Walk()
    for policy in policies:
        for condition in policy.get("conditions", []):
            walk.visit(condition.get("body"))
    if walk.everything:
        return Reads(True, frozenset(), {})
    return Reads(False, frozenset(walk.attributes),
                 {record: None if record in walk.whole else frozenset(walk.fields.get(record, ()))
                  for record in _RECORDS})


_CONTEXT = {"Var": "context"}


def _record(node: Any) -> str | None:
    """"arguments" if `node` is `context.arguments` (the same for `annotations`), else None."""
    if not isinstance(node, dict) or len(node) != 1 or "." not in node:
        return None
    body = node["."]
    if isinstance(body, dict) and body.get("left") == _CONTEXT and body.get("attr") in _RECORDS:
        return str(body["attr"])
    return None


class _Walk:
    def __init__(self) -> None:
        self.everything = False
        self.attributes: set[str] = set()
        self.whole: set[str] = set()  # records used as a whole value
        self.fields: dict[str, set[str]] = {}  # record -> the fields read by name

    def visit(self, node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                self.visit(item)
            return
        if not isinstance(node, dict):
            return
        if node == _CONTEXT:
            self.everything = True  # the context as a value (compared, passed on)
            return
        record = _record(node)
        if record is not None:  # reached here, not through `.field` or `has field`: used whole
            self.attributes.add(record)
            self.whole.add(record)  # e.g. `context.arguments == {}`
            return
        if len(node) == 1:
            (op, body), = node.items()
            if op in (".", "has") and isinstance(body, dict) and isinstance(body.get("attr"), str):
                left = body.get("left")
                if left == _CONTEXT:
                    self.attributes.add(body["attr"])
                    return
                record = _record(left)
                if record is not None:
                    self.attributes.add(record)
                    self.fields.setdefault(record, set()).add(body["attr"])
                    return
        for value in node.values():
            self.visit(value)


# Nodes that cannot fail when evaluated, in a policy that passed the schema's validation: the
# context's hints and time and the entities' attributes are always there, typed as declared.
# An argument's value is not (it may be missing, or of another type), nor arithmetic (overflow).
_SAFE_OPS = frozenset({"&&", "||", "!", "==", "!=", "<", "<=", ">", ">=", "like", "in", "is", "has"})
_SAFE_CALLS = frozenset({"toTime", "toDays", "toHours", "toMinutes", "toSeconds", "toMilliseconds"})
_LITERAL_CALLS = frozenset({"duration", "datetime"})  # their literal arguments were validated at load


def guards(policy: dict[str, Any]) -> frozenset[str]:
    """The arguments without which `policy` cannot apply and evaluates to false without an error:
    those its conditions test with `context.arguments has <name>` before anything that could fail
    (Cedar evaluates a policy's conditions in order, each `&&` left to right, and stops at the
    first false)."""
    found: set[str] = set()
    for condition in policy.get("conditions", []):
        body = condition.get("body")
        conjuncts = _conjuncts(body) if condition.get("kind") == "when" else [body]
        for conjunct in conjuncts:
            tested = _argument_test(conjunct) if condition.get("kind") == "when" else None
            if tested is not None:
                found.add(tested)
            elif not _cannot_fail(conjunct):
                return frozenset(found)
    return frozenset(found)


def _conjuncts(node: Any) -> list[Any]:
    """`a && b && c` as [a, b, c], in the order Cedar evaluates them."""
    if isinstance(node, dict) and len(node) == 1 and isinstance(node.get("&&"), dict):
        return [*_conjuncts(node["&&"].get("left")), *_conjuncts(node["&&"].get("right"))]
    return [node]


def _argument_test(node: Any) -> str | None:
    """`name` if `node` is `context.arguments has name`."""
    if isinstance(node, dict) and len(node) == 1 and isinstance(node.get("has"), dict):
        body = node["has"]
        if _record(body.get("left")) == "arguments" and isinstance(body.get("attr"), str):
            return str(body["attr"])
    return None


def _cannot_fail(node: Any) -> bool:
    if not isinstance(node, dict) or len(node) != 1:
        return False
    (op, body), = node.items()
    if op == "Value":
        return isinstance(body, (bool, int, str)) or (isinstance(body, dict) and list(body) == ["__entity"])
    if op == "Var":
        return True
    if op == ".":
        left = body.get("left") if isinstance(body, dict) else None
        return left in ({"Var": "principal"}, {"Var": "resource"}) or (
            left == _CONTEXT and body.get("attr") in ("annotations", "time")) or _record(left) == "annotations"
    if op in _SAFE_OPS and isinstance(body, dict):
        if op == "has":
            return _cannot_fail(body.get("left"))
        operands = [body.get(key) for key in ("left", "right", "arg", "in") if key in body]
        return bool(operands) and all(_cannot_fail(operand) for operand in operands)
    if op in _SAFE_CALLS and isinstance(body, list):
        return all(_cannot_fail(arg) for arg in body)
    if op in _LITERAL_CALLS and isinstance(body, list):
        return all(isinstance(arg, dict) and isinstance(arg.get("Value"), str) for arg in body)
    return False
