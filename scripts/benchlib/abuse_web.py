"""Nobody locks the web window's paired browser out (issue 33, findings 4 and 5), measured: a
legitimate window's round trip (a demo book_table call that elicits, answered at once), the paired
browser's `GET /` (a new connection each time, carrying its device cookie) and main's memory while
2,000 idle TCP connections from 100 loopback addresses sit on the web window (benchlib/abuse_tcp.py:
what it closes is opened again, so the flood lasts while everything is measured) and one paired
device asks for 64 event streams at once. main and `elicitron web` start as a desktop session starts
them, with a soft open-files limit of 1,024. Targets: the round trip and `GET /` under 1 s (max),
main's peak RSS at most +150 MB, and a second device's event stream opens.
"""

import http.client
import json
import resource
import shutil
import socket
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kit.env import short_tmp_dir
from kit.main import start_main, write_config
from kit.paths import ROOT
from web_kit import WebWindow, web_window

from benchlib.common import Figure, demo_entry, fmt_us, now_ns, summarize_ns, window_round_trips

TCP_FLOOD = Path(__file__).with_name("abuse_tcp.py")
IDLE = 2_000
SOURCES = 100
HOG_STREAMS = 64  # the web window's old limit for every device together
SOFT_OPEN_FILES = 1_024
TARGET_US = 1_000_000
RSS_TARGET_MB = 150.0


def _peak_mb(pid: int, field: str = "VmHWM") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} for pid {pid}")


