"""An invoke as the plain JSON card the page draws: which card it is, its fields from the
requested schema, and what the link of a URL card really is (shared/url_safety.py, the same checks
as the Qt window). The page only lays this out; every string here is shown with textContent.

Pure functions of the invoke, tested in-process.
"""

import json
from collections.abc import Mapping
from typing import Any

from shared.errors import UnsupportedSchemaError
from shared.messages import APPROVAL_DECISIONS, ElicitationInvoke
from shared.schema import check_schema, enum_options, multi_options
from shared.url_safety import inspect_url

Card = dict[str, Any]

APPROVAL_BUTTONS = (  # the Qt approval card's buttons, in its order
    ("allow-once", "Allow once"),
    ("allow-session", "Allow for this session"),
    ("allow-always", "Always allow"),
    ("deny", "Deny"),
)
assert tuple(decision for decision, _ in APPROVAL_BUTTONS) == APPROVAL_DECISIONS

_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}


def card_of(invoke: ElicitationInvoke) -> Card:
    params = invoke.request.params
    card: Card = {
        "channel": invoke.response_channel,
        "server": invoke.request.server,
        "message": str(params.get("message", "")),
        "createdAt": invoke.created_at,
        "expiresAt": invoke.expires_at,
        "via": invoke.via,
    }
    if invoke.asker is not None:
        card["asker"] = {"name": invoke.asker.name, "pid": invoke.asker.pid, "machine": invoke.asker.machine}
    if invoke.kind == "approval" and invoke.approval is not None:
        info = invoke.approval
        card.update(kind="approval", approval={
            "server": info.server, "tool": info.tool, "title": info.title, "description": info.description,
            "arguments": [[str(key), value_text(value)] for key, value in info.arguments.items()],
            "buttons": [list(button) for button in APPROVAL_BUTTONS]})
        return card
    if params.get("mode") == "url" or invoke.kind == "sign-in":
        card.update(kind="url", link=link_of(str(params.get("url", ""))))
        return card
    schema = params.get("requestedSchema")
    try:
        check_schema(schema)
    except UnsupportedSchemaError as exc:
        card.update(kind="unsupported", why=str(exc))
        return card
    assert isinstance(schema, Mapping)
    required = set(schema.get("required", []))
    card.update(kind="form", fields=[field_of(str(name), prop, str(name) in required)
                                     for name, prop in schema.get("properties", {}).items()])
    return card


def field_of(name: str, prop: Mapping[str, Any], required: bool) -> dict[str, Any]:
    """One form control: its kind (text, number, integer, boolean, choice, multi), label and limits."""
    kind = str(prop["type"])
    field: dict[str, Any] = {"name": name, "title": str(prop.get("title") or name),
                             "description": str(prop.get("description", "")), "required": required}
    if "default" in prop:
        field["default"] = prop["default"]
    options = enum_options(prop) if kind != "array" else None
    if options is not None:
        field.update(kind="choice", choices=[{"value": value, "title": title} for value, title in options])
    elif kind == "array":
        field.update(kind="multi", choices=[{"value": value, "title": title} for value, title in multi_options(prop)])
        for key in ("minItems", "maxItems"):
            if key in prop:
                field[key] = prop[key]
    elif kind == "boolean":
        field["kind"] = "boolean"
    elif kind in ("number", "integer"):
        field["kind"] = kind
        for key in ("minimum", "maximum"):
            if key in prop:
                field[key] = prop[key]
    else:
        field.update(kind="text", inputType=_INPUT_TYPES.get(str(prop.get("format", "")), "text"))
        for key in ("minLength", "maxLength"):
            if key in prop:
                field[key] = prop[key]
    return field


def link_of(url: str) -> dict[str, Any]:
    """The link as three runs (before the host, the host in bold, after it), what to warn about, and
    whether it may be opened at all (not with bidi, control or hidden characters, as in Qt)."""
    report = inspect_url(url)
    start = report.host_start
    if start >= 0 and report.host:
        runs = [url[:start], url[start:start + len(report.host)], url[start + len(report.host):]]
    else:
        runs = [url, "", ""]
    return {"url": url, "runs": runs, "host": report.host, "address": report.address,
            "openable": report.openable, "warnings": list(report.warnings), "refusal": report.refusal}


def value_text(value: Any) -> str:
    """An argument as a person reads it: strings as they are, everything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
