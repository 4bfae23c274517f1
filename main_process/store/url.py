"""A store URL as people may see it: `redact` is the one way a URL reaches a log, `status` or an
error, so a password written in it (`postgresql://ana:secret@db/x`, `?password=secret`) never does.

No psycopg here: the CLI and the config check print URLs without loading the PostgreSQL driver.
"""

from typing import Final
from urllib.parse import unquote, urlsplit, urlunsplit

HIDDEN: Final = "***"
# Query parameters of a libpq URL that hold a secret (libpq: `password`; `sslpassword` unlocks the
# client key). Compared lowercased and unquoted.
_SECRET_PARAMETERS: Final = frozenset({"password", "sslpassword"})


def redact(url: str) -> str:
    """`url` with every password shown as `***`; the rest (user, hosts, database, `sslmode`,
    certificate paths) as written. A URL that cannot be split shows its scheme only."""
    scheme, sep, _rest = url.partition("://")
    if not sep:
        return url if "password" not in url.lower() else HIDDEN  # "sqlite:", or no URL at all
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed [IPv6] bracket
        return f"{scheme}://{HIDDEN}"
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.partition(":")[0] + ":" + HIDDEN
    netloc = f"{userinfo}@{hosts}" if at else hosts
    query = "&".join(_redacted_parameter(item) for item in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def without_password(url: str) -> str:
    """`url` with the password of its user part left out (the key a password is kept under in
    the keyring: it names the user, host and database, never the secret)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    netloc = f"{userinfo.partition(':')[0]}@{hosts}" if at else hosts
    query = "&".join(item for item in parts.query.split("&") if not _is_secret(item)) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(text: str, secret: str | None) -> str:
    """`text` (a driver's error) with `secret` replaced, in case a message ever echoes it."""
    return text.replace(secret, HIDDEN) if secret else text


def _is_secret(parameter: str) -> bool:
    return unquote(parameter.partition("=")[0]).strip().lower() in _SECRET_PARAMETERS


def _redacted_parameter(parameter: str) -> str:
    return parameter.partition("=")[0] + "=" + HIDDEN if _is_secret(parameter) else parameter
