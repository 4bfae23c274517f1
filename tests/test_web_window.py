"""The web window in a real browser: Debian's chromium (Playwright) -> `elicitron web` -> a real
main -> the demo server. Pairing by link, a form answered, a server's markup shown as text, a
foreign Origin refused, a pairing code that works once, a request replayed to a page that opens
later and dismissed when another window answers first, and the page back after main restarts.
Skipped (with the reason) where /usr/bin/chromium is missing; CI installs it."""

import json
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kit.main import start_main
from kit.peer import kept_attached
from web_kit import WebWindow, chromium_missing, demo_web_window, pair, web_window

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.slow, pytest.mark.skipif(chromium_missing() is not None,
                                                   reason=chromium_missing() or "")]

TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def web() -> Iterator[WebWindow]:
    """One main with the demo server and one web window for the module (each test its own browser
    context, so its own cookies: every test pairs afresh)."""
    with demo_web_window("eli-web-") as window:
        yield window


@pytest.fixture
def page(browser: "Browser") -> "Iterator[Page]":
    context = browser.new_context(viewport={"width": 360, "height": 780})
    yield context.new_page()
    context.close()


def _result_text(reply: dict[str, object]) -> dict[str, object]:
    result = reply["result"]
    assert isinstance(result, dict), reply
    return json.loads(result["content"][0]["text"])


def test_a_paired_browser_answers_a_form_and_the_server_gets_the_values(web: WebWindow, page: "Page") -> None:
    pair(page, web, "my phone")
    host = web.main.peer("web-test-host", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "Le Web"})
    page.get_by_text("Book a table at Le Web?").wait_for(timeout=TIMEOUT_MS)
    assert page.get_by_text("1 request waiting").is_visible()
    page.get_by_label("Name on the booking (required)").fill("Grace")
    page.get_by_label("Guests (required)").fill("4")
    page.get_by_label("Sit outside").check()
    page.get_by_label("Budget per person (EUR)").fill("35.5")
    page.get_by_label("Cuisine").select_option(label="japanese")
    page.get_by_role("button", name="Accept").click()

    reply = host.expect_topic(channel, timeout_s=15)
    assert _result_text(reply) == {"action": "accept", "content": {
        "name": "Grace", "party_size": 4, "outdoor": True, "budget": 35.5, "cuisine": "japanese"}}
    page.get_by_text("Nothing is waiting for you.").wait_for(timeout=TIMEOUT_MS)
    assert "my phone (web)" in [peer["name"] for peer in web.main.status()["peers"]]


@pytest.mark.screenshot
def test_the_page_at_phone_size_in_light_and_desktop_size_in_dark(web: WebWindow, browser: "Browser",
                                                                  screenshot_dir: Path) -> None:
    window = web.main.peer("wire-window")  # answers once the pictures are taken
    host = web.main.peer("web-test-host", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "Chez MCP"})
    for name, viewport, scheme in (("web-phone.png", {"width": 360, "height": 780}, "light"),
                                   ("web-desktop.png", {"width": 1100, "height": 760}, "dark")):
        context = browser.new_context(viewport=viewport, color_scheme=scheme)  # type: ignore[arg-type]
        page = context.new_page()
        pair(page, web, f"{scheme} screen")
        page.get_by_text("Book a table at Chez MCP?").wait_for(timeout=TIMEOUT_MS)
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == ("rgb(246, 246, 244)" if scheme == "light" else "rgb(21, 21, 21)")
        page.screenshot(path=str(screenshot_dir / name))
        context.close()
    window.answer(window.expect_topic("msgElicitationTransferInvoke"), "decline")
    assert _result_text(host.expect_topic(channel, timeout_s=15))["action"] == "decline"


def test_a_server_message_with_markup_shows_as_text(web: WebWindow, page: "Page") -> None:
    pair(page, web)
    host = web.main.peer("web-test-host", role="controller")
    message = '<script>document.title="owned"</script><b>bold?</b>'
    channel = host.call_tool("demo", "ask", {"message": message})
    shown = page.locator("#cards .message")
    shown.wait_for(timeout=TIMEOUT_MS)
    assert shown.text_content() == message  # the markup itself, as text
    assert page.locator("#cards b").count() == 0 and page.locator("#cards script").count() == 0
    page.get_by_role("button", name="Decline", exact=True).click()
    assert _result_text(host.expect_topic(channel, timeout_s=15))["action"] == "decline"


