"""shared.schema: which requestedSchemas are supported, and validation of accepted content."""

import math
from typing import Any

import pytest

from shared.errors import ElicitronError, InvalidContentError, UnsupportedSchemaError
from shared.schema import (
    CheckedSchemas,
    check_schema,
    enum_options,
    multi_options,
    property_problems,
    validate_content,
)


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return schema


def problems(schema: dict[str, Any], content: dict[str, Any]) -> list[str]:
    try:
        validate_content(schema, content)
    except InvalidContentError as exc:
        assert exc.problems, "InvalidContentError without problems"
        assert str(exc) == "; ".join(exc.problems)
        return exc.problems
    return []


# ---- check_schema: what MCP allows ---------------------------------------------------------

SUPPORTED = {
    "plain string": {"type": "string"},
    "string with title/description/default": {
        "type": "string",
        "title": "T",
        "description": "D",
        "default": "x",
    },
    "string lengths": {"type": "string", "minLength": 1, "maxLength": 10},
    "email": {"type": "string", "format": "email"},
    "uri": {"type": "string", "format": "uri"},
    "date": {"type": "string", "format": "date"},
    "date-time": {"type": "string", "format": "date-time"},
    "number": {"type": "number"},
    "number range": {"type": "number", "minimum": -1.5, "maximum": 2.5},
    "integer range": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3},
    "boolean": {"type": "boolean", "default": True},
    "enum": {"type": "string", "enum": ["a", "b"]},
    "enum with enumNames": {"type": "string", "enum": ["a", "b"], "enumNames": ["Alpha", "Beta"]},
    "oneOf const/title": {
        "type": "string",
        "oneOf": [{"const": "a", "title": "Alpha"}, {"const": "b", "title": "B"}],
    },
    "multi-select enum": {
        "type": "array",
        "items": {"type": "string", "enum": ["x", "y"]},
        "minItems": 1,
        "maxItems": 2,
    },
    "multi-select anyOf": {
        "type": "array",
        "items": {"anyOf": [{"const": "x", "title": "X"}, {"const": "y"}]},
    },
}


@pytest.mark.parametrize("prop", list(SUPPORTED.values()), ids=list(SUPPORTED))
def test_check_schema_accepts_every_field_type_mcp_allows(prop: dict[str, Any]) -> None:
    check_schema(obj({"field": prop}, required=["field"]))


def test_check_schema_accepts_a_whole_form_and_an_empty_one() -> None:
    check_schema(obj({f"f{i}": p for i, p in enumerate(SUPPORTED.values())}, required=["f0", "f3"]))
    check_schema({"type": "object"})
    check_schema(obj({}))


UNSUPPORTED = {
    "nested object": {"type": "object", "properties": {"x": {"type": "string"}}},
    "$ref": {"$ref": "#/definitions/thing"},
    "$ref with type": {"type": "string", "$ref": "#/definitions/thing"},
    "unknown type": {"type": "color"},
    "null type": {"type": "null"},
    "no type": {"description": "what am I"},
    "array without items": {"type": "array"},
    "array of strings": {"type": "array", "items": {"type": "string"}},
    "array of objects": {"type": "array", "items": {"type": "object", "properties": {}}},
    "array anyOf without const": {"type": "array", "items": {"anyOf": [{"type": "string"}]}},
    "format on a number": {"type": "number", "format": "email"},
    "unknown string format": {"type": "string", "format": "ipv4"},
    "oneOf without const": {"type": "string", "oneOf": [{"title": "x"}]},
    "enum not a list": {"type": "string", "enum": "abc"},
    "property not an object": "string",
}


@pytest.mark.parametrize("prop", list(UNSUPPORTED.values()), ids=list(UNSUPPORTED))
def test_check_schema_rejects_what_mcp_does_not_allow_naming_the_property(prop: Any) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        check_schema(obj({"ok": {"type": "string"}, "culprit": prop}))
    assert "'culprit'" in str(info.value)
    assert "'ok'" not in str(info.value)


@pytest.mark.parametrize(
    "schema",
    [
        None,
        [],
        "object",
        {"properties": {}},
        {"type": "array"},
        {"type": "object", "properties": []},
        {"type": "object", "properties": {}, "required": "name"},
        {"type": "object", "properties": {}, "required": [1]},
    ],
)
def test_check_schema_rejects_a_schema_that_is_not_an_object_schema(schema: Any) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        check_schema(schema)
    assert "requestedSchema" in str(info.value)


