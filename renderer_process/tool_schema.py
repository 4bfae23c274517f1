"""Which tool `inputSchema`s the argument form can show, and how. Pure, no Qt.

A tool's inputSchema is full JSON Schema, wider than elicitation's restricted subset. The form
reuses the elicitation field widgets, so this module turns an inputSchema into an equivalent
elicitation-subset schema when every property is one the widgets express: a flat object of
string (formats email, uri, date, date-time; other formats as plain text), number, integer,
boolean, a single-select enum, or a multi-select array of enum items. What Python SDKs emit
for optional arguments (`anyOf: [X, {type: null}]`, `type: [X, "null"]`) and local `$ref`s into
`$defs` (pydantic's enums) are unwrapped. Anything else (nested objects, free arrays, unions)
gets no form: the window falls back to raw JSON and says why.

Arguments are built the way a tool expects: an optional argument left at the tool's own default
is omitted (the tool applies it), and so is an empty optional field.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.errors import UnsupportedSchemaError
from shared.schema import check_schema, property_problems

_SCALARS = ("string", "number", "integer", "boolean")
_FORMATS = ("email", "uri", "date", "date-time")
_KEPT = ("title", "description", "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems")
_MAX_REF_DEPTH = 8


@dataclass(frozen=True)
class ArgumentForm:
    """What the form shows: an elicitation-subset `schema` (None when the form can't express the
    tool's arguments, with `reason` saying why) and the tool's own defaults, to omit them."""

    schema: dict[str, Any] | None
    reason: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)
    required: frozenset[str] = frozenset()


def argument_form(input_schema: Any) -> ArgumentForm:
    try:
        return _convert(input_schema)
    except _NoForm as exc:
        return ArgumentForm(schema=None, reason=str(exc))
    except (TypeError, ValueError, OverflowError) as exc:  # limits that are not even comparable
        return ArgumentForm(schema=None, reason=f"its schema is malformed ({exc})")


def arguments_from(form: ArgumentForm, content: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments from the form's content: optional ones equal to the tool's default
    are left out, so the tool applies its own default exactly as if the user never touched it."""
    return {
        key: value
        for key, value in content.items()
        if key in form.required or not (key in form.defaults and _same(value, form.defaults[key]))
    }


def with_values(form: ArgumentForm, values: Mapping[str, Any]) -> dict[str, Any] | None:
    """The form's schema with `values` (from the JSON editor) shown as the fields' initial values;
    None if a value does not fit its field (the user stays in JSON to fix it)."""
    if form.schema is None:
        return None
    properties = form.schema["properties"]
    if any(key not in properties for key in values):
        return None
    shown = dict(properties)
    for key, value in values.items():
        if property_problems(properties[key], value):
            return None
        shown[key] = {**properties[key], "default": value}  # what is not in the JSON keeps its default
    return {**form.schema, "properties": shown}


# ---- conversion ------------------------------------------------------------------------------


class _NoForm(Exception):
    """The schema needs something the form cannot express (message: what)."""


def _convert(schema: Any) -> ArgumentForm:
    if not isinstance(schema, Mapping):
        raise _NoForm("its input schema is not an object")
    if schema.get("type", "object") != "object":
        raise _NoForm(f"its arguments are a {schema.get('type')!r}, not an object")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise _NoForm("its properties are not an object")
    required_list = schema.get("required", [])
    if not isinstance(required_list, list) or not all(isinstance(r, str) for r in required_list):
        raise _NoForm("its required list is malformed")
    required = frozenset(r for r in required_list if r in properties)
    if set(required_list) - set(properties):
        raise _NoForm("it requires arguments it does not describe")
    defs = schema.get("$defs") or schema.get("definitions") or {}
    converted: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for name, prop in properties.items():
        key = str(name)
        simple, default, has_default = _property(key, prop, defs)
        if has_default:
            defaults[key] = default
        converted[key] = simple
    form_schema: dict[str, Any] = {"type": "object", "properties": converted, "required": sorted(required)}
    try:
        check_schema(form_schema)  # the widgets take exactly what elicitation allows
    except UnsupportedSchemaError as exc:
        raise _NoForm(str(exc)) from exc
    for key, prop in converted.items():
        if key in required or key in defaults:
            continue
        if prop.get("type") == "boolean":
            defaults[key] = False  # an optional checkbox left unchecked is omitted
        elif prop.get("type") == "array":
            defaults[key] = []  # and so is an optional multi-select with nothing chosen
    return ArgumentForm(schema=form_schema, defaults=defaults, required=required)


def _property(key: str, prop: Any, defs: Any) -> tuple[dict[str, Any], Any, bool]:
    """(the elicitation-subset property, the tool's default, whether it has one)."""
    prop = _resolve(key, prop, defs)
    has_default = "default" in prop
    default = prop.get("default")
    prop = _unwrap_nullable(key, prop, defs)
    kind = prop.get("type")
    simple: dict[str, Any] = {k: prop[k] for k in _KEPT if k in prop}
    if kind in _SCALARS:
        simple["type"] = kind
        if kind == "string" and prop.get("format") in _FORMATS:
            simple["format"] = prop["format"]
        options = _options(key, prop, kind)
        if options is not None:
            simple["enum"] = options
    elif kind == "array":
        items = _resolve(key, prop.get("items"), defs)
        item_kind = items.get("type")
        options = _options(key, items, item_kind) if item_kind in _SCALARS else None
        if options is None:
            raise _NoForm(f"argument {key!r} is a list of free values")
        simple["type"] = "array"
        simple["items"] = {"type": item_kind, "enum": options}
    elif kind == "object":
        raise _NoForm(f"argument {key!r} is an object")
    else:
        raise _NoForm(f"argument {key!r} has type {kind!r}")
    if has_default:
        if default is None or property_problems(simple, default):
            has_default = False  # e.g. `default: null` of an optional argument: simply omitted
        else:
            simple["default"] = default
    return simple, default, has_default


def _resolve(key: str, prop: Any, defs: Any, depth: int = 0) -> dict[str, Any]:
    """`prop` with a local `$ref` (`#/$defs/Name`) replaced by its target; siblings win."""
    if not isinstance(prop, Mapping):
        raise _NoForm(f"argument {key!r} is not described by a schema")
    ref = prop.get("$ref")
    if ref is None:
        return dict(prop)
    prefixes = ("#/$defs/", "#/definitions/")
    prefix = next((p for p in prefixes if isinstance(ref, str) and ref.startswith(p)), None)
    if prefix is None or depth >= _MAX_REF_DEPTH or not isinstance(defs, Mapping):
        raise _NoForm(f"argument {key!r} refers to {ref!r}")
    target = defs.get(ref[len(prefix):])
    if not isinstance(target, Mapping):
        raise _NoForm(f"argument {key!r} refers to {ref!r}, which is not defined")
    merged = {**_resolve(key, target, defs, depth + 1), **{k: v for k, v in prop.items() if k != "$ref"}}
    return merged


def _unwrap_nullable(key: str, prop: dict[str, Any], defs: Any) -> dict[str, Any]:
    """`X | None` as SDKs write it becomes X (an omitted optional argument is the None)."""
    kind = prop.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise _NoForm(f"argument {key!r} takes several types")
        return {**prop, "type": kinds[0]}
    for union in ("anyOf", "oneOf"):
        branches = prop.get(union)
        if branches is None or "type" in prop:
            continue
        if not isinstance(branches, list):
            raise _NoForm(f"argument {key!r} has a malformed {union}")
        real = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
        if len(real) != 1:
            raise _NoForm(f"argument {key!r} takes one of several shapes")
        outer = {k: v for k, v in prop.items() if k != union}
        return {**_resolve(key, real[0], defs), **outer}
    return prop


def _options(key: str, prop: Mapping[str, Any], kind: Any) -> list[Any] | None:
    """The allowed values of an enum (or const) property; None when it is not one."""
    if "enum" in prop:
        values = prop["enum"]
    elif "const" in prop:
        values = [prop["const"]]
    else:
        return None
    if not isinstance(values, list) or not values:
        raise _NoForm(f"argument {key!r} has a malformed enum")
    values = [v for v in values if v is not None]  # an optional enum lists null too
    if any(property_problems({"type": kind}, v) for v in values):
        raise _NoForm(f"argument {key!r} mixes value types in its enum")
    return values


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
