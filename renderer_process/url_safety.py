"""What a user must know about a URL before consenting to open it. Pure functions, no Qt.

The renderer never fetches the URL; this only reads its text: where it really goes (the host,
past any `user@` prefix), whether it is encrypted, and whether the host could be a look-alike.
"""

import html
from dataclasses import dataclass, field
from urllib.parse import urlsplit

OPENABLE_SCHEMES = ("https", "http")


@dataclass(frozen=True)
class UrlReport:
    url: str
    host: str  # as written in the URL ("" if there is none)
    openable: bool  # only http(s) links with a host may be handed to the browser
    warnings: list[str] = field(default_factory=list)
    host_start: int = -1  # index of `host` inside `url`, for highlighting

    def highlighted_html(self) -> str:
        """The whole URL as rich text, escaped, with the host in bold."""
        if self.host_start < 0:
            return html.escape(self.url)
        end = self.host_start + len(self.host)
        return (
            html.escape(self.url[: self.host_start])
            + "<b>"
            + html.escape(self.host)
            + "</b>"
            + html.escape(self.url[end:])
        )


def inspect_url(url: str) -> UrlReport:
    try:
        parts = urlsplit(url)
    except ValueError:
        return UrlReport(url=url, host="", openable=False, warnings=["This is not a valid link."])
    scheme = parts.scheme.lower()
    userinfo, at, hostport = parts.netloc.rpartition("@")
    host = _host_of(hostport)
    warnings: list[str] = []
    if scheme not in OPENABLE_SCHEMES:
        warnings.append(f"Only web links (https) can be opened; this one is {scheme or 'not a web link'}:.")
    elif scheme != "https":
        warnings.append(
            "This link is not encrypted (http, not https): others on the network can read or alter it."
        )
    elif not host:
        warnings.append("This link names no host.")
    if at:
        warnings.append(
            f"{userinfo + '@'!r} is only a user name, not the destination: the link goes to {host}."
        )
    if host and _looks_international(host):
        warnings.append(
            f"The host {host} uses international characters ({_both_forms(host)}); "
            "such names can imitate a familiar site."
        )
    host_start = _find_host(url, parts.netloc, host)
    openable = scheme in OPENABLE_SCHEMES and bool(host)
    return UrlReport(url=url, host=host, openable=openable, warnings=warnings, host_start=host_start)


def _host_of(hostport: str) -> str:
    if hostport.startswith("["):  # IPv6 literal
        return hostport.partition("]")[0] + "]"
    return hostport.partition(":")[0]


def _find_host(url: str, netloc: str, host: str) -> int:
    if not host:
        return -1
    netloc_at = url.find(netloc)
    if netloc_at < 0:
        return -1
    return netloc_at + netloc.rfind(host)


def _looks_international(host: str) -> bool:
    return not host.isascii() or any(label.lower().startswith("xn--") for label in host.split("."))


def _both_forms(host: str) -> str:
    """Unicode and punycode spellings of `host`, whichever was given."""
    if host.isascii():
        try:
            return f"shown as {host.encode('ascii').decode('idna')}"
        except UnicodeError:
            return "punycode"
    try:
        return f"punycode {host.encode('idna').decode('ascii')}"
    except UnicodeError:
        return "not valid as a host name"
