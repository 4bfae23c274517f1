"""An approval's grant chosen on the web card, in Debian's chromium (Playwright) -> `elicitron web`
-> a real main -> mcp's `Client` through `elicitron serve`: the card offers which arguments × how
long × one call only with the proposed pattern editable, says in one line what the grant covers,
shows main's refusal of a pattern that does not cover the call, and the grant then covers exactly
one more call like that one. Skipped (with the reason) where /usr/bin/chromium is missing."""

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from gateway_kit import Host, HostLoop, serve_params, text_of
from web_kit import chromium_missing, demo_web_window, pair

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext

pytestmark = [pytest.mark.slow, pytest.mark.skipif(chromium_missing() is not None,
                                                   reason=chromium_missing() or "")]

TIMEOUT_MS = 10_000


@pytest.fixture
def context(browser: "Browser") -> "Iterator[BrowserContext]":
    context = browser.new_context(viewport={"width": 360, "height": 780})
    yield context
    context.close()


def test_a_single_use_grant_for_arguments_like_these_chosen_on_the_page_covers_one_more_call(
        context: "BrowserContext", hosts: HostLoop) -> None:
    with demo_web_window("eli-webg-", toolApproval="ask") as web:
        main = web.main
        page = context.new_page()
        pair(page, web, "Ada's phone")
        host = Host(hosts, serve_params(main.connection, "--server", "demo"), "Claude Desktop").open()
        try:
            first = host.start(lambda c: c.call_tool("echo", {"text": "/tmp/a"}))
            card = page.locator("#cards article")
            card.get_by_text("demo/echo").wait_for(timeout=TIMEOUT_MS)
            summary = card.locator(".grant-summary")
            assert summary.text_content() == "Allows echo with exactly the approved arguments, for this session"
            assert [b.text_content() for b in card.get_by_role("button").all()] == [
                "Allow once", "Allow as chosen", "Deny"]
            card.get_by_label("Which arguments").select_option("pattern")
            glob = card.get_by_label("text like")
            assert glob.input_value() == "/tmp/*"  # what main proposed
            glob.fill("/etc/*")
            card.get_by_role("button", name="Allow as chosen").click()
            card.get_by_text("Not accepted: the pattern does not cover the call it is given on: text").wait_for(
                timeout=TIMEOUT_MS)  # main refused it; the card stays
            glob.fill("/tmp/*")
            card.get_by_label("How long").select_option("hour")
            card.get_by_label("one call only").check()
            assert summary.text_content() == "Allows echo with text like “/tmp/*”, for an hour, one call only"
            card.get_by_role("button", name="Allow as chosen").click()
            assert text_of(first.result(30)) == "/tmp/a"

            rules = json.loads(main.cli("rules", "--json").stdout)
            assert [(r["tool"], r["arguments"], r["pattern"], r["singleUse"]) for r in rules] == [
                ("echo", "pattern", {"text": "/tmp/*"}, True)]
            assert text_of(host.call("echo", {"text": "/tmp/b"})) == "/tmp/b"  # its one use: no card
            again = host.start(lambda c: c.call_tool("echo", {"text": "/tmp/c"}))
            card.get_by_text("demo/echo").wait_for(timeout=TIMEOUT_MS)  # used up: asked again
            card.get_by_role("button", name="Deny").click()
            assert again.result(30).is_error is True
        finally:
            host.close()
