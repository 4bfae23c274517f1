"""The `arguments` record of the schema, per policy set, typed by how the policies use each argument.

A tool's arguments are unknown when the files load, and Cedar's schema has no open records. Declared
empty, `context.arguments has path && …` would be typed false and the validator would skip the
rest of the condition (a misspelt `resource.nmae` after it would pass). So each argument a policy
reads is declared optional, with the type its use implies (`like` → String, `>` → Long, `== "x"` →
String, `.contains("a")` → Set<String>); one whose type no use implies stays undeclared, and the
validator's "not found" for it is let through (load.py).
"""

from collections.abc import Iterator
from typing import Any

_COMPARE = ("<", "<=", ">", ">=", "+", "-", "*")
_SETS = ("contains", "containsAll", "containsAny")


def declared(policies: list[dict[str, Any]]) -> str:
    """The Cedar schema type of `arguments` for these policies (EST JSON), e.g. `{ path?: String }`."""
    types: dict[str, str] = {}
    for policy in policies:
        for condition in policy.get("conditions", []):
            for name, kind in _uses(condition.get("body")):
                types.setdefault(name, kind)
    fields = ", ".join(f'"{_escape(name)}"?: {kind}' for name, kind in sorted(types.items()))
    return "{ " + fields + " }"


def _escape(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', '\\"')


def _argument(node: Any) -> str | None:
    """The argument's name if `node` is `context.arguments.<name>`."""
    if not isinstance(node, dict) or "." not in node:
        return None
    inner = node["."]
    left = inner.get("left")
    if isinstance(left, dict) and left.get(".", {}).get("attr") == "arguments" \
            and left["."].get("left") == {"Var": "context"}:
        return str(inner["attr"])
    return None


def _literal_type(node: Any) -> str | None:
    value = node.get("Value") if isinstance(node, dict) else None
    if isinstance(value, bool):
        return "Bool"
    if isinstance(value, int):
        return "Long"
    if isinstance(value, str):
        return "String"
    return None


def _uses(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, list):
        for item in node:
            yield from _uses(item)
        return
    if not isinstance(node, dict):
        return
    for op, body in node.items():
        if isinstance(body, dict):
            left, right = body.get("left"), body.get("right")
            name = _argument(left)
            if name is not None:
                kind = None
                if op == "like":
                    kind = "String"
                elif op in _COMPARE:
                    kind = "Long"
                elif op in ("==", "!="):
                    kind = _literal_type(right)
                elif op in _SETS:
                    element = _literal_type(right) if op == "contains" else None
                    kind = f"Set<{element}>" if element else None
                if kind is not None:
                    yield name, kind
            other = _argument(right)
            if other is not None and op in ("==", "!=") and _literal_type(left):
                yield other, str(_literal_type(left))
            elif other is not None and op in _COMPARE:
                yield other, "Long"
        yield from _uses(body)
