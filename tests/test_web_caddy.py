"""docs/web.md's Caddy recipe run with the real Caddy (Debian's package), over real TLS, with a real
browser (issue 37): the page's Caddyfile, its `caddy run --config Caddyfile` and its `elicitron web
--origin https://phone.example.net`, as the page writes them. A phone (Debian's chromium, with
phone.example.net resolved to Caddy's port) opens the link `pair --web` prints through Caddy over
https, pairs, and answers the demo server's card, whose server-sent event came through Caddy as it
came (no reload); the tool gets the values. (`caddy run --config Caddyfile` needs no --adapter:
Caddy takes the Caddyfile adapter from the file's name.)

The only change from the page: the private Caddyfile is the page's site block (its upstream's port
replaced by the web window's free one) after a global options block that a test machine without DNS
or the internet needs (tests/kit/caddy.py): `local_certs` (Caddy's own CA instead of ACME),
`skip_install_trust`, `admin off`, `storage` in the test's dir, `default_bind 127.0.0.1` and free
`http_port`/`https_port`. The chain is checked with Python's ssl against Caddy's root alone; the
browser accepts the one key Caddy issued (an SPKI pin), not any certificate. Skipped where caddy is
missing (apt-get install caddy); failed in CI."""

import base64
import hashlib
import json
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from kit.caddy import caddy, caddy_or_skip
from kit.main import RunningMain
from kit.recipes import caddy_sites, caddyfile, lines_starting, proxy_recipe
from web_kit import chromium, web_window

from web_process.app import COOKIE
from web_process.listen import DEFAULT_HOST, DEFAULT_PORT

pytestmark = pytest.mark.slow

TIMEOUT_MS = 15_000


def _spki_pin(cert: Path) -> str:
    """Chromium's --ignore-certificate-errors-spki-list form of `cert`'s key: base64 of its SPKI's SHA-256."""
    key = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    return base64.b64encode(hashlib.sha256(key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))
                            .digest()).decode()


@pytest.fixture
def caddy_found() -> str:
    """Before main starts: skipped (or failed in CI) at once where there is no caddy."""
    return caddy_or_skip()


def test_the_pages_caddy_recipe_pairs_a_phone_over_https_and_its_card_comes_through(
        caddy_found: str, demo_main: RunningMain, tmp_path: Path) -> None:
    recipe = proxy_recipe()
    page_caddyfile = caddyfile(recipe)
    (site,) = caddy_sites(page_caddyfile)
    (caddy_run,) = lines_starting(recipe, "caddy run")
    web_words = next(words for words in lines_starting(recipe, "elicitron web") if f"https://{site}" in words)
    origin = f"https://{site}"

    with web_window(demo_main, tmp_path / "web", *web_words[2:]) as web:
        upstream = web.url.removeprefix("http://")
        site_block = page_caddyfile.replace(f"{DEFAULT_HOST}:{DEFAULT_PORT}", upstream)
        assert site_block != page_caddyfile, "the page's reverse_proxy no longer names the default --listen"
        (tmp_path / "caddy").mkdir()
        with caddy(site_block, caddy_run, tmp_path / "caddy") as proxy:
            proxy.wait_log("certificate obtained successfully", identifier=site)
            # The chain, checked against Caddy's root alone: a device that trusts it gets the page.
            assert proxy.wait_serving(site, "/pair") == "HTTP/1.1 200 OK"

            link = web.pair_link("phone on Caddy")
            assert link.startswith(f"{origin}/pair#"), link
            # Chromium trusts only the system's NSS store, which a test must not change: it is told to
            # accept the one certificate key Caddy issued for the site (checked with its root above).
            leaf = proxy.storage / "certificates" / "local" / site / f"{site}.crt"
            with chromium(f"--host-resolver-rules=MAP {site} 127.0.0.1:{proxy.https_port}",
                          f"--ignore-certificate-errors-spki-list={_spki_pin(leaf)}") as browser:
                page = browser.new_context(viewport={"width": 360, "height": 780}).new_page()
                page.goto(link)
                page.get_by_role("button", name="Pair this browser").click()
                page.get_by_text("Connected to main.").wait_for(timeout=TIMEOUT_MS)
                assert page.url == f"{origin}/"
                (cookie,) = [c for c in page.context.cookies() if c["name"] == COOKIE]
                assert cookie["secure"] and cookie["httpOnly"] and cookie["domain"] == site

                page.evaluate("window.notReloaded = true")
                caller = demo_main.peer("caddy-test-host", role="controller")
                channel = caller.call_tool("demo", "book_table", {"restaurant": "Behind Caddy"})
                page.get_by_text("Book a table at Behind Caddy?").wait_for(timeout=TIMEOUT_MS)
                assert page.evaluate("window.notReloaded === true")  # the event came through as it came
                page.get_by_label("Name on the booking (required)").fill("Over TLS")
                page.get_by_role("button", name="Accept").click()
                answer = json.loads(caller.expect_topic(channel, timeout_s=15)["result"]["content"][0]["text"])
                assert answer["action"] == "accept" and answer["content"]["name"] == "Over TLS"
                page.context.close()
