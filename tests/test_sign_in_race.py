"""The browser's redirect reaching main before the sign-in card's answer, across real processes:
main, the test authorization server (tests/oauth_server.py, whose /authorize redirects at once, as
one does for a person already signed in), a v1 wire peer as the window, and the test browser
(tests/oauth_browser.py) started before the window answers.

Whatever comes first, the card's answer decides: an accept signs in with the hosts it allowed, a
decline or an expiry signs in nothing, and the browser, held meanwhile, gets a page that says which.
"""

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.env import child_env
from kit.peer import WirePeer
from oauth_kit import (
    Browser,
    OAuthMain,
    expect_sign_in_card,
    oauth_config,
    oauth_servers,
    start_with_window,
    started_mains,
)

pytestmark = pytest.mark.slow

# main's log line when a redirect comes before the card's accept (the one thing a test can wait on
# between "the browser reached main" and "main answered it"); without the hold the browser's own
# exit marks that moment.
HELD = "a sign-in redirect came before its card was accepted"
CARD_EXPIRY_S = 5  # long enough for the test browser to start and reach main first


@pytest.fixture
def mains() -> Iterator[list[OAuthMain]]:
    with started_mains() as started:
        yield started


def _browser_reached_main(browser: Browser, url: str, main: OAuthMain,
                          window: WirePeer) -> "subprocess.Popen[bytes]":
    """Open `url` in the test browser (it follows the redirect to main's listener) and wait until
    main has that redirect: main says it holds it, or the browser already has main's answer."""
    command = [part.replace("%s", url) for part in browser.command.split()]
    proc = subprocess.Popen(command, env={**child_env(), **browser.env()})
    window.keep_alive_until(lambda: proc.poll() is not None or HELD in main.running.stderr.text())
    return proc


def _redirect_page(browser: Browser, proc: "subprocess.Popen[bytes]") -> dict[str, Any]:
    """What the browser showed for main's redirect address, once main answered it."""
    proc.wait(timeout=30)
    steps = {step["step"]: step for step in browser.steps()}
    assert "redirect" in steps, browser.steps()
    return steps["redirect"]


def _settled(window: WirePeer, name: str) -> dict[str, Any]:
    """The server's entry once the sign-in is over: ready, or needing sign-in with why."""
    def over(topic: str, body: Any) -> bool:
        servers = body.get("servers") if topic in ("servers", "welcome") else None
        return any(s["name"] == name and (s["status"] == "ready" or s["status"] == "needs-sign-in" and s.get("error"))
                   for s in servers or [])

    _, body = window.expect(over, 30)
    return next(s for s in body["servers"] if s["name"] == name)


def test_a_redirect_before_the_accept_waits_for_it_and_the_token_endpoint_it_allowed_gets_the_code(
        mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    with oauth_servers("--token-elsewhere") as servers:
        assert servers.elsewhere is not None
        main, window = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
        invoke = expect_sign_in_card(window)
        proc = _browser_reached_main(browser, invoke["request"]["params"]["url"], main, window)

        window.answer(invoke, "accept", {"allowHosts": [servers.elsewhere]})
        entry = _settled(window, "remote")
        assert entry["status"] == "ready", entry
        page = _redirect_page(browser, proc)
        assert page["status"] == 200 and "Signed in" in page["body"], page
        stats = servers.stats()
        assert stats["elsewhereCodes"] == 1 and stats["codeExchanges"] == 1
        assert not [b for t, b in window.received if t == "error"]  # the accept was taken


def test_a_redirect_before_a_decline_signs_in_nothing_and_the_browser_says_it_was_declined(
        mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    with oauth_servers() as servers:
        main, window = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
        invoke = expect_sign_in_card(window)
        proc = _browser_reached_main(browser, invoke["request"]["params"]["url"], main, window)

        window.answer(invoke, "decline")
        entry = _settled(window, "remote")
        assert entry["status"] == "needs-sign-in" and "declined" in entry["error"], entry
        page = _redirect_page(browser, proc)
        assert page["status"] == 403 and "did not finish this sign-in" in page["body"] \
            and "declined" in page["body"], page
        assert servers.stats()["codeExchanges"] == 0


def test_a_redirect_held_for_a_card_nobody_answers_gets_an_error_page_when_the_card_expires(
        mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    with oauth_servers() as servers:
        config = oauth_config(tmp_path, "remote", servers.mcp, elicitationTimeoutSeconds=CARD_EXPIRY_S)
        main, window = start_with_window(mains, config, tmp_path / "data")
        invoke = expect_sign_in_card(window)
        proc = _browser_reached_main(browser, invoke["request"]["params"]["url"], main, window)
        assert proc.poll() is None, "main answered the browser before the card was answered"

        window.expect(lambda t, b: t == "msgElicitationTransferDismiss"
                      and b["responseChannel"] == invoke["responseChannel"], CARD_EXPIRY_S + 30)
        page = _redirect_page(browser, proc)
        assert page["status"] == 403 and "expired" in page["body"], page
        # (main's status then depends on its connection's retry, which asks with a new card)
        assert servers.stats()["codeExchanges"] == 0
