"""The plainest policies decided in Python, without building a Cedar request: the scope, and
conditions made of `has`, `like`, `==`/`!=`, `<`/`>` on numbers, `&&`, `||`, `!` over the call's
arguments, its hints and the entities' names, and the time of day (`context.time.toTime()` against
a `duration("…")`). Whatever else a policy says, and any value Cedar would refuse (a missing
argument, a number compared with text, a record), is `Unsure`:
the engine then asks Cedar about the whole slice, so a decision is always Cedar's own
(test_policy_fast.py checks the two agree, errors included).
"""

import re
from dataclasses import dataclass
from typing import Any

from main_process.policy import schema


class Unsure(Exception):
    """This policy, for this call, is not decided here: Cedar decides."""


@dataclass(frozen=True)
class Call:
    """A request as the direct evaluator reads it."""

    principal: tuple[str, str]
    action: str
    resource: tuple[str, str]
    parents: tuple[tuple[str, str], ...]
    attributes: dict[tuple[str, str], dict[str, str]]  # entity -> its attributes (all strings here)
    arguments: dict[str, Any]  # as Cedar reads them (schema.cedar_value)
    hints: dict[str, bool]
    millis: int  # the context's time, in milliseconds since the epoch


@dataclass(frozen=True)
class _Instant:
    """A Cedar datetime (`context.time`), in milliseconds since the epoch."""

    millis: int


@dataclass(frozen=True)
class _Duration:
    """A Cedar duration, in milliseconds."""

    millis: int


def applies(policy: dict[str, Any], call: Call) -> bool:
    """Whether `policy` is satisfied by `call` (scope and every condition); Unsure if not decidable here."""
    if not (_scope(policy.get("principal"), call.principal, ())
            and _scope(policy.get("action"), ("Action", call.action), ())
            and _scope(policy.get("resource"), call.resource, call.parents)):
        return False
    satisfied = True
    for condition in policy.get("conditions", []):  # all evaluated: any Unsure leaves it to Cedar
        value = _boolean(condition.get("body"), call)
        if (condition.get("kind") == "when") != value:
            satisfied = False
    return satisfied


def _uid(entity: Any) -> tuple[str, str]:
    if isinstance(entity, dict) and isinstance(entity.get("type"), str) and isinstance(entity.get("id"), str):
        return entity["type"], entity["id"]
    raise Unsure


def _scope(constraint: Any, uid: tuple[str, str], ancestors: tuple[tuple[str, str], ...]) -> bool:
    if not isinstance(constraint, dict):
        raise Unsure
    op = constraint.get("op")
    if op == "All":
        return True
    if op == "==":
        return _uid(constraint.get("entity")) == uid
    if op == "in":
        within = constraint["entities"] if "entities" in constraint else [constraint.get("entity")]
        return any(_uid(entity) in (uid, *ancestors) for entity in within)
    if op == "is":
        inside = constraint.get("in")
        return constraint.get("entity_type") == uid[0] and (
            inside is None or _uid(inside.get("entity")) in (uid, *ancestors))
    raise Unsure


def _boolean(node: Any, call: Call) -> bool:
    value = _value(node, call)
    if not isinstance(value, bool):
        raise Unsure  # Cedar: a type error
    return value


def _scalar(node: Any, call: Call) -> bool | int | str | _Duration:
    value = _value(node, call)
    if not isinstance(value, (bool, int, str, _Duration)):
        raise Unsure  # a record or a set: Cedar compares those by its own rules
    return value


