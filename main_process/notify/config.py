"""The `notify` config: where main POSTs a notice of each new request, parsed strictly.

Top level, `"elicitron": {"notify": {...}}` (or a list of such objects, one per receiver):

    url                 required; http:// or https:// with a host (ntfy topic URL, Gotify
                        `/message?token=…`, a Slack or Discord incoming-webhook URL, your own)
    format              "json" (default), "ntfy", "gotify", "slack", "discord" (payload.py)
    headers             {name: value} sent with every POST (an ntfy access token, X-Gotify-Key)
    link                the web window's address as your browser reaches it (a reverse proxy's
                        https URL); default: the running web window's own URL, none without one
    when                "no-window" (default: only requests that reached no window, Qt or web) or
                        "always"
    burst, burstWindowSeconds   at most `burst` POSTs within any such window (default 5 in 60 s);
                        what arrives meanwhile goes as one notice when the window allows
    retries             attempts after the first for a POST that failed (default 3, at most 10)
    timeoutSeconds      for one POST (default 10)

The URL and headers may hold secrets (a Slack URL is its own credential): `label` names a target
by scheme and host alone, for status and logs.
"""

import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from main_process.config_values import seconds, whole
from shared.errors import ConfigError

NotifyFormat = Literal["json", "ntfy", "gotify", "slack", "discord"]
NotifyWhen = Literal["no-window", "always"]
FORMATS: Final = ("json", "ntfy", "gotify", "slack", "discord")
WHEN: Final = ("no-window", "always")
_KEYS: Final = {"url", "format", "headers", "link", "when", "burst", "burstWindowSeconds", "retries",
                "timeoutSeconds"}
DEFAULT_BURST: Final = 5
DEFAULT_BURST_WINDOW_S: Final = 60.0
DEFAULT_RETRIES: Final = 3
DEFAULT_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, kw_only=True)
class NotifyTarget:
    url: str
    format: NotifyFormat = "json"
    headers: tuple[tuple[str, str], ...] = ()
    link: str | None = None  # None: the running web window's URL (web.json), if any
    when: NotifyWhen = "no-window"
    burst: int = DEFAULT_BURST
    burst_window_s: float = DEFAULT_BURST_WINDOW_S
    retries: int = DEFAULT_RETRIES
    timeout_s: float = DEFAULT_TIMEOUT_S
    label: str = field(default="", compare=False)  # "ntfy https://ntfy.sh/…": no path, query or user

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", f"{self.format} {redact(self.url)}")


def redact(url: str) -> str:
    """`url` as scheme and host only ("https://hooks.slack.com/…"): its path, query and user
    part may be the credential."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    rest = "/…" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{rest}"


def parse_notify(value: Any, source: str) -> tuple[NotifyTarget, ...]:
    """`elicitron.notify`: one object or a list of them; ConfigError names the entry and the fix."""
    if value is None:
        return ()
    entries = value if isinstance(value, list) else [value]
    targets = []
    for index, entry in enumerate(entries):
        where = f"{source}: elicitron.notify" + (f"[{index}]" if isinstance(value, list) else "")
        targets.append(_parse_target(where, entry))
    return tuple(targets)


def _parse_target(where: str, entry: Any) -> NotifyTarget:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be an object with a \"url\" (e.g. {{\"url\": \"https://ntfy.sh/my-topic\", "
                          "\"format\": \"ntfy\"}})")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(sorted(_KEYS))}")
    if "url" not in entry:
        raise ConfigError(f"{where}: needs \"url\", the http:// or https:// address to POST each new request to")
    url = _http_url(where, "url", entry["url"])
    link = _http_url(where, "link", entry["link"]) if entry.get("link") is not None else None
    fmt = entry.get("format", "json")
    if fmt not in FORMATS:
        raise ConfigError(f"{where}: \"format\" must be one of {', '.join(map(repr, FORMATS))}")
    when = entry.get("when", "no-window")
    if when not in WHEN:
        raise ConfigError(f"{where}: \"when\" must be \"no-window\" (requests no window got) or \"always\"")
    return NotifyTarget(
        url=url, format=cast(NotifyFormat, fmt), headers=_headers(where, entry.get("headers", {})), link=link,
        when=cast(NotifyWhen, when),
        burst=whole(where, entry, "burst", DEFAULT_BURST, 1, 1000),
        burst_window_s=seconds(where, entry, "burstWindowSeconds", DEFAULT_BURST_WINDOW_S, 24 * 3600.0),
        retries=whole(where, entry, "retries", DEFAULT_RETRIES, 0, 10),
        timeout_s=seconds(where, entry, "timeoutSeconds", DEFAULT_TIMEOUT_S, 120.0),
    )


def _http_url(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: \"{key}\" must be a string, an http:// or https:// URL")
    try:
        parts = urllib.parse.urlsplit(value)
        _ = parts.port  # raises ValueError for a port that is not a number
    except ValueError:
        raise ConfigError(f"{where}: \"{key}\" is not a valid URL: {redact_text(value)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        shown = f"{parts.scheme}:" if parts.scheme else "no scheme"
        raise ConfigError(f"{where}: \"{key}\" must be an http:// or https:// URL with a host ({shown} given); "
                          f"e.g. \"https://ntfy.sh/my-topic\"")
    if any(char.isspace() or not char.isprintable() for char in value):
        raise ConfigError(f"{where}: \"{key}\" holds spaces or control characters; percent-encode them")
    return value


def redact_text(value: str) -> str:
    """A bad URL for an error message: its first characters only (the rest may be a secret)."""
    return repr(value[:12] + "…") if len(value) > 12 else repr(value)


def _headers(where: str, value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: \"headers\" must map header names to string values")
    for name, text in value.items():
        if not isinstance(text, str) or not name or not all(c.isascii() and c.isprintable() and c not in " :"
                                                            for c in name):
            raise ConfigError(f"{where}: headers[{name!r}] must be a header name (ASCII, no spaces or ':') with a "
                              "string value")
        if any(c in "\r\n\0" for c in text) or not text.isascii():
            raise ConfigError(f"{where}: headers[{name!r}] must be ASCII on one line")
    return tuple(value.items())