def test_a_url_card_shows_the_real_host_and_refuses_a_link_with_a_bidi_override(web: WebWindow, page: "Page") -> None:
    pair(page, web)
    host = web.main.peer("web-test-host", role="controller")
    channel = host.call_tool("demo", "open_link", {"url": "https://bank.example\u202e/moc.live", "elicitation_id": "b"})
    link = page.locator("#cards .link")
    link.wait_for(timeout=TIMEOUT_MS)
    assert link.locator("strong").text_content() == "bank.example⟦U+202E⟧"  # the override shown, not obeyed
    assert page.get_by_role("button", name="Open link").is_disabled()
    assert page.get_by_text("This link cannot be opened: it contains hidden or blank characters.").is_visible()
    page.get_by_role("button", name="Decline", exact=True).click()
    assert _result_text(host.expect_topic(channel, timeout_s=15))["action"] == "decline"


def test_a_revoked_device_gets_nothing_more(web: WebWindow, page: "Page") -> None:
    pair(page, web, "lost phone")
    devices = web.web_dir / "devices.json"
    kept = [device for device in json.loads(devices.read_text())["devices"] if device["name"] != "lost phone"]
    devices.write_text(json.dumps({"devices": kept}))  # what revoking it does
    window = web.main.peer("wire-window")
    host = web.main.peer("web-test-host", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "Chez Revoked"})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    page.get_by_text("This browser is no longer paired").wait_for(timeout=TIMEOUT_MS)
    assert page.locator("#cards article").count() == 0
    response = page.goto(f"{web.url}/")
    assert response is not None and response.status == 401
    window.answer(invoke, "decline")
    assert _result_text(host.expect_topic(channel, timeout_s=15))["action"] == "decline"


def _status(request: urllib.request.Request | str) -> int:
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _post(url: str, body: dict[str, object], origin: str | None) -> int:
    headers = {"Content-Type": "application/json"}
    if origin is not None:
        headers["Origin"] = origin
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_foreign_origin_and_a_replayed_code_get_403(web: WebWindow) -> None:
    link = web.pair_link()
    code = link.split("#", 1)[1]
    assert _post(f"{web.url}/api/pair", {"code": code}, "https://evil.example") == 403
    assert _post(f"{web.url}/api/pair", {"code": code}, None) == 403
    assert _post(f"{web.url}/api/pair", {"code": code}, web.url) == 200  # the refusals did not use it up
    assert _post(f"{web.url}/api/pair", {"code": code}, web.url) == 403  # used once: never again
    assert _post(f"{web.url}/api/answer?stream=x", {"type": "answer", "channel": "c", "action": "cancel"},
                 "https://evil.example") == 403
    assert _status(urllib.request.Request(f"{web.url}/events", headers={"Origin": "https://evil.example"})) == 403


def test_without_a_device_cookie_the_page_and_its_stream_get_nothing(web: WebWindow) -> None:
    assert _status(f"{web.url}/") == 401
    assert _status(f"{web.url}/app.js") == 401
    assert _status(urllib.request.Request(f"{web.url}/events", headers={"Origin": web.url})) == 401
    assert _status(urllib.request.Request(f"{web.url}/events", headers={
        "Origin": web.url, "Cookie": "elicitron_device=not-a-credential"})) == 401
    assert _status(f"{web.url}/pair") == 200  # the pairing page itself holds nothing
    # A foreign name resolved to our address (DNS rebinding) is refused before anything else.
    assert _status(urllib.request.Request(f"{web.url}/pair", headers={"Host": "evil.example:80"})) == 403


