"""The web window's cards beyond forms, links and approvals, in Debian's chromium (Playwright) ->
`elicitron web` -> a real main: a program's question answered in the browser reaches the asker
(`elicitron ask`), a yes/no question as Yes / No; "Decline all from <server>" and "Ask again"; an answer remembered from the page, listed there
and revoked there, gone in main; time left counting down on the page's clock (Playwright's, moved
by the test: no sleeps); a notification for a card that arrives while the page is hidden, with no
value in it; the manifest and icon served under the CSP; a sign-in card that shows the real host and
opens the sign-in link (the test authorization server, then main's loopback: the server is ready);
an approval denied with a reason typed on the page, which reaches the host (mcp's `Client` through
`elicitron serve`) with the paired device's name.
Skipped (with the reason) where /usr/bin/chromium is missing; CI installs it."""

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from gateway_kit import Host, HostLoop, serve_params, text_of
from kit.env import child_env, short_tmp_dir
from kit.paths import ROOT
from kit.peer import kept_attached
from oauth_kit import oauth_config, oauth_servers, server_status, start_oauth_main
from web_kit import WebWindow, chromium_missing, demo_web_window, pair, web_window

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

pytestmark = [pytest.mark.slow, pytest.mark.skipif(chromium_missing() is not None,
                                                   reason=chromium_missing() or "")]

TIMEOUT_MS = 10_000
ASK_TIMEOUT_S = 30
# What the page has on show, as of the last look: wait_for_function does not await an async
# predicate (its promise counts as true at once), so each poll starts a look and reads the last one.
NOTIFIED = ("navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((list) => {"
            " window.testShown = list.map((n) => ({title: n.title, body: n.body, tag: n.tag})); });"
            " const list = window.testShown")


@pytest.fixture(scope="module")
def web() -> Iterator[WebWindow]:
    with demo_web_window("eli-webc-") as window:
        yield window


@pytest.fixture
def context(browser: "Browser") -> "Iterator[BrowserContext]":
    context = browser.new_context(viewport={"width": 360, "height": 780})
    yield context
    context.close()


@pytest.fixture
def page(context: "BrowserContext") -> "Page":
    return context.new_page()


def _ask(web: WebWindow, tmp_path: Path, *args: str) -> "subprocess.Popen[str]":
    """`elicitron ask ARGS` run by a script named deploy.sh: the asking program."""
    script = tmp_path / "deploy.sh"
    script.write_text('#!/bin/sh\n"$PYTHON" -m cli_process "$@"\nexit $?\n')
    script.chmod(0o755)
    argv = [str(script), "ask", *args, "--connection", str(web.main.connection)]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=child_env(web.main.home, PYTHON=sys.executable), cwd=ROOT)


