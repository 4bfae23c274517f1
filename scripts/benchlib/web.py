"""The web window: a request's card painted in a browser, what the web process costs idle, and what
50 open pages cost main.

A real main with the demo server, a real `elicitron web` (tests/web_kit.py starts it as the browser
tests do) and Debian's chromium driven by Playwright, paired through a real `elicitron pair --web`
link. Per sample a controller peer calls `book_table`; a contract-only renderer attached beside the
page stamps the invoke's arrival (main sends it to every window in one turn of its loop, so that is
when it left main, give or take a socket hop) on the wall clock, and the page stamps the card's
first paint (two animation frames after the card's element is added: the frame that shows it has
been produced) on the same clock (`performance.timeOrigin + performance.now()`). The peer then
declines the request, so the page's card is dismissed as when another window answers first.

Idle: the web process's CPU over a quiet window with one page attached (its keepalives and main's
heartbeats only) and its resident memory. Sessions: main's resident memory before and after 50
more event streams attach (plain HTTP clients holding the device cookie: each stream is a renderer
peer of main, as a page is), once main lists them all.
"""

import http.client
import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from kit.contract import INVOKE
from kit.main import RunningMain, running_main
from web_kit import CHROMIUM, CHROMIUM_ARGS, WebWindow, chromium_missing, pair, web_window

from benchlib.common import Figure, demo_entry, fmt_us, rss_mb, summarize_ns
from benchlib.gateway import _cpu_s

PAINT_TARGET_MS = 50.0
IDLE_CPU_TARGET = 0.5  # percent of one core
IDLE_RSS_TARGET_MB = 80.0
SESSIONS = 50
SESSIONS_TARGET_MB = 20.0
TIMEOUT_MS = 15_000

# Stamps each card's first paint: its element added to #cards, then two animation frames.
# `__paint(n)` resolves with the n-th stamp; `__emptied()` once no card is left. (Promises, not
# Playwright's wait_for_function: that evaluates strings, which the page's CSP forbids.)
_STAMP_PAINTS = """() => {
  const painted = [], waiting = [];
  const cards = document.getElementById("cards");
  const now = () => performance.timeOrigin + performance.now();
  const settle = () => { for (const w of waiting.splice(0)) (w.done() ? w.resolve() : waiting.push(w)); };
  new MutationObserver(records => {
    for (const record of records) for (const node of record.addedNodes) {
      if (node.nodeName === "ARTICLE")
        requestAnimationFrame(() => requestAnimationFrame(() => { painted.push(now()); settle(); }));
    }
    settle();
  }).observe(cards, {childList: true, subtree: true});
  const until = done => new Promise(resolve => { waiting.push({done, resolve}); settle(); });
  window.__paint = n => until(() => painted.length > n).then(() => painted[n]);
  window.__emptied = () => until(() => cards.querySelectorAll("article").length === 0);
}"""


def _paint_samples(main: RunningMain, page: Any, runs: int) -> list[float]:
    """Milliseconds from the invoke leaving main to the card painted, one request at a time."""
    stamp = main.peer("bench-stamp", role="renderer")
    host = main.peer("bench-web-host", role="controller")  # peers of one main heartbeat each other
    page.evaluate(_STAMP_PAINTS)
    samples: list[float] = []
    try:
        for i in range(runs + 1):  # the first warms the page's code paths, not counted
            channel = host.call_tool("demo", "book_table", {"restaurant": f"Bench {i}"})
            invoke = stamp.expect_topic(INVOKE)
            left_main_ms = time.time() * 1e3
            painted_ms = page.evaluate("n => window.__paint(n)", i)
            stamp.answer(invoke, "decline")
            host.expect_topic(channel)
            page.evaluate("() => window.__emptied()")
            if i > 0:
                samples.append(painted_ms - left_main_ms)
            stamp.heartbeat_if_due()
            host.heartbeat_if_due()
    finally:
        host.close()
        stamp.close()
    return samples


def _idle(web: WebWindow, seconds: float) -> tuple[float, float]:
    """The web process's CPU (% of one core) over `seconds` with one page attached, and its RSS."""
    before, started = _cpu_s(web.proc.pid), time.monotonic()
    time.sleep(seconds)  # the measurement itself: what a quiet web window spends while nothing happens
    spent = _cpu_s(web.proc.pid) - before
    return 100.0 * spent / (time.monotonic() - started), rss_mb(web.proc.pid)


