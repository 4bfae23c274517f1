"""Every origin a sign-in talks to, which of them lie outside the authorization server's, and
what the user allowed on the card.

A server's metadata names its token and registration endpoints freely; one on another origin than
the issuer would get the authorization code, the PKCE verifier and the configured client secret.
So such an endpoint is `elsewhere`: the card names it and main sends nothing there unless the
accept's content lists its origin under `allowHosts` (a v1 window's plain accept allows nothing).
"""

from typing import Any
from urllib.parse import urlsplit

from shared.errors import InvalidContentError
from shared.messages import MAX_SIGN_IN_HOSTS, SIGN_IN_ALLOW_PROPERTY, SignInHost, SignInRole

_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_ORIGIN_CHARS = 2048


def origin(url: str) -> str:
    """scheme://host[:port] of `url`, lower-cased, the scheme's default port left out."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    shown_port = f":{port}" if port is not None and port != _DEFAULT_PORTS.get(scheme) else ""
    return f"{scheme}://{host}{shown_port}"


def sign_in_hosts(*, issuer: str, authorization: str, token: str, registration: str | None,
                  resource: str) -> list[SignInHost]:
    """The card's list, in the order the flow uses them; token and registration are `elsewhere`
    when their origin is not the issuer's."""
    home = origin(issuer)
    found: list[tuple[SignInRole, str | None]] = [
        ("authorization", authorization), ("token", token), ("registration", registration), ("resource", resource)]
    return [SignInHost(role=role, origin=origin(url), elsewhere=role in ("token", "registration")
                       and origin(url) != home)
            for role, url in found if url]


def needs_allowing(hosts: list[SignInHost]) -> list[str]:
    """The origins the user must allow on the sign-in card, each once: the token endpoint's (a
    registration elsewhere was allowed on its own card before it went out)."""
    return list(dict.fromkeys(h.origin for h in hosts if h.elsewhere and h.role == "token"))


def registration_form(elsewhere: str, issuer: str) -> dict[str, Any]:
    """The card asking whether to register at `elsewhere`: a form whose one field lists that
    origin, unticked (so any window can answer it; its accept content is an allowance)."""
    return {"type": "object", "properties": {SIGN_IN_ALLOW_PROPERTY: {
        "type": "array", "title": "Register Elicitron as a client at",
        "description": f"not at the authorization server {issuer}",
        "items": {"type": "string", "enum": [elsewhere]}, "default": []}}}


def allowance(content: dict[str, Any] | None) -> dict[str, Any] | None:
    """A sign-in accept's content, checked: None, or `{allowHosts: [origin, ..]}`. Raises
    InvalidContentError for anything else (the card stays open)."""
    if not content:
        return None
    allowed = content.get(SIGN_IN_ALLOW_PROPERTY)
    if set(content) != {SIGN_IN_ALLOW_PROPERTY} or not isinstance(allowed, list) \
            or len(allowed) > MAX_SIGN_IN_HOSTS \
            or not all(isinstance(o, str) and 0 < len(o) <= _MAX_ORIGIN_CHARS for o in allowed):
        why = (f"a sign-in's accept carries only {SIGN_IN_ALLOW_PROPERTY!r}: "
               f"a list of at most {MAX_SIGN_IN_HOSTS} origins")
        raise InvalidContentError([why])
    return {SIGN_IN_ALLOW_PROPERTY: list(dict.fromkeys(allowed))}


def allowed_origins(content: dict[str, Any] | None) -> set[str]:
    checked = allowance(content)
    return set(checked[SIGN_IN_ALLOW_PROPERTY]) if checked else set()
