"""The plainest policies decided in Python, without building a Cedar request: the scope, and
conditions made of `has`, `like`, `==`/`!=`, `<`/`>` on numbers, `&&`, `||`, `!` over the call's
arguments, its hints and the entities' names, and the time of day (`context.time.toTime()` against
a `duration("…")`). Each such policy is compiled once into Python functions (`compile_policy`); one
that says anything else is not (None), and any value Cedar would refuse at a call (a missing
argument, a number compared with text, a record) raises `Unsure`: either way the engine asks Cedar
about the whole slice, so a decision is always Cedar's own (test_policy_fast.py checks the two
agree, errors included).
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from main_process.policy import schema


class Unsure(Exception):
    """This policy, for this call, is not decided here: Cedar decides."""


class _Unsupported(Exception):
    """A policy that says something this module does not evaluate (it is left to Cedar)."""


@dataclass(slots=True)
class Call:
    """A request as the compiled policies read it."""

    principal: tuple[str, str]
    resource: tuple[str, str]
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


Compiled = Callable[[Call], bool]
_Expr = Callable[[Call], Any]


def compile_policy(policy: dict[str, Any]) -> Compiled | None:
    """`policy`'s conditions as a function telling whether a call satisfies them all (raises Unsure),
    or None if it says something evaluated only by Cedar. Its scope is not in it: the engine looks
    only at policies whose scope matches (scope.py, exact for every scope this module accepts)."""
    try:
        for part in ("principal", "action", "resource"):
            _scope(policy.get(part))
        conditions = [(condition.get("kind") == "when", _boolean(condition.get("body")))
                      for condition in policy.get("conditions", [])]
    except _Unsupported:
        return None
    if len(conditions) == 1:
        (when, condition), = conditions
        return condition if when else lambda call: not condition(call)

    def applies(call: Call) -> bool:
        satisfied = True
        for when, condition in conditions:  # all evaluated: any Unsure leaves it to Cedar
            if when != condition(call):
                satisfied = False
        return satisfied

    return applies


def _uid(entity: Any) -> tuple[str, str]:
    if isinstance(entity, dict) and isinstance(entity.get("type"), str) and isinstance(entity.get("id"), str):
        return entity["type"], entity["id"]
    raise _Unsupported


def _scope(constraint: Any) -> None:
    """Raises _Unsupported unless the scope constraint is one scope.may_match decides exactly."""
    if not isinstance(constraint, dict):
        raise _Unsupported
    op = constraint.get("op")
    if op == "==":
        _uid(constraint.get("entity"))
    elif op == "in":
        for entity in constraint["entities"] if "entities" in constraint else [constraint.get("entity")]:
            _uid(entity)
    elif op == "is":
        if not isinstance(constraint.get("entity_type"), str):
            raise _Unsupported
        if constraint.get("in") is not None:
            _uid(constraint["in"].get("entity"))
    elif op != "All":
        raise _Unsupported


def _boolean(node: Any) -> Compiled:
    value = _value(node)

    def boolean(call: Call) -> bool:
        found = value(call)
        if not isinstance(found, bool):
            raise Unsure  # Cedar: a type error
        return found

    return boolean


def _scalar(node: Any) -> _Expr:
    value = _value(node)

    def scalar(call: Call) -> Any:
        found = value(call)
        if not isinstance(found, (bool, int, str, _Duration)):
            raise Unsure  # a record or a set: Cedar compares those by its own rules
        return found

    return scalar


def _value(node: Any) -> _Expr:
    if not isinstance(node, dict) or len(node) != 1:
        raise _Unsupported
    (op, body), = node.items()
    if op == "Value":
        if isinstance(body, (bool, int, str)):
            return lambda call: body
        raise _Unsupported
    if op == "duration":
        duration = _duration(body)
        return lambda call: duration
    if op == "toTime":
        return _time_of_day(body)
    if not isinstance(body, dict):
        raise _Unsupported
    if op in ("&&", "||", "!"):
        return _logic(op, body)
    if op in _COMPARE:
        return _compare(op, body)
    if op == "like":
        text, pattern = _value(body.get("left")), _pattern(body.get("pattern"))

        def like(call: Call) -> bool:
            found = text(call)
            if not isinstance(found, str):
                raise Unsure
            return pattern.fullmatch(found) is not None

        return like
    if op == "has" and _is_arguments(body.get("left")) and isinstance(body.get("attr"), str):
        name = body["attr"]
        return lambda call: schema.sent(call.arguments, name)
    if op == ".":
        return _attribute(body)
    raise _Unsupported


def _logic(op: str, body: dict[str, Any]) -> _Expr:
    if op == "!":
        arg = _boolean(body.get("arg"))
        return lambda call: not arg(call)
    left, right = _boolean(body.get("left")), _boolean(body.get("right"))
    if op == "&&":
        return lambda call: left(call) and right(call)  # Cedar's order: the right side only if needed
    return lambda call: left(call) or right(call)


def _compare(op: str, body: dict[str, Any]) -> _Expr:
    left, right = _scalar(body.get("left")), _scalar(body.get("right"))
    test = _COMPARE[op]
    ordered = op not in ("==", "!=")

    def compare(call: Call) -> bool:
        a, b = left(call), right(call)
        if _kind(a) is not _kind(b) or (ordered and _kind(a) not in (int, _Duration)):
            raise Unsure  # Cedar: false for == across types, a type error for <; either way, Cedar says
        if isinstance(a, _Duration):
            return test(a.millis, b.millis)
        return test(a, b)

    return compare


def _time_of_day(args: Any) -> _Expr:
    if not isinstance(args, list) or len(args) != 1:
        raise _Unsupported
    instant = _value(args[0])

    def time_of_day(call: Call) -> _Duration:
        found = instant(call)
        if not isinstance(found, _Instant) or found.millis < 0:
            raise Unsure
        return _Duration(found.millis % _DAY)

    return time_of_day


def _duration(args: Any) -> _Duration:
    literal = args[0].get("Value") if isinstance(args, list) and len(args) == 1 and isinstance(args[0], dict) else None
    parsed = _DURATION.fullmatch(literal) if isinstance(literal, str) and literal not in ("", "-") else None
    if parsed is None:
        raise _Unsupported
    sign, *amounts = parsed.groups()
    millis = sum(int(amount or 0) * unit for amount, unit in zip(amounts, _UNITS, strict=True))
    if millis > 2**63 - 1:
        raise _Unsupported  # Cedar: overflow
    return _Duration(-millis if sign else millis)


_DAY = 86_400_000
_UNITS = (_DAY, 3_600_000, 60_000, 1_000, 1)
_DURATION = re.compile(r"(-)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?")


def _attribute(body: dict[str, Any]) -> _Expr:
    left, attr = body.get("left"), body.get("attr")
    if not isinstance(attr, str):
        raise _Unsupported
    if left == {"Var": "context"} and attr == "time":
        return lambda call: _Instant(call.millis)
    if _is_arguments(left):
        def argument(call: Call) -> Any:
            if attr in call.arguments:
                return call.arguments[attr]
            raise Unsure  # Cedar: the record has no such attribute

        return argument
    if isinstance(left, dict) and left.get(".") == {"left": {"Var": "context"}, "attr": "annotations"}:
        def hint(call: Call) -> bool:
            if attr in call.hints:
                return call.hints[attr]
            raise Unsure

        return hint
    if left in ({"Var": "principal"}, {"Var": "resource"}):
        principal = left == {"Var": "principal"}

        def entity_attribute(call: Call) -> str:
            attributes = call.attributes.get(call.principal if principal else call.resource, {})
            if attr in attributes:
                return attributes[attr]
            raise Unsure

        return entity_attribute
    raise _Unsupported


def _is_arguments(node: Any) -> bool:
    return isinstance(node, dict) and node.get(".") == {"left": {"Var": "context"}, "attr": "arguments"}


def _kind(value: Any) -> type:
    return bool if isinstance(value, bool) else type(value)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _pattern(parts: Any) -> re.Pattern[str]:
    """Cedar's `like` pattern (literal pieces and `*`) as a regular expression."""
    if not isinstance(parts, list):
        raise _Unsupported
    pieces = []
    for part in parts:
        if part == "Wildcard":
            pieces.append(".*")
        elif isinstance(part, dict) and isinstance(part.get("Literal"), str):
            pieces.append(re.escape(part["Literal"]))
        else:
            raise _Unsupported
    return re.compile("".join(pieces), re.DOTALL)