def test_unsupported_schema_error_is_an_elicitron_error() -> None:
    assert issubclass(UnsupportedSchemaError, ElicitronError)
    assert issubclass(InvalidContentError, ElicitronError)


@pytest.mark.parametrize(
    "prop",
    [{"type": ["string", "null"]}, {"type": {"const": "string"}}, {"type": "string", "format": ["email"]}],
    ids=["type list", "type object", "format list"],
)
def test_check_schema_rejects_unhashable_type_or_format_cleanly(prop: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedSchemaError, match="'culprit'"):
        check_schema(obj({"culprit": prop}))


# ---- option helpers -------------------------------------------------------------------------


def test_enum_options_cover_the_three_single_select_spellings() -> None:
    assert enum_options({"type": "string", "enum": ["a", "b"]}) == [("a", "a"), ("b", "b")]
    assert enum_options({"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]}) == [
        ("a", "A"),
        ("b", "B"),
    ]
    assert enum_options({"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b"}]}) == [
        ("a", "A"),
        ("b", "b"),
    ]
    assert enum_options({"type": "string"}) is None


def test_multi_options_cover_items_enum_and_items_any_of() -> None:
    assert multi_options({"type": "array", "items": {"enum": ["x", "y"]}}) == [("x", "x"), ("y", "y")]
    assert multi_options({"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}}) == [
        ("x", "X")
    ]


# ---- validate_content ----------------------------------------------------------------------

FORM = obj(
    {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "guests": {"type": "integer", "minimum": 1, "maximum": 8},
        "price": {"type": "number", "minimum": 0.5, "maximum": 99.5},
        "vip": {"type": "boolean"},
        "size": {"type": "string", "enum": ["s", "m", "l"]},
        "tier": {
            "type": "string",
            "oneOf": [{"const": "gold", "title": "Gold"}, {"const": "free", "title": "Free"}],
        },
        "tags": {
            "type": "array",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "minItems": 1,
            "maxItems": 2,
        },
        "picks": {"type": "array", "items": {"anyOf": [{"const": "x"}, {"const": "y"}]}},
        "mail": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
    },
    required=["name", "guests"],
)


def test_complete_valid_content_passes() -> None:
    content = {
        "name": "Ann",
        "guests": 2,
        "price": 3,
        "vip": False,
        "size": "m",
        "tier": "gold",
        "tags": ["a", "c"],
        "picks": ["y"],
        "mail": "ann@example.com",
        "site": "https://example.com/x?y=1",
        "day": "2024-02-29",
        "at": "2024-02-29T10:00:00Z",
    }
    check_schema(FORM)
    assert problems(FORM, content) == []


def test_only_required_keys_are_needed() -> None:
    assert problems(FORM, {"name": "Ann", "guests": 1}) == []
    assert problems(obj({"a": {"type": "string"}}), {}) == []


def test_missing_required_keys_are_named() -> None:
    got = problems(FORM, {})
    assert len(got) == 2
    assert any("'name'" in p and "required" in p for p in got)
    assert any("'guests'" in p and "required" in p for p in got)


def test_unknown_keys_are_refused() -> None:
    got = problems(FORM, {"name": "Ann", "guests": 1, "extra": "x"})
    assert len(got) == 1
    assert "'extra'" in got[0]


def test_a_schema_without_properties_accepts_only_empty_content() -> None:
    assert problems({"type": "object"}, {}) == []
    assert len(problems({"type": "object"}, {"x": 1})) == 1


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("guests", True),
        ("guests", False),
        ("guests", 1.5),
        ("guests", "2"),
        ("guests", None),
        ("price", True),
        ("price", "3"),
        ("price", [3]),
        ("vip", 1),
        ("vip", "true"),
        ("vip", None),
        ("name", 42),
        ("name", ["Ann"]),
        ("name", None),
        ("tags", "a"),
        ("tags", {"a": True}),
    ],
)
def test_types_are_exact(key: str, value: Any) -> None:
    got = problems(FORM, {"name": "Ann", "guests": 2, key: value})
    assert len(got) == 1
    assert got[0].startswith(repr(key))


