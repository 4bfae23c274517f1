"""An invoke as the plain JSON card the page draws: which card it is (form, url, sign-in,
approval, unsupported), who asks (a server, or a program: shared/question_card.py), its fields from
the requested schema, what the link of a URL or sign-in card really is (shared/url_safety.py, the
same checks as the Qt window), what it offers (remembering the answer, a yes/no confirm) and how
long it has left. The page only lays this out; every string here is shown with textContent.

`msLeft` is the time left when the card leaves the web window, by its clock (the one main's
`expiresAt` is read on): the page counts down from when it got the card, by its own clock, so a
phone whose clock is off still shows the right time.

Pure functions of the invoke and `now` (epoch ms), tested in-process.
"""

import json
import time
from collections.abc import Mapping
from typing import Any

from shared.denial_reason import REASON_MAX_CHARS
from shared.errors import UnsupportedSchemaError
from shared.messages import APPROVAL_DECISIONS, SIGN_IN_ALLOW_PROPERTY, ElicitationInvoke, SignInInfo
from shared.question_card import is_question, who_asks, yes_no_property
from shared.schema import check_schema, enum_options, multi_options
from shared.url_safety import inspect_url
from shared.window_core import quorum_text

Card = dict[str, Any]

APPROVAL_BUTTONS = (  # the Qt approval card's buttons, in its order
    ("allow-once", "Allow once"),
    ("allow-session", "Allow for this session"),
    ("allow-always", "Always allow"),
    ("deny", "Deny"),
)
assert tuple(decision for decision, _ in APPROVAL_BUTTONS) == APPROVAL_DECISIONS
GRANT_BUTTONS = (("allow-once", "Allow once"), ("grant", "Allow as chosen"), ("deny", "Deny"))  # main offers grants
ARGUMENT_TITLES = {"exact": "these exact arguments", "pattern": "arguments like these", "any": "any arguments"}
DURATION_TITLES = {"session": "for this session", "hour": "for an hour", "until": "until…", "always": "always"}

_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}

SIGN_IN_ROLES = {"authorization": "Sign-in page", "token": "Tokens (gets the sign-in code)",
                 "registration": "Client registration", "resource": "The server"}  # as the Qt card names them
LEGACY_METADATA_LINE = ("This server predates the OAuth metadata spec (it publishes none), so you sign in at "
                        "the server's own address.")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def card_of(invoke: ElicitationInvoke, now: int | None = None) -> Card:
    """The card of `invoke` as the page gets it at `now` (epoch ms; the web window's clock by default)."""
    params = invoke.request.params
    expires_at = invoke.expires_at
    card: Card = {
        "channel": invoke.response_channel,
        "server": invoke.request.server,
        "who": who_asks(invoke),
        "question": is_question(invoke),
        "message": str(params.get("message", "")),
        "createdAt": invoke.created_at,
        "expiresAt": expires_at,
        # main sends any integer: an absurd one is left to the page's "more than a year"
        "msLeft": None if expires_at is None else max(0, expires_at - (now_ms() if now is None else now)),
        "via": invoke.via,
        "remember": None,
        "confirm": None,
        "declineAll": False,
    }
    if invoke.machine is not None:  # another main's request (a shared store): "on <machine>"
        card["machine"] = invoke.machine
    if invoke.quorum is not None:  # "1 of 2 approvals (ana)": sent again with each approval
        card["quorum"] = quorum_text(invoke.quorum)
    if invoke.asker is not None:
        card["asker"] = {"name": invoke.asker.name, "pid": invoke.asker.pid, "machine": invoke.asker.machine}
    if invoke.kind == "approval" and invoke.approval is not None:
        info = invoke.approval
        offer = info.grants if invoke.quorum is None else None
        card.update(kind="approval", approval={
            "server": info.server, "tool": info.tool, "title": info.title, "description": info.description,
            "arguments": [[str(key), value_text(value)] for key, value in info.arguments.items()],
            "buttons": [list(button) for button in (APPROVAL_BUTTONS if offer is None else GRANT_BUTTONS)],
            "reasonMaxChars": REASON_MAX_CHARS, "grant": None if offer is None else {
                "arguments": [[scope, ARGUMENT_TITLES.get(scope, scope)] for scope in offer.arguments],
                "durations": [[duration, DURATION_TITLES.get(duration, duration)] for duration in offer.durations],
                "pattern": [[name, offer.pattern.get(name, "")] for name in info.arguments]}})
        return card
    if params.get("mode") == "url" and invoke.kind == "sign-in" and invoke.sign_in is not None:
        link, sign_in = link_of(str(params.get("url", ""))), invoke.sign_in
        issuer = sign_in.authorization_server
        if link["host"] and issuer and link["host"].lower() != issuer.lower():
            link["warnings"].append(f"The link goes to {link['host']}, not to {issuer}.")
        card.update(kind="sign-in", link=link, signIn=sign_in_of(sign_in), elicitationId=params.get("elicitationId"))
        return card
    # "Decline all from <server> for this session", as on the Qt card: a policy for servers, so
    # neither a program's question nor a sign-in (main never answers one by policy) offers it
    card["declineAll"] = not is_question(invoke) and invoke.kind != "sign-in"
    if params.get("mode") == "url" or invoke.kind == "sign-in":  # never remembered: no rule answers a link
        card.update(kind="url", link=link_of(str(params.get("url", ""))))
        return card
    schema = params.get("requestedSchema")
    try:
        check_schema(schema)
    except UnsupportedSchemaError as exc:
        card.update(kind="unsupported", why=str(exc), declineAll=False)
        return card
    assert isinstance(schema, Mapping)
    required = set(schema.get("required", []))
    card.update(kind="form", fields=[field_of(str(name), prop, str(name) in required)
                                     for name, prop in schema.get("properties", {}).items()],
                confirm=yes_no_property(invoke))
    if invoke.kind is None or is_question(invoke):  # as the Qt card: never a sign-in's form
        who = f"the program {invoke.request.server}" if is_question(invoke) else f"the server {invoke.request.server}"
        card["remember"] = {"who": who}
    return card


def sign_in_of(info: SignInInfo) -> dict[str, Any]:
    """The sign-in card's facts: where you sign in, what it asks for, every host the flow talks to
    (those on another host than the authorization server each to be allowed, unticked), and the
    line for a server without OAuth metadata."""
    hosts = [{"role": SIGN_IN_ROLES.get(host.role, host.role), "origin": host.origin, "elsewhere": host.elsewhere}
             for host in info.hosts]
    return {"authorizationServer": info.authorization_server, "scopes": list(info.scopes), "hosts": hosts,
            "allow": list(dict.fromkeys(host.origin for host in info.hosts if host.elsewhere)),
            "allowProperty": SIGN_IN_ALLOW_PROPERTY, "redirectUri": info.redirect_uri,
            "legacy": LEGACY_METADATA_LINE if info.legacy_metadata else None}


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
