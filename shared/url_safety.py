"""What a user must know about a URL before consenting to open it. Pure functions, no Qt.

The renderer never fetches the URL; this only reads its text: where it really goes (the host,
past any `user@` prefix, and the real address behind a numeric host such as `0x7f.1`), whether
it is encrypted, whether the host could be a look-alike, and whether the text hides characters
that make it read differently from where it goes. A link that hides such characters, or that a
browser would read differently from what is shown, is not openable at all: the card says why.
The card adds one more gate with Qt's own strict parser (see card.py).
"""

import html
import ipaddress
import string
import unicodedata
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

OPENABLE_SCHEMES = ("https", "http")

# Format characters (Cf: bidi overrides and isolates, zero-width joiners, BOM, soft hyphen...),
# controls (Cc: newline, tab, NUL...), and every kind of space and line separator.
_HIDDEN_CATEGORIES = ("Cc", "Cf", "Zs", "Zl", "Zp")
_MAX_NAMED = 3  # hidden characters named in the warning; the URL shows all of them

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class UrlReport:
    url: str
    host: str  # as written in the URL ("" if there is none)
    openable: bool  # may be handed to the browser (http(s), a host, nothing hidden or ambiguous)
    warnings: list[str] = field(default_factory=list)
    host_start: int = -1  # index of `host` inside `url`, for highlighting
    address: str = ""  # the real IP address when the host is numeric in any spelling
    refusal: str = ""  # why it is not openable ("" when it is)

    def highlighted_html(self) -> str:
        """The whole URL as rich text, escaped, host in bold, hidden characters made visible."""
        if self.host_start < 0:
            return _visible_html(self.url)
        end = self.host_start + len(self.host)
        return (
            _visible_html(self.url[: self.host_start])
            + "<b>"
            + _visible_html(self.host)
            + "</b>"
            + _visible_html(self.url[end:])
        )

    @property
    def destination(self) -> str:
        """Where the link goes, as the card's "Goes to" line says it."""
        if self.address and self.address != self.host.strip("[]"):
            return f"{self.host} (the address {self.address})"
        return self.host