def test_an_integer_is_a_valid_number_and_a_float_is_not_an_integer() -> None:
    assert problems(FORM, {"name": "Ann", "guests": 2, "price": 3}) == []
    assert problems(FORM, {"name": "Ann", "guests": 2, "price": 3.25}) == []
    assert property_problems({"type": "integer"}, 1.5) == ["must be an integer"]
    assert property_problems({"type": "integer"}, True) != []
    assert property_problems({"type": "number"}, False) != []
    assert property_problems({"type": "integer"}, -7) == []


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        ("size", "m", True),
        ("size", "xl", False),
        ("size", "M", False),
        ("tier", "free", True),
        ("tier", "Gold", False),  # the title is not a value
        ("tags", ["b"], True),
        ("tags", ["d"], False),
        ("picks", ["x", "y"], True),
        ("picks", ["z"], False),
        ("picks", [], True),
    ],
)
def test_enum_membership(key: str, value: Any, ok: bool) -> None:
    got = problems(FORM, {"name": "Ann", "guests": 2, key: value})
    assert (got == []) is ok, got


def test_enum_names_are_labels_not_values() -> None:
    prop = {"type": "string", "enum": ["a", "b"], "enumNames": ["Alpha", "Beta"]}
    assert property_problems(prop, "a") == []
    assert property_problems(prop, "Alpha") != []


def test_numeric_enums_use_exact_types() -> None:
    prop = {"type": "integer", "enum": [1, 2]}
    assert property_problems(prop, 1) == []
    assert property_problems(prop, 3) != []
    assert property_problems(prop, True) != []


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        ("name", "Al", True),
        ("name", "Alice", True),
        ("name", "A", False),
        ("name", "Alexandra", False),
        ("guests", 1, True),
        ("guests", 8, True),
        ("guests", 0, False),
        ("guests", 9, False),
        ("price", 0.5, True),
        ("price", 99.5, True),
        ("price", 0.49, False),
        ("price", 100, False),
    ],
)
def test_min_and_max_bounds_are_inclusive(key: str, value: Any, ok: bool) -> None:
    got = problems(FORM, {"name": "Ann", "guests": 2, key: value})
    assert (got == []) is ok, got


def test_nan_is_not_within_bounds() -> None:
    assert property_problems({"type": "number", "minimum": 0, "maximum": 10}, math.nan) != []


def test_infinity_is_caught_by_bounds() -> None:
    assert property_problems({"type": "number", "maximum": 10}, math.inf) != []
    assert property_problems({"type": "number", "minimum": 0}, -math.inf) != []


@pytest.mark.parametrize(
    ("fmt", "value", "ok"),
    [
        ("email", "ann@example.com", True),
        ("email", "a.b+c@mail.example.org", True),
        ("email", "ann", False),
        ("email", "ann@example", False),
        ("email", "ann@@example.com", False),
        ("email", "an n@example.com", False),
        ("email", "", False),
        ("uri", "https://example.com", True),
        ("uri", "mailto:ann@example.com", True),
        ("uri", "urn:isbn:0451450523", True),
        ("uri", "example.com", False),
        ("uri", "/relative/path", False),
        ("uri", "https://exa mple.com", False),
        ("uri", "", False),
        ("date", "2024-02-29", True),
        ("date", "2023-12-31", True),
        ("date", "2024-02-30", False),
        ("date", "2023-02-29", False),
        ("date", "2024-13-01", False),
        ("date", "20240101", False),
        ("date", "2024-01-01T00:00:00Z", False),
        ("date", "yesterday", False),
        ("date-time", "2024-02-29T10:00:00Z", True),
        ("date-time", "2024-02-29T10:00:00z", True),
        ("date-time", "2024-02-29T10:00:00+01:00", True),
        ("date-time", "2024-02-29T10:00:00.123-05:30", True),
        ("date-time", "2024-02-29t10:00:00Z", True),
        ("date-time", "2024-02-29T10:00:00", False),  # needs a timezone
        ("date-time", "2024-02-29", False),
        ("date-time", "2024-02-30T10:00:00Z", False),
        ("date-time", "2024-02-29T25:00:00Z", False),
        ("date-time", "now", False),
    ],
)
def test_formats(fmt: str, value: str, ok: bool) -> None:
    got = property_problems({"type": "string", "format": fmt}, value)
    assert (got == []) is ok, got
    if not ok:
        assert got == [f"is not a valid {fmt}"]


