"""Paired web devices across real processes: a real main with the demo server, a real web window
(`elicitron web`, and `elicitron main --web`'s child), real `elicitron` commands and Debian's
chromium (Playwright). `devices` lists a paired browser and `devices revoke` cuts its open page
off; the audit names the device that answered; `pair --web` on a terminal prints the link's QR
code; `main --web` runs the web window and a browser paired through it answers."""

import json
import os
import pty
import shutil
import socket
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import segno
from kit.demo import demo_stdio_entry
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import PYTHON, ROOT
from web_kit import DEFAULT_WEB_DIR, WebWindow, chromium_missing, demo_web_window, pair

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.slow, pytest.mark.skipif(chromium_missing() is not None,
                                                   reason=chromium_missing() or "")]

TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def web() -> Iterator[WebWindow]:
    # the default web dir: `devices` and `status` find it as a user's would
    with demo_web_window("eli-webdev-", DEFAULT_WEB_DIR) as window:
        yield window


@pytest.fixture
def page(browser: "Browser") -> "Iterator[Page]":
    context = browser.new_context(viewport={"width": 360, "height": 780})
    yield context.new_page()
    context.close()


def _cli(main: RunningMain, *args: str) -> "subprocess.CompletedProcess[str]":
    done = main.cli_plain(*args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def _devices(main: RunningMain) -> list[dict[str, Any]]:
    listed = json.loads(_cli(main, "devices", "--json").stdout)
    assert isinstance(listed, list)
    return listed


def _decision(reply: dict[str, Any]) -> str:
    return str(json.loads(reply["result"]["content"][0]["text"])["action"])


def test_devices_lists_a_paired_browser_and_revoke_cuts_its_open_page_off(web: WebWindow, page: "Page") -> None:
    pair(page, web, "kitchen tablet", TIMEOUT_MS)
    web.main.wait_peer("kitchen tablet (web)")
    listed = _cli(web.main, "devices").stdout
    line = next(line for line in listed.splitlines() if "kitchen tablet" in line)
    assert " paired 20" in line and "last seen 20" in line  # an open page: seen, not "never"
    (entry,) = [device for device in _devices(web.main) if device["name"] == "kitchen tablet"]
    assert entry["lastSeen"] >= entry["pairedAt"] > 0 and entry["id"] in line
    assert "tokenSha256" not in entry  # the listing never carries the credential's hash
    status = web.main.cli("status").stdout
    assert "web devices (" in status and "kitchen tablet" in status.split("web devices (", 1)[1]
    peer = next(peer for peer in web.main.status()["peers"] if peer["name"] == "kitchen tablet (web)")
    assert peer["device"] == {"id": entry["id"], "name": "kitchen tablet"}  # the hello's extension, from main

    revoked = _cli(web.main, "devices", "revoke", "kitchen tablet").stdout
    assert revoked.startswith(f"revoked kitchen tablet ({entry['id']})")
    # The open page is cut off at once: its stream ends, the browser is refused, main loses the window.
    page.get_by_text("This browser is no longer paired").wait_for(timeout=TIMEOUT_MS)
    web.main.wait_peer("kitchen tablet (web)", attached=False)
    window = web.main.peer("wire-window")
    host = web.main.peer("web-test-host", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "After revoking"})
    window.answer(window.expect_topic("msgElicitationTransferInvoke"), "decline")
    assert _decision(host.expect_topic(channel, timeout_s=15)) == "decline"
    assert page.locator("#cards article").count() == 0
    assert "kitchen tablet" not in [device["name"] for device in _devices(web.main)]
    again = web.main.cli_plain("devices", "revoke", "kitchen tablet")
    assert again.returncode == 1 and "no paired web device is called 'kitchen tablet'" in again.stderr


def test_the_audit_names_the_device_that_answered_in_the_browser(web: WebWindow, page: "Page") -> None:
    pair(page, web, "audit phone", TIMEOUT_MS)
    host = web.main.peer("web-test-host", role="controller")
    channel = host.call_tool("demo", "book_table", {"restaurant": "Chez Audit"})
    page.get_by_text("Book a table at Chez Audit?").wait_for(timeout=TIMEOUT_MS)
    page.get_by_role("button", name="Decline", exact=True).click()
    assert _decision(host.expect_topic(channel, timeout_s=15)) == "decline"

    (device,) = [device for device in _devices(web.main) if device["name"] == "audit phone"]
    rows = json.loads(_cli(web.main, "audit", "--json", "--limit", "20").stdout)
    (row,) = [row for row in rows if "Chez Audit" in row["message"]]
    assert (row["outcome"], row["device"], row["deviceId"]) == ("decline", "audit phone", device["id"])
    assert row["windowName"] == "audit phone (web)"
    table = _cli(web.main, "audit", "--limit", "20").stdout
    (line,) = [line for line in table.splitlines() if "Chez Audit" in line]
    assert "device audit phone" in line


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """What `argv` prints with its stdout on a pseudo-terminal, as in a user's shell."""
    leader, follower = pty.openpty()
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE, env=env,
                          cwd=ROOT) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        assert proc.wait(timeout=30) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")  # the terminal's own line endings


