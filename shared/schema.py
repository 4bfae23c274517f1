"""MCP's restricted elicitation schema: what is supported, and validation of answers against it.

The renderer uses it to enable Accept; main uses it again on every accepted answer, so a buggy
or hostile peer can never hand a server content its schema does not allow.
"""

import datetime
import math
import re
import reprlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import msgspec

from shared.errors import InvalidContentError, UnsupportedSchemaError

_PRIMITIVE_TYPES = {"string", "number", "integer", "boolean"}
_FORMATS = {"email", "uri", "date", "date-time"}
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:\S+$")
# RFC 3339 shapes; fromisoformat alone also takes ISO 8601 forms such as week dates.
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
# A server's or a peer's value named in a message: a few levels and items of it, never a repr that
# recurses as deep as the value goes.
_shown = reprlib.Repr(maxlevel=3).repr


def enum_options(prop: Mapping[str, Any]) -> list[tuple[Any, str]] | None:
    """(value, label) pairs of a single-select property, or None if it is not one.

    Covers plain `enum`, legacy `enum` + `enumNames`, and titled `oneOf: [{const, title}]`.
    """
    if "oneOf" in prop:
        return [(item.get("const"), str(item.get("title", item.get("const")))) for item in prop["oneOf"]]
    if "enum" in prop:
        names = prop.get("enumNames")
        values = list(prop["enum"])
        if isinstance(names, list) and len(names) == len(values):
            return list(zip(values, (str(n) for n in names), strict=True))
        return [(v, str(v)) for v in values]
    return None