def _finished(proc: "subprocess.Popen[str]") -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=ASK_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def _result(reply: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(reply["result"]["content"][0]["text"])
    return result


def test_a_question_answered_in_the_browser_reaches_the_asker(web: WebWindow, page: "Page", tmp_path: Path) -> None:
    pair(page, web)
    schema = json.dumps({"type": "object", "properties": {"tag": {"type": "string", "title": "Release tag"}},
                         "required": ["tag"]})
    proc = _ask(web, tmp_path, "Which release goes to prod?", "--schema", schema, "--timeout", "60")
    card = page.locator("#cards article")
    card.get_by_text("Which release goes to prod?").wait_for(timeout=TIMEOUT_MS)
    heading = card.get_by_role("heading").text_content()
    assert heading == f"deploy.sh (pid {proc.pid} on {socket.gethostname()}) asks for input"
    assert card.get_by_label("Remember my answer to the program deploy.sh:").is_visible()
    card.get_by_label("Release tag (required)").fill("v1.4")
    card.get_by_role("button", name="Accept").click()
    code, out, err = _finished(proc)
    assert (code, json.loads(out)) == (0, {"tag": "v1.4"}), err
    page.get_by_text("Nothing is waiting for you.").wait_for(timeout=TIMEOUT_MS)


@pytest.mark.screenshot
def test_a_yes_no_question_is_yes_or_no(web: WebWindow, page: "Page", tmp_path: Path, screenshot_dir: Path) -> None:
    pair(page, web)
    for button, expected in (("Yes", (0, "true\n")), ("No", (1, "false\n"))):
        proc = _ask(web, tmp_path, "--yes-no", f"Deploy 1.4 to prod ({button})?")
        card = page.locator("#cards article")
        card.get_by_text(f"Deploy 1.4 to prod ({button})?").wait_for(timeout=TIMEOUT_MS)
        if button == "Yes":
            page.screenshot(path=str(screenshot_dir / "web-question.png"))
        assert card.get_by_role("checkbox").count() == 0 or not card.get_by_role("checkbox").is_visible()
        assert card.get_by_role("button", name="Accept").count() == 0
        card.get_by_role("button", name=button, exact=True).click()
        code, out, err = _finished(proc)
        assert (code, out) == expected, err
        page.get_by_text("Nothing is waiting for you.").wait_for(timeout=TIMEOUT_MS)


def _user_rules(web: WebWindow) -> list[dict[str, Any]]:
    done = web.main.cli("rules", "--json")
    assert done.returncode == 0, done.stderr
    return [rule for rule in json.loads(done.stdout) if rule["source"] == "user"]


def test_a_remembered_answer_listed_and_revoked_from_the_page_is_gone_in_main(web: WebWindow, page: "Page") -> None:
    pair(page, web, "rules phone")
    host = web.main.peer("web-test-host", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "Chez Memo"})
    card = page.locator("#cards article")
    card.get_by_text("Book a table at Chez Memo?").wait_for(timeout=TIMEOUT_MS)
    card.get_by_label("Name on the booking (required)").fill("Ada")
    card.get_by_label("Guests (required)").fill("2")
    card.get_by_label("Remember my answer to the server demo:").select_option(label="Remember always")
    card.get_by_role("button", name="Accept").click()
    booked = {"name": "Ada", "party_size": 2, "outdoor": False, "cuisine": "french"}  # with the form's defaults
    assert _result(host.expect_topic(channel, timeout_s=15))["content"] == booked

    row = page.locator("#rules li")
    row.wait_for(timeout=TIMEOUT_MS)
    assert row.locator("span").text_content() == \
        "demo: “Book a table at Chez Memo?” → accept (name, party_size, outdoor, budget, cuisine) · always"
    assert "made by rules phone (web)" in (row.locator("small").text_content() or "")
    assert "Ada" not in (page.locator("#remembered").text_content() or "")  # remembered values stay in main
    [rule] = _user_rules(web)

    again = host.call_tool("demo", "book_table", {"restaurant": "Chez Memo"})  # the rule answers it, unasked
    assert _result(host.expect_topic(again, timeout_s=15))["content"] == booked

    row.get_by_role("button", name=re.compile("^Revoke demo:")).click()
    page.get_by_text(f"Revoked {rule['id']}.").wait_for(timeout=TIMEOUT_MS)
    page.get_by_text("Nothing remembered: every request is asked.").wait_for(timeout=TIMEOUT_MS)
    assert _user_rules(web) == []
    asked = host.call_tool("demo", "book_table", {"restaurant": "Chez Memo"})  # asked again
    card.get_by_text("Book a table at Chez Memo?").wait_for(timeout=TIMEOUT_MS)
    card.get_by_role("button", name="Decline", exact=True).click()
    assert _result(host.expect_topic(asked, timeout_s=15))["action"] == "decline"


def test_decline_all_from_a_server_declines_its_next_request_unasked_until_asked_again(
        web: WebWindow, page: "Page") -> None:
    pair(page, web)
    host = web.main.peer("web-test-host", role="controller")
    first = host.call_tool("demo", "book_table", {"restaurant": "Chez Spam"})
    page.get_by_text("Book a table at Chez Spam?").wait_for(timeout=TIMEOUT_MS)
    page.get_by_role("button", name="Decline all from demo for this session").click()
    assert _result(host.expect_topic(first, timeout_s=15))["action"] == "decline"
    page.get_by_text("Declining all requests from demo for this session.").wait_for(timeout=TIMEOUT_MS)
    unasked = host.call_tool("demo", "book_table", {"restaurant": "Chez Spam again"})
    assert _result(host.expect_topic(unasked, timeout_s=15))["action"] == "decline"  # main declined it
    assert page.locator("#cards article").count() == 0

    page.get_by_role("button", name="Ask again: show demo's requests").click()
    page.get_by_text("Declining all requests from demo").wait_for(state="detached", timeout=TIMEOUT_MS)
    # "Ask again" reaches main as msgServerPolicy over the web window's own socket, with no answer:
    # a call from this other peer can reach main first and still be declined unasked. What is
    # waited on is main holding the request open (status), asked again while main declined it.
    for _ in range(10):
        asked = host.call_tool("demo", "book_table", {"restaurant": "Chez Welcome"})
        try:
            web.main.wait_status(lambda status: any(p["message"] == "Book a table at Chez Welcome?"
                                                    for p in status["pending"]), "the request open", 5)
            break
        except AssertionError:
            assert _result(host.expect_topic(asked, timeout_s=15))["action"] == "decline"  # main had not yet
    card = page.locator("#cards article")
    card.get_by_text("Book a table at Chez Welcome?").wait_for(timeout=TIMEOUT_MS)
    card.get_by_role("button", name="Decline", exact=True).click()
    assert _result(host.expect_topic(asked, timeout_s=15))["action"] == "decline"