@pytest.mark.parametrize(
    ("fmt", "value"),
    [
        ("date", "2024-W09-4"),
        ("date-time", "20240229T100000Z"),
        ("date-time", "2024-02-29T10Z"),
        ("date-time", "2024-02-29T10:00Z"),
    ],
)
def test_iso_8601_forms_outside_rfc_3339_are_refused(fmt: str, value: str) -> None:
    assert property_problems({"type": "string", "format": fmt}, value) != []


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (["a"], True),
        (["a", "b"], True),
        ([], False),
        (["a", "b", "c"], False),
        (["a", "a"], False),
    ],
)
def test_min_items_max_items_and_duplicates(value: list[str], ok: bool) -> None:
    got = problems(FORM, {"name": "Ann", "guests": 2, "tags": value})
    assert (got == []) is ok, got


def test_duplicates_are_reported_as_duplicates() -> None:
    got = property_problems({"type": "array", "items": {"enum": ["a", "b"]}}, ["a", "b", "a"])
    assert got == ["has duplicate items"]


def test_every_problem_is_listed_at_once() -> None:
    content = {
        "name": "A",  # too short
        "price": "free",  # wrong type
        "tags": ["a", "a", "z"],  # duplicate, not allowed, too many
        "mail": "nope",  # bad format
        "extra": 1,  # unknown key
    }  # and "guests" is missing
    with pytest.raises(InvalidContentError) as info:
        validate_content(FORM, content)
    got = info.value.problems
    assert len(got) == 8, got
    for needle in ("'name'", "'price'", "'mail'", "'extra'", "'guests'"):
        assert any(needle in p for p in got), needle
    assert sum("'tags'" in p for p in got) == 3
    for p in got:
        assert p in str(info.value)


def test_string_problems_can_pile_up() -> None:
    prop = {"type": "string", "maxLength": 3, "format": "email"}
    assert property_problems(prop, "toolong") == ["must be at most 3 characters", "is not a valid email"]

def test_checked_schemas_refuses_a_bad_schema_every_time_and_remembers_only_good_ones() -> None:
    checked = CheckedSchemas()
    bad = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 2**70}}}
    for _ in range(2):
        with pytest.raises(UnsupportedSchemaError, match="minimum must be a finite number"):
            checked.check(bad)
    good = {"type": "object", "properties": {"a": {"type": "string"}}}
    checked.check(good)
    checked.check(dict(good))  # the same JSON: recognised
    for i in range(CheckedSchemas.MAX_REMEMBERED + 10):
        checked.check({"type": "object", "properties": {f"p{i}": {"type": "string"}}})
    assert len(checked._accepted) == CheckedSchemas.MAX_REMEMBERED
    with pytest.raises(UnsupportedSchemaError):
        checked.check({"type": "object", "properties": {"a": {"type": "weird"}}})


# ---- nesting: validation never recurses on a value without a bound ---------------------------


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_values_as_deep_as_a_body_from_main_can_hold_are_validated_like_any_other() -> None:
    schema = obj({"tags": {"type": "array", "items": {"enum": ["a", "b"]}}})
    assert problems(schema, {"tags": [_nested(256)]}) == ["'tags' has an item that is not one of the allowed values"]
    assert property_problems({"type": "string"}, _nested(256)) == ["must be a string"]


def test_a_value_nested_past_any_recursion_limit_is_invalid_content_not_a_crash() -> None:
    schema = obj({"tags": {"type": "array", "items": {"enum": ["a", "b"]}}})
    assert problems(schema, {"tags": [_nested(100_000)]})  # reported, whatever part of the check gave up


def test_checked_schemas_takes_a_schema_too_deep_to_encode_without_remembering_it() -> None:
    checked = CheckedSchemas()
    deep = {"type": "object", "properties": {"a": {"type": "string"}}, "x-extra": _nested(100_000)}
    checked.check(deep)  # check_schema reads a fixed few levels: accepted, the wire refuses it later
    assert not checked._accepted
    with pytest.raises(UnsupportedSchemaError, match="unsupported type") as refused:
        checked.check({"type": "object", "properties": {"a": {"type": _nested(100_000)}}})
    assert len(str(refused.value)) < 100  # the value is named by a few levels of it