def _value(node: Any, call: Call) -> Any:
    if not isinstance(node, dict) or len(node) != 1:
        raise Unsure
    (op, body), = node.items()
    if op == "Value":
        if isinstance(body, (bool, int, str)):
            return body
        raise Unsure
    if op in ("toTime", "duration"):
        return _time(op, body, call)
    if not isinstance(body, dict):
        raise Unsure
    if op == "&&":
        return _boolean(body.get("left"), call) and _boolean(body.get("right"), call)
    if op == "||":
        return _boolean(body.get("left"), call) or _boolean(body.get("right"), call)
    if op == "!":
        return not _boolean(body.get("arg"), call)
    if op in ("==", "!="):
        left, right = _scalar(body.get("left"), call), _scalar(body.get("right"), call)
        if _kind(left) != _kind(right):
            raise Unsure
        return (left == right) == (op == "==")
    if op in ("<", "<=", ">", ">="):
        left, right = _scalar(body.get("left"), call), _scalar(body.get("right"), call)
        if isinstance(left, _Duration) and isinstance(right, _Duration):
            return _COMPARE[op](left.millis, right.millis)
        if _kind(left) is not int or _kind(right) is not int:
            raise Unsure
        return _COMPARE[op](left, right)
    if op == "like":
        text = _value(body.get("left"), call)
        if not isinstance(text, str):
            raise Unsure
        return _pattern(body.get("pattern")).fullmatch(text) is not None
    if op == "has":
        if _is_arguments(body.get("left")) and isinstance(body.get("attr"), str):
            return schema.sent(call.arguments, body["attr"])
        raise Unsure
    if op == ".":
        return _attribute(body, call)
    raise Unsure


def _time(op: str, args: Any, call: Call) -> _Duration:
    """`context.time.toTime()` (the time of day, UTC) and `duration("…")` literals."""
    if not isinstance(args, list) or len(args) != 1:
        raise Unsure
    if op == "toTime":
        instant = _value(args[0], call)
        if not isinstance(instant, _Instant) or instant.millis < 0:
            raise Unsure
        return _Duration(instant.millis % _DAY)
    literal = args[0].get("Value") if isinstance(args[0], dict) else None
    parsed = _DURATION.fullmatch(literal) if isinstance(literal, str) and literal not in ("", "-") else None
    if parsed is None:
        raise Unsure
    sign, *amounts = parsed.groups()
    millis = sum(int(amount or 0) * unit for amount, unit in zip(amounts, _UNITS, strict=True))
    if millis > 2**63 - 1:
        raise Unsure  # Cedar: overflow
    return _Duration(-millis if sign else millis)


_DAY = 86_400_000
_UNITS = (_DAY, 3_600_000, 60_000, 1_000, 1)
_DURATION = re.compile(r"(-)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?")


def _attribute(body: dict[str, Any], call: Call) -> Any:
    left, attr = body.get("left"), body.get("attr")
    if left == {"Var": "context"} and attr == "time":
        return _Instant(call.millis)
    if _is_arguments(left):
        if attr in call.arguments:
            return call.arguments[attr]
        raise Unsure  # Cedar: the record has no such attribute
    if isinstance(left, dict) and left.get(".") == {"left": {"Var": "context"}, "attr": "annotations"}:
        if attr in call.hints:
            return call.hints[attr]
        raise Unsure
    entity = {"principal": call.principal, "resource": call.resource}.get(left.get("Var", "")) \
        if isinstance(left, dict) and len(left) == 1 else None
    if entity is not None and attr in call.attributes.get(entity, {}):
        return call.attributes[entity][attr]
    raise Unsure


def _is_arguments(node: Any) -> bool:
    return isinstance(node, dict) and node.get(".") == {"left": {"Var": "context"}, "attr": "arguments"}


def _kind(value: bool | int | str | _Duration) -> type:
    return bool if isinstance(value, bool) else type(value)


_COMPARE = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
_PATTERNS: dict[str, re.Pattern[str]] = {}


def _pattern(parts: Any) -> re.Pattern[str]:
    """Cedar's `like` pattern (literal pieces and `*`) as a regular expression, made once."""
    if not isinstance(parts, list):
        raise Unsure
    key = repr(parts)
    found = _PATTERNS.get(key)
    if found is None:
        pieces = []
        for part in parts:
            if part == "Wildcard":
                pieces.append(".*")
            elif isinstance(part, dict) and isinstance(part.get("Literal"), str):
                pieces.append(re.escape(part["Literal"]))
            else:
                raise Unsure
        found = _PATTERNS[key] = re.compile("".join(pieces), re.DOTALL)
    return found