def test_time_left_counts_down_on_the_pages_clock(web: WebWindow, page: "Page", tmp_path: Path) -> None:
    page.clock.install()  # the page's Date and timers are the test's: moved below, never waited for
    pair(page, web)
    proc = _ask(web, tmp_path, "Still there?", "--timeout", "600")
    expires = page.locator("#cards .time-left")
    expires.wait_for(timeout=TIMEOUT_MS)
    assert re.fullmatch(r"Expires in (10:00|9:5\d)", expires.text_content() or ""), expires.text_content()
    page.clock.run_for(65_000)
    assert re.fullmatch(r"Expires in 8:(5\d|4\d)", expires.text_content() or ""), expires.text_content()
    page.clock.run_for(490_000)  # under a minute left: a warning
    assert re.fullmatch(r"⚠ Expires in 0:[0-5]\d", expires.text_content() or ""), expires.text_content()
    assert "soon" in (expires.get_attribute("class") or "")
    page.get_by_role("button", name="Cancel").click()
    assert _finished(proc)[0] == 4


def test_a_card_arriving_while_the_page_is_hidden_is_notified_without_its_values(
        web: WebWindow, context: "BrowserContext", page: "Page") -> None:
    context.grant_permissions(["notifications"], origin=web.url)
    # Headless chromium keeps every page visible (a minimized window too): the page's visibility
    # is the test's to say; the permission, the service worker and its notifications are real.
    context.add_init_script("Object.defineProperty(Document.prototype, 'visibilityState', "
                            "{configurable: true, get() { return window.testHidden ? 'hidden' : 'visible'; }});")
    pair(page, web)
    page.get_by_text("Notifications are on while this page is open.").wait_for(timeout=TIMEOUT_MS)
    page.evaluate("async () => { await navigator.serviceWorker.ready; }")
    host = web.main.peer("web-test-host", role="controller")
    seen = host.call_tool("demo", "ask", {"message": "Seen while visible"})
    page.get_by_text("Seen while visible").wait_for(timeout=TIMEOUT_MS)
    page.evaluate("() => { window.testHidden = true; }")  # as when the phone shows another app
    hidden = host.call_tool("demo", "ask", {"message": "The secret is hunter2"})
    card = page.locator("#cards article").filter(has_text="The secret is hunter2")
    card.wait_for(timeout=TIMEOUT_MS)
    shown = page.wait_for_function(f"() => {{ {NOTIFIED}; return list && list.length ? list : null; }}",
                                   timeout=TIMEOUT_MS).json_value()
    channel = (card.get_attribute("aria-labelledby") or "").removesuffix("-h")
    assert shown == [{"title": "Elicitron: a request is waiting", "body": "demo asks for input", "tag": channel}]
    page.evaluate("() => { window.testHidden = false; }")
    card.get_by_role("button", name="Decline", exact=True).click()
    assert _result(host.expect_topic(hidden, timeout_s=15))["action"] == "decline"
    page.wait_for_function(f"() => {{ {NOTIFIED}; return list !== undefined && list.length === 0; }}",
                           timeout=TIMEOUT_MS)  # the answered card's notification is gone
    page.locator("#cards article").get_by_role("button", name="Decline", exact=True).click()
    assert _result(host.expect_topic(seen, timeout_s=15))["action"] == "decline"


def test_the_manifest_and_icon_are_served_under_the_csp_and_the_page_is_installable(
        web: WebWindow, page: "Page") -> None:
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text) if "Content Security Policy" in message.text
            else None)
    pair(page, web)
    cdp = page.context.new_cdp_session(page)
    manifest = cdp.send("Page.getAppManifest")
    assert manifest["url"] == f"{web.url}/manifest.webmanifest" and manifest["errors"] == []
    parsed = json.loads(manifest["data"])
    assert (parsed["name"], parsed["start_url"], parsed["display"]) == ("Elicitron", "/", "standalone")
    for path, kind in (("/manifest.webmanifest", "application/manifest+json"), ("/icon.svg", "image/svg+xml")):
        response = page.request.get(f"{web.url}{path}")
        assert response.status == 200 and response.headers["content-type"] == kind
        assert response.headers["content-security-policy"].startswith("default-src 'self'")
    assert page.request.get(f"{web.url}/icon.svg").text().lstrip().startswith("<svg")
    errors = [error["errorId"] for error in cdp.send("Page.getInstallabilityErrors")["installabilityErrors"]]
    assert errors == ["in-incognito"], errors  # only that Playwright's contexts are incognito profiles
    assert violations == []