def _open_streams(web: WebWindow, cookies: list[str], count: int) -> list[socket.socket]:
    """`count` event streams held open, spread over `cookies` (a device has at most 16: web_process/app.py)
    (blocking sockets: Playwright's sync API owns this thread's loop)."""
    host_port = web.url.split("//", 1)[1]
    host, port = host_port.rsplit(":", 1)
    streams = []
    for i in range(count):
        cookie = cookies[i % len(cookies)]
        stream = socket.create_connection((host, int(port)), timeout=15)
        streams.append(stream)
        stream.sendall((f"GET /events HTTP/1.1\r\nHost: {host_port}\r\nOrigin: {web.url}\r\n"
                        f"Cookie: elicitron_device={cookie}\r\nAccept: text/event-stream\r\n\r\n").encode())
        status = stream.recv(64)
        if b" 200 " not in status:
            raise RuntimeError(f"the web window refused a stream: {status!r}")
    return streams


def _web_peers(status: dict[str, Any]) -> int:
    return sum(1 for peer in status["peers"] if str(peer.get("name", "")).endswith("(web)"))


def _paired_cookie(web: WebWindow, name: str) -> str:
    """One more device, paired by a real `pair --web` link as the page pairs: its cookie's value."""
    code = web.pair_link(name).split("#", 1)[1]
    host, port = web.url.split("//", 1)[1].rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=15)
    connection.request("POST", "/api/pair", json.dumps({"code": code}),
                       {"Origin": web.url, "Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    connection.close()
    return (response.getheader("set-cookie") or "").split(";", 1)[0].split("=", 1)[1]


def _sessions(main: RunningMain, web: WebWindow, cookie: str) -> tuple[float, float, int]:
    """main's RSS before and after SESSIONS more streams attach (MiB), and how many attached."""
    attached_before = _web_peers(main.status())
    before = rss_mb(main.pid)
    cookies = [cookie, *(_paired_cookie(web, f"bench device {i}") for i in range(SESSIONS // 16))]
    streams = _open_streams(web, cookies, SESSIONS)
    try:
        status = main.wait_status(lambda status: _web_peers(status) >= attached_before + SESSIONS,
                                  f"{SESSIONS} more web pages attached")
        after = rss_mb(main.pid)
        attached = _web_peers(status) - attached_before
    finally:
        for stream in streams:
            stream.close()
    return before, after, attached


def run(quick: bool) -> list[Figure]:
    missing = chromium_missing()
    if missing:
        return [Figure(name="web", title="web window, card painted", value="skipped", target="", passed=None,
                       absolute=missing)]
    from playwright.sync_api import sync_playwright

    runs = 10 if quick else 40
    home = Path(tempfile.mkdtemp(prefix="eli-bench-web-", dir="/tmp"))
    try:
        with running_main({"demo": demo_entry()}) as main, web_window(main, home / "web") as web, \
                sync_playwright() as driver:
            main.wait_server_ready("demo")
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_context(viewport={"width": 360, "height": 780}).new_page()
                pair(page, web, "bench phone", TIMEOUT_MS)
                samples = _paint_samples(main, page, runs)
                cpu_pct, web_rss = _idle(web, 3.0 if quick else 20.0)
                cookie = next(c["value"] for c in page.context.cookies() if c["name"] == "elicitron_device")
                before, after, attached = _sessions(main, web, cookie)
            finally:
                browser.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    paint = summarize_ns([int(ms * 1e6) for ms in samples])
    grown = after - before
    return [
        Figure(
            name="web", title="web window, invoke -> card painted", value=f"p50 {fmt_us(paint['p50_us'])}",
            target=f"< {PAINT_TARGET_MS:.0f} ms", passed=paint["p50_us"] < PAINT_TARGET_MS * 1e3,
            absolute=f"p90 {fmt_us(paint['p90_us'])}, max {fmt_us(paint['max_us'])}, n={paint['n']}",
            how="book_table's form: invoke at a contract peer beside the page -> the card's first paint in "
                "Debian's chromium (headless, 360x780), one request at a time",
            data=paint,
        ),
        Figure(
            name="web", title="web window, idle", value=f"{cpu_pct:.2f}% CPU, {web_rss:.0f} MB",
            target=f"< {IDLE_CPU_TARGET}% and < {IDLE_RSS_TARGET_MB:.0f} MB",
            passed=cpu_pct < IDLE_CPU_TARGET and web_rss < IDLE_RSS_TARGET_MB,
            absolute=f"pid {web.proc.pid}, one page attached, {os.cpu_count()} cores",
            how="CPU time (/proc) of the `elicitron web` process over a quiet window, and its VmRSS",
            data={"cpu_percent": cpu_pct, "rss_mb": web_rss},
        ),
        Figure(
            name="web", title=f"web window, {SESSIONS} pages on main", value=f"+{grown:.1f} MB",
            target=f"< {SESSIONS_TARGET_MB:.0f} MB", passed=grown < SESSIONS_TARGET_MB and attached >= SESSIONS,
            absolute=f"main VmRSS {before:.1f} -> {after:.1f} MB; {attached} streams attached as renderer peers",
            how=f"{SESSIONS} event streams with the device cookie, each a renderer peer of main, once main lists all",
            data={"before_mb": before, "after_mb": after, "attached": attached},
        ),
    ]
