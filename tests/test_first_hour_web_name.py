"""Issue 37, item 6, the web window: a browser paired without --name is called after the person
and the browser (`ana's Chrome on Android`), not "browser"; the page says so as it pairs, and
`elicitron devices`, `rules`' MADE BY and the audit's BY column show it. Debian's chromium
(Playwright) -> `elicitron web` -> a real main with the demo server."""

import getpass
import json
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from kit.env import child_env
from kit.paths import PYTHON, ROOT
from kit.peer import kept_attached
from web_kit import WebWindow, chromium_missing, demo_web_window

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.slow, pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")]

TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def web() -> Iterator[WebWindow]:
    with demo_web_window("eli-1h-name-") as window:
        yield window


def _unnamed_pair_link(web: WebWindow) -> str:
    """`elicitron pair --web` as a newcomer types it: no --name."""
    done = subprocess.run([PYTHON, "-m", "cli_process", "pair", "--web", "--web-dir", str(web.web_dir)],
                          capture_output=True, text=True, env=child_env(web.main.home), cwd=ROOT, timeout=30,
                          check=True)
    return done.stdout.strip()


def test_a_browser_paired_without_a_name_is_the_persons_browser_in_devices_rules_and_audit(
        web: WebWindow, browser: "Browser") -> None:
    expected = f"{getpass.getuser()}'s Chrome on Linux"  # headless chromium on this Linux machine
    context = browser.new_context(viewport={"width": 360, "height": 780})
    try:
        page = context.new_page()
        page.goto(_unnamed_pair_link(web))
        page.get_by_role("button", name="Pair this browser").click()
        page.wait_for_url(f"{web.url}/", timeout=TIMEOUT_MS)
        page.get_by_text("Connected to main.").wait_for(timeout=TIMEOUT_MS)

        devices = web.main.cli_plain("devices", "--web-dir", str(web.web_dir))
        assert devices.returncode == 0, devices.stderr
        assert expected in devices.stdout and "browser " not in devices.stdout

        host = web.main.peer("web-name-host", role="controller")
        channel = host.call_tool("demo", "book_table", {"restaurant": "Chez Nom"})
        with kept_attached(host):
            card = page.locator("#cards article")
            card.get_by_text("Book a table at Chez Nom?").wait_for(timeout=TIMEOUT_MS)
            card.get_by_label("Name on the booking (required)").fill("Ada")
            card.get_by_label("Guests (required)").fill("2")
            card.get_by_label("Remember my answer to the server demo:").select_option(label="Remember always")
            card.get_by_role("button", name="Accept").click()
            page.get_by_text("Nothing is waiting for you.").wait_for(timeout=TIMEOUT_MS)
        assert host.expect_topic(channel, timeout_s=15)["result"]["isError"] is False
    finally:
        context.close()

    rules = web.main.cli("rules")
    assert rules.returncode == 0, rules.stderr
    [rule_line] = [line for line in rules.stdout.splitlines() if "Chez Nom" in line]
    assert f"{expected} (web)" in rule_line
    audit = web.main.cli_plain("audit", "--json")
    assert audit.returncode == 0, audit.stderr
    [row] = [row for row in json.loads(audit.stdout) if row["message"] == "Book a table at Chez Nom?"]
    assert (row["outcome"], row["device"]) == ("accept", expected)
    # The table's BY column (40 wide, main_process/audit.py) shows the whole name
    table = web.main.cli_plain("audit").stdout
    [line] = [line for line in table.splitlines() if "Chez Nom" in line]
    assert f"device {expected}" in line