@pytest.mark.screenshot
def test_a_sign_in_card_shows_the_real_host_and_opens_the_sign_in_link(
        browser: "Browser", tmp_path: Path, screenshot_dir: Path) -> None:
    with oauth_servers("--token-elsewhere") as servers:  # its token endpoint on another origin
        assert servers.elsewhere is not None
        main = start_oauth_main(oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data",
                                short_tmp_dir("eli-webs-"))
        try:
            watcher = main.running.peer("sign-in watcher")
            server_status(watcher, "remote", "needs-sign-in")
            with web_window(main.running, tmp_path / "web") as web:
                context = browser.new_context(viewport={"width": 360, "height": 780})
                try:
                    with kept_attached(watcher):  # silent while the browser works: main drops a peer silent 5 s
                        page = context.new_page()
                        pair(page, web, "sign-in phone")
                        card = page.locator('#cards article[data-kind="sign-in"]')
                        card.wait_for(timeout=TIMEOUT_MS)
                        assert card.get_by_role("heading").text_content() == "remote needs you to sign in"
                        assert card.locator(".sign-in-host").text_content() == "You will sign in at 127.0.0.1"
                        assert card.locator(".link strong").text_content() == "127.0.0.1"
                        assert card.get_by_text("It asks for: mcp:read").is_visible()
                        assert card.get_by_label(re.compile("^Remember")).count() == 0  # no rule answers a sign-in
                        assert card.locator(".hosts li").filter(has_text="Tokens (gets the sign-in code)").text_content() \
                            == f"Tokens (gets the sign-in code): {servers.elsewhere} (another host than the authorization server)"
                        sign_in = card.get_by_role("button", name="Sign in with browser")
                        assert sign_in.is_disabled()  # until that origin is allowed
                        card.get_by_label(f"Allow {servers.elsewhere} to receive the sign-in code, the PKCE verifier "
                                          "and any client secret").check()
                        page.screenshot(path=str(screenshot_dir / "web-sign-in.png"), full_page=True)
                        with context.expect_page() as opened:
                            sign_in.click()
                        signing_in = opened.value
                        signing_in.wait_for_load_state(timeout=TIMEOUT_MS)
                    server_status(watcher, "remote", "ready")  # the browser got to main's loopback
                    assert signing_in.url.startswith("http://127.0.0.1:") and "/callback" in signing_in.url
                    assert servers.stats()["elsewhereCodes"] == 1  # the code went where the page allowed
                    page.get_by_text("Signed in to remote.").wait_for(timeout=TIMEOUT_MS)
                finally:
                    context.close()
        finally:
            main.running.stop()


def test_a_deny_with_a_reason_typed_on_the_page_reaches_the_agent_naming_the_device(
        context: "BrowserContext", hosts: HostLoop) -> None:
    with demo_web_window("eli-webd-", toolApproval="ask") as web:
        page = context.new_page()
        pair(page, web, "Ada's phone")
        host = Host(hosts, serve_params(web.main.connection, "--server", "demo"), "Claude Desktop").open()
        try:
            call = host.start(lambda c: c.call_tool("echo", {"text": "to prod"}))
            card = page.locator("#cards article")
            card.get_by_text("demo/echo").wait_for(timeout=TIMEOUT_MS)
            reason = card.get_by_label("Reason (sent to the agent)")
            assert reason.get_attribute("maxlength") == "500"
            reason.fill("use staging first")
            card.get_by_role("button", name="Deny").click()
            result = call.result(30)
        finally:
            host.close()
        assert result.is_error is True
        assert text_of(result).startswith('The user denied this call in Elicitron (on the device "Ada\'s phone"): '
                                          'demo/echo was not called. The user\'s reason: "use staging first".')
        assert result.meta is not None
        denial = result.meta["elicitron/denial"]
        assert (denial["deniedBy"], denial["device"], denial["reason"]) == ("person", "Ada's phone", "use staging first")
