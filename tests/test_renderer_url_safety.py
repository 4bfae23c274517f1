"""url_safety: what the URL card tells the user, and whether the link may be opened at all."""

import re

import pytest

from shared.url_safety import inspect_url


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("https://0x7f.1/", "127.0.0.1"),  # hex, two parts
        ("https://2130706433/", "127.0.0.1"),  # one dotless decimal
        ("https://017700000001/", "127.0.0.1"),  # octal
        ("https://0177.0.0.1/", "127.0.0.1"),
        ("https://127.1/", "127.0.0.1"),
        ("https://0x7F000001./", "127.0.0.1"),  # trailing dot
        ("https://[::ffff:127.0.0.1]/", "127.0.0.1"),  # IPv4 inside IPv6
        ("https://3232235777/", "192.168.1.1"),
    ],
)
def test_a_disguised_numeric_host_is_named_as_the_address_it_is(url: str, address: str) -> None:
    report = inspect_url(url)
    assert report.address == address
    assert any(f"is the address {address} written in a disguised form" in w for w in report.warnings)
    assert address in report.destination
    assert report.openable  # the user is told; the choice stays theirs


@pytest.mark.parametrize(
    ("url", "stronger"),
    [
        ("https://127.0.0.1/", "your own computer (127.0.0.1)"),
        ("https://[::1]/", "your own computer (::1)"),
        ("https://0.0.0.0/", "your own computer (0.0.0.0)"),
        ("https://localhost:8080/", "your own computer (localhost)"),
        ("https://app.localhost/", "your own computer (app.localhost)"),
        ("https://10.0.0.8/", "private network (10.0.0.8)"),
        ("https://169.254.169.254/latest/", "private network (169.254.169.254)"),
        ("https://192.168.1.1/", "private network (192.168.1.1)"),
    ],
)
def test_loopback_and_private_addresses_get_the_stronger_warning(url: str, stronger: str) -> None:
    assert any(stronger in w for w in inspect_url(url).warnings)


def test_a_public_address_is_named_without_alarm() -> None:
    report = inspect_url("https://93.184.216.34/x")
    assert report.warnings == ["This link goes to the bare address 93.184.216.34, not to a named site."]


@pytest.mark.parametrize("url", ["https://256.1.1.1/", "https://1.2.3.4.5/", "https://1.2.3.08/", "https://[::zz]/"])
def test_number_like_hosts_that_are_no_address_cannot_be_opened(url: str) -> None:
    report = inspect_url(url)
    assert not report.openable and "not a valid" in report.refusal


@pytest.mark.parametrize("host", ["example.com", "1password.com", "a1.b2", "x.123abc", "0xdead.beef.example"])
def test_ordinary_names_with_digits_are_not_addresses(host: str) -> None:
    report = inspect_url(f"https://{host}/")
    assert (report.address, report.warnings, report.openable) == ("", [], True)


@pytest.mark.parametrize(
    ("char", "name"),
    [
        ("\u202e", "RIGHT-TO-LEFT OVERRIDE"),
        ("\u2066", "LEFT-TO-RIGHT ISOLATE"),
        ("\u200b", "ZERO WIDTH SPACE"),
        ("\u200d", "ZERO WIDTH JOINER"),
        ("\ufeff", "ZERO WIDTH NO-BREAK SPACE"),
        ("\u00a0", "NO-BREAK SPACE"),
        ("\n", "LINE FEED"),
        ("\t", "TAB"),
        ("\x00", "NUL"),
        (" ", "SPACE"),
    ],
)
def test_hidden_characters_make_a_link_unopenable_and_are_shown(char: str, name: str) -> None:
    report = inspect_url(f"https://example.com/invoice{char}fdp.exe")
    assert not report.openable
    assert "hidden or blank characters" in report.refusal
    assert name in report.warnings[0]
    assert f"⟦U+{ord(char):04X}⟧" in report.highlighted_html()
    assert char not in re.sub(r"<[^>]*>", "", report.highlighted_html())  # only markup has spaces


def test_a_backslash_that_moves_the_host_for_browsers_is_refused() -> None:
    report = inspect_url("https://good.example\\@evil.example/")
    assert not report.openable and "differently" in report.refusal


def test_plain_https_is_openable_and_quiet() -> None:
    report = inspect_url("https://login.example.com/oauth?state=1")
    assert (report.openable, report.warnings, report.refusal) == (True, [], "")
    assert report.host == "login.example.com"
    assert report.highlighted_html() == "https://<b>login.example.com</b>/oauth?state=1"