def multi_options(prop: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """(value, label) pairs of a multi-select array property."""
    items = prop.get("items", {})
    if "anyOf" in items:
        return [(item.get("const"), str(item.get("title", item.get("const")))) for item in items["anyOf"]]
    return [(v, str(v)) for v in items.get("enum", [])]


MAX_PROPERTIES = 200  # a form a person can fill in; more is refused, not shown
MAX_OPTIONS = 1000  # choices in one enum / oneOf / anyOf
MAX_LENGTH_KEYWORD = 2**31 - 1  # minLength/maxLength/minItems/maxItems: what a Qt widget takes
_INT_RANGE = (-(2**63), 2**64 - 1)  # what msgpack carries
_LENGTH_KEYWORDS = ("minLength", "maxLength")
_ITEM_COUNT_KEYWORDS = ("minItems", "maxItems")


class CheckedSchemas:
    """`check_schema` that remembers the schemas it accepted: a server asks with the same few forms
    again and again, and checking one costs more than recognising it by its bytes. msgpack, not
    JSON, makes the key: JSON writes NaN as null, so two schemas would share one."""

    MAX_REMEMBERED = 256
    MAX_KEY_BYTES = 16 * 1024  # bigger schemas are checked every time, never kept

    def __init__(self) -> None:
        self._accepted: OrderedDict[bytes, None] = OrderedDict()

    def check(self, schema: Any) -> None:
        try:
            key = msgspec.msgpack.encode(schema)
        except (TypeError, OverflowError, msgspec.EncodeError, RecursionError):
            # Not encodable (an int past 64 bits, a key nested past msgspec's recursion): the check,
            # which reads a fixed few levels, names the problem or lets it be refused on the wire.
            check_schema(schema)
            return
        if key in self._accepted:
            return
        check_schema(schema)
        if len(key) <= self.MAX_KEY_BYTES:
            self._accepted[key] = None
            if len(self._accepted) > self.MAX_REMEMBERED:
                self._accepted.popitem(last=False)


def check_schema(schema: Any) -> None:
    """Raise UnsupportedSchemaError naming the first thing MCP's subset (or a window) can't take.

    Beyond the subset's shapes, every keyword the validator or a window reads is checked for type
    and range, so a request that passes here can be shown, answered and validated without error.
    """
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise UnsupportedSchemaError("requestedSchema must be an object schema with type 'object'")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise UnsupportedSchemaError("requestedSchema.properties must be an object")
    if len(properties) > MAX_PROPERTIES:
        raise UnsupportedSchemaError(f"requestedSchema has {len(properties)} properties; at most "
                                     f"{MAX_PROPERTIES} are shown")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise UnsupportedSchemaError("requestedSchema.required must be a list of property names")
    for key in ("title", "description"):
        if key in schema and not isinstance(schema[key], str):
            raise UnsupportedSchemaError(f"requestedSchema.{key} must be a string")
    for name, prop in properties.items():
        _check_property(str(name), prop)


def _check_property(name: str, prop: Any) -> None:
    if not isinstance(prop, Mapping):
        raise UnsupportedSchemaError(f"property {name!r} is not a schema object")
    if "$ref" in prop:
        raise UnsupportedSchemaError(f"property {name!r} uses $ref, which elicitation schemas do not allow")
    kind = prop.get("type")
    if not isinstance(kind, str) or kind not in _PRIMITIVE_TYPES | {"array"}:
        raise UnsupportedSchemaError(f"property {name!r} has unsupported type {_shown(kind)}")
    for key in ("title", "description"):
        if key in prop and not isinstance(prop[key], str):
            raise UnsupportedSchemaError(f"property {name!r}: {key} must be a string")
    if kind == "array":
        _check_array(name, prop)
        return
    fmt = prop.get("format")
    if fmt is not None and (kind != "string" or not isinstance(fmt, str) or fmt not in _FORMATS):
        raise UnsupportedSchemaError(f"property {name!r} has unsupported format {_shown(fmt)}")
    _check_counts(name, prop, _LENGTH_KEYWORDS if kind == "string" else ())
    for key in ("minimum", "maximum"):
        if key in prop and (kind not in ("number", "integer") or not _is_number(prop[key])):
            raise UnsupportedSchemaError(f"property {name!r}: {key} must be a finite number")
    if "oneOf" in prop:
        _check_choices(name, "oneOf", prop["oneOf"], kind)
    if "enum" in prop:
        enum = prop["enum"]
        if not isinstance(enum, list) or len(enum) > MAX_OPTIONS:
            raise UnsupportedSchemaError(f"property {name!r}: enum must be a list of at most {MAX_OPTIONS} values")
        if not all(_fits(kind, value) for value in enum):
            raise UnsupportedSchemaError(f"property {name!r}: every enum value must be a {kind}")
        names = prop.get("enumNames")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise UnsupportedSchemaError(f"property {name!r}: enumNames must be a list of strings")
    if "default" in prop and not _fits(kind, prop["default"]):
        raise UnsupportedSchemaError(f"property {name!r}: default must be a {kind}")


def _check_array(name: str, prop: Mapping[str, Any]) -> None:
    items = prop.get("items")
    if not isinstance(items, Mapping) or not ("enum" in items or "anyOf" in items):
        raise UnsupportedSchemaError(f"property {name!r}: arrays must be multi-select with items.enum or items.anyOf")
    if "anyOf" in items:
        _check_choices(name, "items.anyOf", items["anyOf"], "string")
    if "enum" in items:
        enum = items["enum"]
        if not isinstance(enum, list) or len(enum) > MAX_OPTIONS or not all(isinstance(v, str) for v in enum):
            raise UnsupportedSchemaError(f"property {name!r}: items.enum must be a list of at most "
                                         f"{MAX_OPTIONS} strings")
    _check_counts(name, prop, _ITEM_COUNT_KEYWORDS)
    default = prop.get("default")
    if default is not None and (not isinstance(default, list) or not all(isinstance(v, str) for v in default)):
        raise UnsupportedSchemaError(f"property {name!r}: default must be a list of strings")


def _check_choices(name: str, where: str, choices: Any, kind: str) -> None:
    if not isinstance(choices, list) or len(choices) > MAX_OPTIONS:
        raise UnsupportedSchemaError(f"property {name!r}: {where} must be a list of at most {MAX_OPTIONS} items")
    for item in choices:
        if not isinstance(item, Mapping) or "const" not in item or not _fits(kind, item["const"]):
            raise UnsupportedSchemaError(f"property {name!r}: {where} items must be {{const, title}} "
                                         f"with a {kind} const")
        if "title" in item and not isinstance(item["title"], str):
            raise UnsupportedSchemaError(f"property {name!r}: {where} titles must be strings")


def _check_counts(name: str, prop: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in (*_LENGTH_KEYWORDS, *_ITEM_COUNT_KEYWORDS):
        if key not in prop:
            continue
        value = prop[key]
        if key not in allowed or isinstance(value, bool) or not isinstance(value, int) \
                or not 0 <= value <= MAX_LENGTH_KEYWORD:
            raise UnsupportedSchemaError(f"property {name!r}: {key} must be a whole number from 0 to "
                                         f"{MAX_LENGTH_KEYWORD}")


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return _INT_RANGE[0] <= value <= _INT_RANGE[1]
    return math.isfinite(value)


def _fits(kind: str, value: Any) -> bool:
    """Whether `value` is of the property type `kind` (for enum values, consts and defaults)."""
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return _is_number(value) and (isinstance(value, int) or float(value).is_integer())
    return _is_number(value)


def validate_content(schema: Mapping[str, Any], content: Mapping[str, Any]) -> None:
    """Raise InvalidContentError listing every way `content` breaks `schema`, and nothing else.

    A schema that slipped past `check_schema` (a third-party caller's) must not turn an answer
    into a crash: any error while comparing is reported as invalid content."""
    try:
        _validate(schema, content)
    except (TypeError, ValueError, OverflowError, AttributeError, RecursionError) as exc:
        raise InvalidContentError([f"cannot be checked against the requested schema ({exc})"]) from None


def _validate(schema: Mapping[str, Any], content: Mapping[str, Any]) -> None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    problems: list[str] = []
    for key in content:
        if key not in properties:
            problems.append(f"{key!r} is not a property of the requested schema")
    for key in schema.get("required", []):
        if key not in content:
            problems.append(f"{key!r} is required")
    for key, value in content.items():
        prop = properties.get(key)
        if isinstance(prop, Mapping):
            problems.extend(f"{key!r} {p}" for p in property_problems(prop, value))
    if problems:
        raise InvalidContentError(problems)


def property_problems(prop: Mapping[str, Any], value: Any) -> list[str]:
    """Why `value` is not valid for one property (empty when it is)."""
    kind = prop.get("type")
    if kind == "string":
        return _string_problems(prop, value)
    if kind in ("number", "integer"):
        return _number_problems(prop, value, integer=kind == "integer")
    if kind == "boolean":
        return [] if isinstance(value, bool) else ["must be a boolean"]
    if kind == "array":
        return _array_problems(prop, value)
    return [f"has unsupported type {_shown(kind)}"]


def _string_problems(prop: Mapping[str, Any], value: Any) -> list[str]:
    if not isinstance(value, str):
        return ["must be a string"]
    options = enum_options(prop)
    if options is not None:
        return [] if value in [v for v, _ in options] else ["is not one of the allowed values"]
    problems = []
    if "minLength" in prop and len(value) < prop["minLength"]:
        problems.append(f"must be at least {prop['minLength']} characters")
    if "maxLength" in prop and len(value) > prop["maxLength"]:
        problems.append(f"must be at most {prop['maxLength']} characters")
    fmt = prop.get("format")
    if fmt is not None and not _format_ok(fmt, value):
        problems.append(f"is not a valid {fmt}")
    return problems


def _format_ok(fmt: str, value: str) -> bool:
    if fmt == "email":
        return bool(_EMAIL.match(value))
    if fmt == "uri":
        return bool(_URI.match(value))
    if fmt == "date":
        if not _DATE.match(value):
            return False
        try:
            datetime.date.fromisoformat(value)
        except ValueError:
            return False
        return True
    if fmt == "date-time":
        if not _DATE_TIME.match(value):
            return False
        try:
            datetime.datetime.fromisoformat(value.upper())
        except ValueError:
            return False
        return True
    return True


def _number_problems(prop: Mapping[str, Any], value: Any, *, integer: bool) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ["must be a number"]
    if integer and not isinstance(value, int):
        return ["must be an integer"]
    if not math.isfinite(value):
        return ["must be a finite number"]
    problems = []
    if "minimum" in prop and value < prop["minimum"]:
        problems.append(f"must be at least {prop['minimum']}")
    if "maximum" in prop and value > prop["maximum"]:
        problems.append(f"must be at most {prop['maximum']}")
    options = enum_options(prop)
    if options is not None and value not in [v for v, _ in options]:
        problems.append("is not one of the allowed values")
    return problems


def _array_problems(prop: Mapping[str, Any], value: Any) -> list[str]:
    if not isinstance(value, list):
        return ["must be a list"]
    allowed = [v for v, _ in multi_options(prop)]
    problems = []
    if any(item not in allowed for item in value):
        problems.append("has an item that is not one of the allowed values")
    if len(set(map(repr, value))) != len(value):
        problems.append("has duplicate items")
    if "minItems" in prop and len(value) < prop["minItems"]:
        problems.append(f"needs at least {prop['minItems']} items")
    if "maxItems" in prop and len(value) > prop["maxItems"]:
        problems.append(f"allows at most {prop['maxItems']} items")
    return problems