def _address(web: WebWindow) -> tuple[str, int]:
    host, port = web.url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def _paired_cookie(web: WebWindow, name: str) -> str:
    """A device paired by a real `pair --web` link, its code POSTed as the page does: its Cookie header."""
    code = web.pair_link(name).split("#", 1)[1]
    connection = http.client.HTTPConnection(*_address(web), timeout=15)
    connection.request("POST", "/api/pair", json.dumps({"code": code}),
                       {"Origin": web.url, "Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"pairing {name} got {response.status}")
    return (response.getheader("set-cookie") or "").split(";", 1)[0]


def _gets(web: WebWindow, cookie: str, count: int) -> tuple[list[int], int]:
    """`count` `GET /` from a new connection each: their times (ns) and how many were not 200."""
    samples, failed = [], 0
    for _ in range(count):
        t0 = now_ns()
        try:
            connection = http.client.HTTPConnection(*_address(web), timeout=15)
            connection.request("GET", "/", headers={"Cookie": cookie})
            response = connection.getresponse()
            response.read()
            connection.close()
            failed += response.status != 200
        except (OSError, http.client.HTTPException):
            failed += 1
        samples.append(now_ns() - t0)
    return samples, failed


def _streams(web: WebWindow, cookie: str, count: int) -> tuple[list[socket.socket], int]:
    """`count` event streams asked for before any answer is read; the sockets (held open by the
    caller) and how many opened (200)."""
    host_port = web.url.split("//", 1)[1]
    request = (f"GET /events HTTP/1.1\r\nHost: {host_port}\r\nOrigin: {web.url}\r\nCookie: {cookie}\r\n"
               "Accept: text/event-stream\r\n\r\n").encode()
    held = [socket.create_connection(_address(web), timeout=15) for _ in range(count)]
    for stream in held:
        stream.sendall(request)
    opened = sum(stream.recv(64).startswith(b"HTTP/1.1 200 ") for stream in held)
    return held, opened


def _flood(web: WebWindow) -> "tuple[subprocess.Popen[bytes], list[int]]":
    """IDLE idle connections from SOURCES loopback addresses, held by a process of their own;
    it and [answered, closed, waiting] once the web window dealt with each one."""
    host, port = _address(web)
    proc = subprocess.Popen([sys.executable, str(TCP_FLOOD), host, str(port), str(IDLE), "60", str(SOURCES)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().split()
    if not line or line[0] != "ready":
        raise RuntimeError(f"the flood of the web window did not start ({line})")
    return proc, [int(n) for n in line[1:4]]


def _close(streams: list[socket.socket]) -> None:
    for stream in streams:
        stream.close()


def _end(proc: "subprocess.Popen[bytes]") -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def run(quick: bool) -> list[Figure]:
    count = 10 if quick else 50
    home = short_tmp_dir("eli-bench-webabuse-")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    # Soft limit only, as a desktop session starts programs (the hard one stays what it is).
    limits = (SOFT_OPEN_FILES, hard) if hard != resource.RLIM_INFINITY and hard > SOFT_OPEN_FILES else None
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, home, ignore_errors=True)
        main = start_main(write_config(home / "mcp.json", {"demo": demo_entry()}), home, home=home,
                          open_files=limits)
        stack.callback(main.stop)
        main.wait_server_ready("demo")
        web = stack.enter_context(web_window(main, home / "web", open_files=limits, log=home / "web.log"))
        browser, hog = _paired_cookie(web, "bench browser"), _paired_cookie(web, "bench hog")
        window = main.peer(name="quiet-window")
        window_round_trips(window, 3, "web-abuse")  # warm up
        quiet = window_round_trips(window, count, "web-abuse")
        quiet_gets, _ = _gets(web, browser, count)
        window.close()  # a window must heartbeat; the one measured under attack attaches then
        rss_before = _peak_mb(main.pid, "VmRSS")

        proc, flood = _flood(web)
        stack.callback(_end, proc)
        held, hog_opened = _streams(web, hog, HOG_STREAMS)
        stack.callback(_close, held)
        window = main.peer(name="legit-window")  # attaches with everything in place
        attacked = window_round_trips(window, count, "web-abuse")
        gets, failed = _gets(web, browser, count)
        mine, browser_opened = _streams(web, browser, 1)
        _close(mine)
        peak = _peak_mb(main.pid)
        web_alive = web.proc.poll() is None
        window.close()
    loud, calm = summarize_ns(attacked), summarize_ns(quiet)
    page, page_calm = summarize_ns(gets), summarize_ns(quiet_gets)
    grown = peak - rss_before
    answered, closed, waiting = flood
    data: dict[str, Any] = {"quiet": calm, "attacked": loud, "get_quiet": page_calm, "get_attacked": page,
                            "get_failed": failed, "rss_before_mb": rss_before, "peak_mb": peak, "flood": flood,
                            "hog_streams_opened": hog_opened, "second_device_stream": browser_opened,
                            "web_alive": web_alive}
    how = (f"{IDLE:,} idle TCP connections from {SOURCES} addresses on `elicitron web` ({answered + waiting:,} open, "
           f"{closed:,} closed by it after the first pass), one device asking for {HOG_STREAMS} event streams "
           f"at once ({hog_opened} opened); main and the web window under ulimit -Sn {SOFT_OPEN_FILES}")
    served = web_alive and failed == 0 and browser_opened == 1
    return [
        Figure(name="abuse", title="abuse: round trip, web window flooded", value=f"max {fmt_us(loud['max_us'])}",
               target="< 1 s", passed=loud["max_us"] < TARGET_US,
               absolute=f"p50 {fmt_us(loud['p50_us'])} flooded vs {fmt_us(calm['p50_us'])} quiet; n={loud['n']}",
               how=how, data=data),
        Figure(name="abuse", title="abuse: paired browser's GET /, web window flooded",
               value=f"max {fmt_us(page['max_us'])}", target="< 1 s, every one 200",
               passed=page["max_us"] < TARGET_US and served,
               absolute=f"p50 {fmt_us(page['p50_us'])} flooded vs {fmt_us(page_calm['p50_us'])} quiet; "
                        f"{failed} not 200; its event stream {'opened' if browser_opened else 'REFUSED'} beside "
                        f"the hog's {hog_opened}; web window {'up' if web_alive else 'DOWN'}",
               how=how, data=data),
        Figure(name="abuse", title="abuse: main's memory, web window flooded", value=f"+{grown:.0f} MB",
               target=f"<= +{RSS_TARGET_MB:.0f} MB", passed=grown <= RSS_TARGET_MB,
               absolute=f"RSS {rss_before:.0f} MB before, peak {peak:.0f} MB (VmHWM)", how=how, data=data),
    ]
