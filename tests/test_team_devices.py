"""Paired web devices on a shared store (issue 35, item 1): a device paired through main A's web
dir is accepted by main B's (each main mirrors its devices.json and the store's `web_devices`,
main_process/device_mirror.py), and `elicitron devices revoke` on B revokes it on A. Real mains
on the session's PostgreSQL, the real `elicitron devices` command, and the web window's own
pairing and credential check (web_process/devices.py: what its HTTP handlers call); and a real
browser (chromium, Playwright) paired with A's web window, connected on B's, cut off by a revoke."""

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kit.peer import WirePeer
from kit.postgres import PostgresServer
from team_kit import Windows, team_on
from web_kit import DEFAULT_WEB_DIR, chromium_missing, pair, web_window

from web_process.devices import WebDir

if TYPE_CHECKING:
    from playwright.sync_api import Browser

TIMEOUT_MS = 10_000


def until(holds: Callable[[], bool], ticker: WirePeer, what: str, timeout_s: float = 10.0) -> None:
    """Until `holds()`, woken by a message from main or every 100 ms (a mirror round is 1 s)."""
    deadline = time.monotonic() + timeout_s
    while not holds():
        assert time.monotonic() < deadline, what
        ticker.sock.poll(100)


def test_a_device_paired_through_one_main_is_accepted_by_another_and_a_revoke_on_either_revokes_it(
        postgres: PostgresServer) -> None:
    windows = Windows()
    try:
        with team_on(postgres, "laptop-a", "build-server") as (_mains, [a, b]):
            assert a.home is not None and b.home is not None
            on_a, on_b = Path(a.home) / DEFAULT_WEB_DIR, Path(b.home) / DEFAULT_WEB_DIR
            ticker = windows.open(b, "ticker")

            paired_through_a = WebDir(on_a)
            device, credential = paired_through_a.redeem(paired_through_a.new_code("ana's phone"))
            seen_by_b = WebDir(on_b)
            until(lambda: seen_by_b.device_for(credential) == device, ticker, "B never accepted A's device")
            listed = b.cli_plain("devices")
            assert listed.returncode == 0 and "ana's phone" in listed.stdout, listed.stdout + listed.stderr

            revoked = b.cli_plain("devices", "revoke", "ana's phone")
            assert revoked.returncode == 0, revoked.stderr
            until(lambda: paired_through_a.device_for(credential) is None, ticker, "A still accepts it")
            assert seen_by_b.device_for(credential) is None
            # A does not bring it back: a round later, both still refuse it.
            again, _ = paired_through_a.redeem(paired_through_a.new_code("ben's tablet"))
            until(lambda: seen_by_b.device_for_id(again.id) is not None, ticker, "B never got ben's tablet")
            assert paired_through_a.device_for(credential) is None and seen_by_b.device_for(credential) is None
    finally:
        windows.close()


@pytest.mark.slow
@pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
def test_a_browser_paired_with_one_mains_web_window_connects_to_anothers_until_revoked_there(
        postgres: PostgresServer, browser: "Browser") -> None:
    windows = Windows()
    try:
        with team_on(postgres, "laptop-a", "build-server") as (_mains, [a, b]):
            assert a.home is not None and b.home is not None
            ticker = windows.open(b, "ticker")
            with web_window(a, Path(a.home) / DEFAULT_WEB_DIR) as web_a, \
                    web_window(b, Path(b.home) / DEFAULT_WEB_DIR) as web_b:
                context = browser.new_context(viewport={"width": 360, "height": 780})
                try:
                    pair(context.new_page(), web_a, "ana's phone")
                    on_b = WebDir(web_b.web_dir)
                    until(lambda: [d.name for d in on_b.devices()] == ["ana's phone"], ticker,
                          "B's web window never knew the phone")
                    page = context.new_page()  # the same browser: its cookie (per host, not port) goes to B
                    page.goto(web_b.url)
                    page.get_by_text("Connected to main.").wait_for(timeout=TIMEOUT_MS)

                    revoked = a.cli_plain("devices", "revoke", "ana's phone")
                    assert revoked.returncode == 0, revoked.stderr
                    page.get_by_text("This browser is no longer paired").wait_for(timeout=TIMEOUT_MS)
                finally:
                    context.close()
    finally:
        windows.close()