def test_a_request_open_before_the_page_is_replayed_and_the_first_answer_elsewhere_dismisses_it(
        web: WebWindow, page: "Page") -> None:
    window = web.main.peer("wire-window")  # a renderer of the contract alone, beside the browser
    host = web.main.peer("web-test-host", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "Chez Replay"})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    pair(page, web)  # attaches after the request opened: it comes in the welcome's pending
    page.get_by_text("Book a table at Chez Replay?").wait_for(timeout=TIMEOUT_MS)
    window.answer(invoke, "accept", {"name": "Wire", "party_size": 3})
    page.get_by_text("Nothing is waiting for you.").wait_for(timeout=TIMEOUT_MS)
    assert page.locator("#cards article").count() == 0
    assert _result_text(host.expect_topic(channel, timeout_s=15))["content"] == {"name": "Wire", "party_size": 3}


@pytest.mark.parametrize("replayed", [False, True], ids=["while-the-page-is-open", "replayed-at-attach"])
def test_a_request_of_another_window_waits_in_its_list_until_answer_here_makes_it_the_pages_card(
        web: WebWindow, page: "Page", replayed: bool) -> None:
    left = web.main.peer("left window")  # a renderer of the contract alone; its tool call asks
    if replayed:  # open before the page attaches: it comes in the welcome, listed once `peers` came
        channel = left.call_tool("demo", "book_table", {"restaurant": "Chez Ailleurs"})
        left.expect_topic("msgElicitationTransferInvoke")
    with kept_attached(left):
        pair(page, web, "the lister")  # main's `peers` after the welcome names "left window"
    if not replayed:
        channel = left.call_tool("demo", "book_table", {"restaurant": "Chez Ailleurs"})
    with kept_attached(left):
        listed = page.locator("#elsewhere")
        listed.get_by_text("demo: Book a table at Chez Ailleurs? — in window “left window”").wait_for(timeout=TIMEOUT_MS)
        assert listed.get_by_role("heading").inner_text() == "1 waiting in another window"
        assert page.locator("#cards article").count() == 0
        assert page.get_by_text("Nothing is waiting for you.").is_visible()

        listed.get_by_role("button", name="Answer here").click()
        page.get_by_text("Book a table at Chez Ailleurs?").wait_for(timeout=TIMEOUT_MS)
        listed.wait_for(state="hidden", timeout=TIMEOUT_MS)
        page.get_by_label("Name on the booking (required)").fill("Here")
        page.get_by_label("Guests (required)").fill("2")
        page.get_by_role("button", name="Accept").click()
        page.get_by_text("Nothing is waiting for you.").wait_for(timeout=TIMEOUT_MS)
    content = _result_text(left.expect_topic(channel, timeout_s=15))["content"]
    assert isinstance(content, dict) and (content["name"], content["party_size"]) == ("Here", 2)


def test_the_web_window_with_a_page_open_stops_at_once_on_sigterm_and_withdraws_its_address(
        web: WebWindow, page: "Page", tmp_path: Path) -> None:
    with web_window(web.main, tmp_path / "web") as second:
        pair(page, second, "short-lived")
        assert (tmp_path / "web" / "web.json").exists()
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(timeout=5) == 0  # no grace period spent on the open page's stream
        assert not (tmp_path / "web" / "web.json").exists()
        page.get_by_text("The web window is unreachable; trying again…").wait_for(timeout=TIMEOUT_MS)


def test_the_page_attaches_again_after_main_restarts(web: WebWindow, page: "Page") -> None:
    """Last in the file: it restarts the module's main (the fixture stops the new one)."""
    pair(page, web)
    main = web.main
    main.stop()
    page.get_by_text("Not connected to main").wait_for(timeout=TIMEOUT_MS)
    assert main.home is not None
    web.main = start_main(main.home / "mcp.json", main.runtime, home=main.home)  # as the module started it
    web.main.wait_server_ready("demo")
    page.get_by_text("Connected to main.").wait_for(timeout=TIMEOUT_MS)
    host = web.main.peer("web-test-host", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "After the restart"})
    page.get_by_text("Book a table at After the restart?").wait_for(timeout=TIMEOUT_MS)
    page.get_by_role("button", name="Decline", exact=True).click()
    assert _result_text(host.expect_topic(channel, timeout_s=15))["action"] == "decline"
