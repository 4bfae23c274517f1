"""Issue 37, item 8, the web page: at 360 px no label is broken inside a word (a checkbox's
"Boolean" once read "Boolea / n": the card let any word break anywhere); a required field is
marked, not flagged, until Accept is pressed."""

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kit.env import child_env
from kit.paths import ROOT
from web_kit import WebWindow, chromium_missing, demo_web_window, pair

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.slow, pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")]

TIMEOUT_MS = 10_000
# Every word of every label and legend in the cards, and whether the browser laid it out on one line.
BROKEN_WORDS = """() => {
  const broken = [];
  for (const label of document.querySelectorAll('#cards label, #cards legend')) {
    const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (tops.size > 1) broken.push(match[0]);
      }
    }
  }
  return broken;
}"""
SCHEMA = {"type": "object", "required": ["name"], "properties": {
    "check": {"type": "boolean", "title": "Boolean", "description": "A boolean field: tick it to say yes to everything the server asks here, whatever it is"},
    "name": {"type": "string", "title": "String"},
    "integer": {"type": "integer", "title": "Integer"},
    "untitledMultipleSelectEnum": {"type": "array", "title": "Untitled multiple-select enumeration",
                                   "items": {"type": "string", "enum": ["Guitar", "Drums", "Bass"]}},
    "titledSingleSelectEnum": {"type": "string", "title": "Titled single-select enumeration",
                               "oneOf": [{"const": "hero-1", "title": "Superman"},
                                         {"const": "hero-2", "title": "Green Lantern"}]},
}}


@pytest.fixture(scope="module")
def web() -> Iterator[WebWindow]:
    with demo_web_window("eli-1h-web-") as window:
        yield window


def test_at_360_px_no_label_is_broken_inside_a_word(web: WebWindow, browser: "Browser", tmp_path: Path) -> None:
    import subprocess

    context = browser.new_context(viewport={"width": 360, "height": 780})
    asking = subprocess.Popen([sys.executable, "-m", "cli_process", "ask", "Fill in every kind of field",
                               "--schema", json.dumps(SCHEMA), "--timeout", "60", "--connection",
                               str(web.main.connection)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=child_env(web.main.home), cwd=ROOT)
    try:
        page: Page = context.new_page()
        pair(page, web)
        page.get_by_text("Fill in every kind of field").wait_for(timeout=TIMEOUT_MS)
        assert page.evaluate(BROKEN_WORDS) == []
    finally:
        context.close()
        asking.terminate()
        asking.communicate(timeout=30)


def test_a_required_field_is_marked_not_flagged_until_accept_is_pressed(web: WebWindow, browser: "Browser") -> None:
    """Issue 37, item 8: no "is required" before the person typed or pressed Accept; Accept on an
    empty required field says so under it and in the card, focuses it, and sends nothing."""
    import subprocess

    context = browser.new_context(viewport={"width": 360, "height": 780})
    asking = subprocess.Popen([sys.executable, "-m", "cli_process", "ask", "Who are you?", "--schema",
                               json.dumps(SCHEMA), "--timeout", "60", "--connection", str(web.main.connection)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=child_env(web.main.home), cwd=ROOT)
    try:
        page: Page = context.new_page()
        pair(page, web)
        card = page.locator("#cards article")
        card.get_by_text("Who are you?").wait_for(timeout=TIMEOUT_MS)
        name = card.get_by_label("String (required)")  # marked
        assert card.get_by_text("is required").count() == 0  # not flagged
        assert card.locator(".problem").text_content() == ""
        card.get_by_label("Integer").focus()
        card.get_by_role("button", name="Accept").click()
        card.get_by_text("is required", exact=True).wait_for(timeout=TIMEOUT_MS)
        assert card.locator(".problem").text_content() == "To accept: String: is required"
        assert name.evaluate("(input) => input === document.activeElement")
        assert name.get_attribute("aria-invalid") == "true"
        assert asking.poll() is None  # nothing was sent
        name.fill("Ada")  # the message follows what is typed
        card.get_by_text("is required", exact=True).wait_for(state="hidden", timeout=TIMEOUT_MS)
        assert card.locator(".problem").text_content() == ""
        card.get_by_role("button", name="Accept").click()
        out, err = asking.communicate(timeout=30)
        assert (asking.returncode, json.loads(out)["name"]) == (0, "Ada"), err
    finally:
        context.close()
        if asking.poll() is None:
            asking.terminate()
            asking.communicate(timeout=30)
