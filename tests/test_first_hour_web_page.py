"""Issue 37, item 8, the web page: at 360 px no label is broken inside a word (a checkbox's
"Boolean" once read "Boolea / n": the card let any word break anywhere)."""

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
