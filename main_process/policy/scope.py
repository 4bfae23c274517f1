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