def test_pair_web_prints_the_link_and_its_qr_code_on_a_terminal(web: WebWindow, page: "Page") -> None:
    printed = _on_a_terminal([PYTHON, "-m", "cli_process", "pair", "--web", "--name", "scanned phone"],
                             child_env(web.main.home))
    link, *block = printed.splitlines(keepends=True)
    link = link.strip()
    assert link.startswith(f"{web.url}/pair#")
    assert "".join(block) == _segno_terminal(segno.make(link))  # segno's own rendering of the printed link
    assert "".join(block) != _segno_terminal(segno.make(link[:-1]))  # the block is this link's, not any
    page.goto(link)  # and the printed link pairs
    page.get_by_role("button", name="Pair this browser").click()
    page.get_by_text("Connected to main.").wait_for(timeout=TIMEOUT_MS)
    assert "scanned phone" in [device["name"] for device in _devices(web.main)]
    piped = _cli(web.main, "pair", "--web").stdout  # piped: the link alone, for scripts
    assert len(piped.splitlines()) == 1 and piped.startswith(f"{web.url}/pair#")


def _segno_terminal(code: "segno.QRCode") -> str:
    import io

    out = io.StringIO()
    code.terminal(out=out, compact=True)
    return out.getvalue()


def test_main_web_runs_the_web_window_and_a_browser_paired_through_it_answers(browser: "Browser") -> None:
    home = short_tmp_dir("eli-mainweb-")
    try:
        main = start_main(write_config(home / "mcp.json", {"demo": demo_stdio_entry()}), home,
                          "--web", "127.0.0.1:0", home=home)
        try:
            main.wait_server_ready("demo")
            status = main.wait_status(lambda s: (s.get("webWindow") or {}).get("state") == "listening",
                                      "the web window listening")
            url = status["webWindow"]["url"]
            assert url.startswith("http://127.0.0.1:") and status["webWindow"]["address"] == "127.0.0.1:0"
            assert f"web window: {url} (pair a browser: elicitron pair --web)" in main.cli("status").stdout
            link = _cli(main, "pair", "--web", "--name", "child phone").stdout.strip()
            assert link.startswith(f"{url}/pair#")
            context = browser.new_context(viewport={"width": 360, "height": 780})
            try:
                page = context.new_page()
                page.goto(link)
                page.get_by_role("button", name="Pair this browser").click()
                page.get_by_text("Connected to main.").wait_for(timeout=TIMEOUT_MS)
                host = main.peer("web-test-host", role="controller")
                channel = host.call_tool("demo", "book_table", {"restaurant": "Chez Child"})
                page.get_by_text("Book a table at Chez Child?").wait_for(timeout=TIMEOUT_MS)
                page.get_by_label("Name on the booking (required)").fill("Ada")
                page.get_by_label("Guests (required)").fill("2")
                page.get_by_role("button", name="Accept").click()
                reply = host.expect_topic(channel, timeout_s=15)
                assert json.loads(reply["result"]["content"][0]["text"])["content"]["name"] == "Ada"
            finally:
                context.close()
        finally:
            main.stop()
        # the child stopped with main: it withdrew its web.json, so `pair --web` finds no web window
        assert not (home / DEFAULT_WEB_DIR / "web.json").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_main_web_refuses_a_port_in_use_and_a_lan_address_without_tls_before_it_starts() -> None:
    home = short_tmp_dir("eli-mainweb-bad-")
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            for value, said in ((f"127.0.0.1:{port}", f"--web 127.0.0.1:{port}: cannot listen there"),
                                ("0.0.0.0:0", "reachable from other machines")):
                done = subprocess.run([PYTHON, "-m", "cli_process", "main", "--connection", str(home / "c.json"),
                                       "--web", value], capture_output=True, text=True, env=child_env(home),
                                      cwd=ROOT, timeout=60, check=False)
                assert done.returncode == 2 and said in done.stderr, (value, done.stderr)
                assert not (home / "c.json").exists()  # main never started
    finally:
        shutil.rmtree(home, ignore_errors=True)