def inspect_url(url: str) -> UrlReport:
    hidden = hidden_characters(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return UrlReport(
            url=url, host="", openable=False, warnings=["This is not a valid link."],
            refusal="this is not a valid link",
        )
    scheme = parts.scheme.lower()
    userinfo, at, hostport = parts.netloc.rpartition("@")
    host = _host_of(hostport)
    warnings: list[str] = []
    refusals: list[str] = []
    if hidden:
        names = ", ".join(_describe(c) for c in hidden[:_MAX_NAMED])
        more = f" and {len(hidden) - _MAX_NAMED} more" if len(hidden) > _MAX_NAMED else ""
        warnings.append(
            f"This link contains {len(hidden)} hidden or blank character(s) ({names}{more}), shown "
            "marked in the link above; they can make a link look as if it goes somewhere else."
        )
        refusals.append("it contains hidden or blank characters")
    if "\\" in url:
        warnings.append("This link contains a backslash, which browsers read as a slash.")
        refusals.append("a browser would read it differently from what is shown")
    if scheme not in OPENABLE_SCHEMES:
        warnings.append(f"Only web links (https) can be opened; this one is {scheme or 'not a web link'}:.")
        refusals.append("only web links (http, https) can be opened")
    elif scheme != "https":
        warnings.append(
            "This link is not encrypted (http, not https): others on the network can read or alter it."
        )
    if scheme in OPENABLE_SCHEMES and not host:
        warnings.append("This link names no host.")
        refusals.append("it names no host")
    if at:
        warnings.append(
            f"{userinfo + '@'!r} is only a user name, not the destination: the link goes to {host}."
        )
    address = ""
    if host:
        numeric = numeric_host(host)
        if numeric == INVALID:
            warnings.append(f"The host {host} looks like a numeric address but is not a valid one.")
            refusals.append("its host is not a valid address")
        elif isinstance(numeric, ipaddress.IPv4Address | ipaddress.IPv6Address):
            mapped = numeric.ipv4_mapped if isinstance(numeric, ipaddress.IPv6Address) else None
            address = str(mapped or numeric)
            warnings.extend(_address_warnings(host, mapped or numeric))
        elif _is_localhost_name(host):
            warnings.append(f"This link points at your own computer ({host}): {_LOCAL_RISK}")
        if _looks_international(host):
            warnings.append(
                f"The host {host} uses international characters ({_both_forms(host)}); "
                "such names can imitate a familiar site."
            )
    host_start = _find_host(url, parts.netloc, host)
    refusal = "; ".join(refusals)
    return UrlReport(
        url=url, host=host, openable=not refusals, warnings=warnings, host_start=host_start,
        address=address, refusal=refusal,
    )


def hidden_characters(text: str) -> list[str]:
    """The characters of `text` that are invisible, blank or controls, in order."""
    return [c for c in text if unicodedata.category(c) in _HIDDEN_CATEGORIES]


# ---- numeric hosts ---------------------------------------------------------------------------

INVALID: Literal["invalid"] = "invalid"  # a host browsers read as a number, but not a valid address


def numeric_host(host: str) -> Address | Literal["invalid"] | None:
    """The IP address a browser reads `host` as (IPv4 in any spelling browsers accept: hex,
    octal, fewer than four parts, one big decimal; or an IPv6 literal), INVALID when it is
    number-like but not a valid address, None for a host name."""
    if host.startswith("["):
        try:
            return ipaddress.IPv6Address(host.strip("[]"))
        except ValueError:
            return INVALID
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":  # a trailing dot is allowed
        parts = parts[:-1]
    if not _looks_numeric(parts[-1]):
        return None  # a host name: browsers treat a host as an address only if it ends in a number
    numbers = [_ipv4_number(part) for part in parts]
    if len(parts) > 4 or any(n is None for n in numbers):
        return INVALID
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        return INVALID
    address = values[-1]
    for index, number in enumerate(values[:-1]):
        address += number * 256 ** (3 - index)
    return ipaddress.IPv4Address(address)


def _looks_numeric(part: str) -> bool:
    if not part.isascii():
        return False
    if part[:2].lower() == "0x":
        return all(c in string.hexdigits for c in part[2:])
    return part.isdigit()


def _ipv4_number(part: str) -> int | None:
    """One dotted part as browsers read it (0x.. hex, 0.. octal, else decimal); None if not a number."""
    if not part or not part.isascii():
        return None
    base, digits = 10, part
    if part[:2].lower() == "0x":
        base, digits = 16, part[2:]
        if not digits:
            return 0
    elif len(part) > 1 and part[0] == "0":
        base, digits = 8, part[1:]
    try:
        return int(digits, base) if digits.isalnum() else None
    except ValueError:
        return None


_LOCAL_RISK = "a page there can talk to programs running on this machine."


def _address_warnings(host: str, address: Address) -> list[str]:
    warnings: list[str] = []
    written = host.strip("[]")
    if written.rstrip(".") == str(address):
        warnings.append(f"This link goes to the bare address {address}, not to a named site.")
    else:
        warnings.append(f"The host {host} is the address {address} written in a disguised form.")
    if address.is_loopback or address.is_unspecified:
        warnings.append(f"This link points at your own computer ({address}): {_LOCAL_RISK}")
    elif address.is_private or address.is_link_local or address.is_reserved:
        warnings.append(
            f"This link points into a private network ({address}): a page there can reach devices "
            "on your network, such as routers and printers."
        )
    return warnings


def _is_localhost_name(host: str) -> bool:
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost")


# ---- helpers ---------------------------------------------------------------------------------


_CONTROL_NAMES = {"\0": "NUL", "\t": "TAB", "\n": "LINE FEED", "\r": "CARRIAGE RETURN"}


def _describe(char: str) -> str:
    name = unicodedata.name(char, "") or _CONTROL_NAMES.get(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


_MARK_OPEN = '<span style="background-color: #ffd54f; color: #000000;">'  # readable on light and dark


def _visible_html(text: str) -> str:
    """Escaped rich text in which every hidden character shows as a marked ⟦U+XXXX⟧."""
    pieces: list[str] = []
    for char in text:
        if unicodedata.category(char) in _HIDDEN_CATEGORIES:
            pieces.append(f"{_MARK_OPEN}⟦U+{ord(char):04X}⟧</span>")
        else:
            pieces.append(html.escape(char))
    return "".join(pieces)


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
