"""Nobody outside takes main down by opening connections (issue 24), measured: a legitimate window's
round trip (a demo book_table call that elicits, answered at once) and main's memory while 2,000
idle TCP connections sit on each listener main runs for others — `--listen`'s tcp+CURVE port, the
sign-in redirect listener (opened by a server that needs sign-in: tests/oauth_server.py) and the
`--mcp-http` child — and 1,000 HTTP sessions (with the demo server over HTTP) are open; each
flood opens again what a listener closes, so it lasts while the window is measured. main starts as a desktop session starts it,
with a soft open-files limit of 1,024. Targets: the round trip under 1 s (max), main's peak RSS at
most +150 MB, main and the HTTP child still serving.
"""

import http.client
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kit.demo import start_http_demo
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT
from kit.peer import WirePeer
from kit.procs import end_process

from benchlib.common import (
    Figure,
    demo_entry,
    fmt_us,
    now_ns,
    summarize_ns,
    window_round_trips,
)

TCP_FLOOD = Path(__file__).with_name("abuse_tcp.py")
IDLE_PER_LISTENER = 2_000
HTTP_SESSIONS = 1_000
SESSION_THREADS = 8
SESSIONS_BUDGET_S = 120.0
SOFT_OPEN_FILES = 1_024
ROUND_TRIP_TARGET_US = 1_000_000
RSS_TARGET_MB = 150.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _memory_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} for pid {pid}")


def _oauth_server(stack: ExitStack) -> str | None:
    """The test authorization + MCP server's MCP URL (a server that needs sign-in), or None."""
    try:
        from oauth_kit import oauth_servers  # tests/oauth_kit.py: the suite's own

        return stack.enter_context(oauth_servers()).mcp
    except (ImportError, AssertionError, OSError):
        return None


def _flood(host: str, port: int, count: int) -> "tuple[subprocess.Popen[bytes], list[int]]":
    """`count` idle connections from 100 loopback addresses, held by a process of their own;
    returns it and [answered, closed, waiting] once the listener has dealt with each one."""
    proc = subprocess.Popen([sys.executable, str(TCP_FLOOD), host, str(port), str(count), "60", "100"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().split()
    if not line or line[0] != "ready":
        raise RuntimeError(f"the flood of {host}:{port} did not start ({line})")
    return proc, [int(n) for n in line[1:4]]


def _open_session(url: str, token: str, name: str, timeout_s: float = 5.0) -> int:
    """One MCP `initialize` over streamable HTTP that is never DELETEd: a session left open. Its
    HTTP status (200 with a session id: opened), 0 when no answer came."""
    parts = urlsplit(url)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}})
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        connection.request("POST", parts.path, body, {
            "Authorization": f"Bearer {token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"})
        response = connection.getresponse()
        response.read()
        return response.status if response.getheader("mcp-session-id") or response.status != 200 else 0
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        connection.close()


def _open_sessions(url: str, token: str, count: int) -> Counter[int]:
    """`count` sessions with one server (/mcp/web), SESSION_THREADS at a time, for at most
    SESSIONS_BUDGET_S; how many got each HTTP status (0: no answer)."""
    deadline = now_ns() + int(SESSIONS_BUDGET_S * 1e9)

    def one(i: int) -> int:
        return _open_session(url, token, f"bench-host-{i}") if now_ns() < deadline else 0

    with ThreadPoolExecutor(SESSION_THREADS) as pool:
        return Counter(pool.map(one, range(count)))


def _sign_in_port(window: WirePeer, timeout_s: float = 60.0) -> int | None:
    """The port of the sign-in redirect listener, from the sign-in card main sent the window."""
    def sign_in(topic: str, body: Any) -> bool:
        return topic == "msgElicitationTransferInvoke" and body.get("kind") == "sign-in"

    welcome = next((body for topic, body in window.received if topic == "welcome"), {})
    card = next((item for item in welcome.get("pending", []) if item.get("kind") == "sign-in"), None)
    if card is None:
        try:
            _, card = window.expect(sign_in, timeout_s)
        except AssertionError:
            return None
    return urlsplit(card["signIn"]["redirectUri"]).port


def _wait_http_gateway(window: WirePeer, timeout_s: float = 60.0) -> None:
    """Until main's status says its HTTP gateway listens (its URL is in the connection file then)."""
    deadline = now_ns() + int(timeout_s * 1e9)
    while (window.status(timeout_s).get("mcpHttp") or {}).get("state") != "listening":
        if now_ns() > deadline:
            raise RuntimeError("main's HTTP gateway did not listen within 60 s")
        try:
            window.expect(lambda t, b: t == "peers", 1.0)  # or main's next push, whichever comes first
        except AssertionError:
            pass


def _start(home: Path, oauth_url: str | None, web_url: str) -> RunningMain:
    # demo over stdio for the window's round trips; the same demo over HTTP for the hosts' sessions
    # (a relayed stdio session is a server process each; an HTTP one is a session with one server)
    servers: dict[str, Any] = {"demo": demo_entry(), "web": {"url": web_url}}
    if oauth_url is not None:
        servers["signin"] = {"url": oauth_url}
    # Soft limit only, as a desktop session starts programs (the hard one stays what it is).
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    limited = hard != resource.RLIM_INFINITY and hard > SOFT_OPEN_FILES  # else: as it is
    os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"  # tokens in the temp home
    try:
        return start_main(write_config(home / "mcp.json", servers), home, "--listen",
                          f"tcp://127.0.0.1:{_free_port()}", "--mcp-http", f"127.0.0.1:{_free_port()}", home=home,
                          open_files=(SOFT_OPEN_FILES, hard) if limited else None)
    finally:
        os.environ.pop("PYTHON_KEYRING_BACKEND", None)


def run(quick: bool) -> list[Figure]:
    count = 10 if quick else 50
    home = short_tmp_dir("eli-bench-listeners-")
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, home, ignore_errors=True)
        oauth_url = _oauth_server(stack)
        web, web_url = start_http_demo()
        stack.callback(end_process, web)
        main = _start(home, oauth_url, web_url)
        stack.callback(main.stop)
        main.wait_server_ready("demo")
        main.wait_server_ready("web")
        window = main.peer(name="quiet-window")
        sign_in_port = _sign_in_port(window) if oauth_url is not None else None
        _wait_http_gateway(window)
        info = main.info
        window_round_trips(window, 3, "listeners")  # warm up
        quiet = window_round_trips(window, count, "listeners")
        window.close()  # a window must heartbeat; the one measured under attack attaches then
        rss_before = _memory_mb(main.pid, "VmRSS")

        http_url, http_token = info.get("mcpHttpUrl"), info.get("mcpHttpToken")
        targets = {"main tcp+CURVE": urlsplit(info["remoteEndpoint"]).port}
        if sign_in_port is not None:
            targets["sign-in redirect"] = sign_in_port
        floods: dict[str, list[int]] = {}
        for name, port in targets.items():  # the sign-in first: its card expires in the end
            assert port is not None
            proc, counts = _flood("127.0.0.1", port, IDLE_PER_LISTENER)
            stack.callback(_end, proc)
            floods[name] = counts
        t0 = now_ns()
        sessions = _open_sessions(f"{http_url}/web", http_token, HTTP_SESSIONS) if http_url and http_token \
            else Counter[int]()
        opened = sessions[200]
        sessions_s = (now_ns() - t0) / 1e9
        if http_url:
            proc, counts = _flood("127.0.0.1", urlsplit(http_url).port or 0, IDLE_PER_LISTENER)
            stack.callback(_end, proc)
            floods["--mcp-http child"] = counts
        window = main.peer(name="legit-window")  # attaches with everything in place
        attacked = window_round_trips(window, count, "listeners")
        peak = _memory_mb(main.pid, "VmHWM")
        status = main.status(60)
        # A host that opens a session now (with another server: /mcp/web is at its cap, if any)
        http_after = _open_session(f"{http_url}/demo", http_token, "bench-host-after") == 200 \
            if http_url and http_token else False
        main_alive = main.proc.poll() is None
        window.close()
    calm, loud = summarize_ns(quiet), summarize_ns(attacked)
    grown = peak - rss_before
    # At the end of each flood's first pass (before it reopens anything): open, and closed by the listener.
    held = "; ".join(f"{name}: {a + w:,} open, {c:,} closed by it" for name, (a, c, w) in floods.items())
    capped = [f"{item['name']} refused {item['refused']:,}" for item in status.get("listeners", [])]
    gateway = (status.get("mcpHttp") or {}).get("state", "off")
    data: dict[str, Any] = {"quiet": calm, "attacked": loud, "rss_before_mb": rss_before, "peak_mb": peak,
                            "floods": floods, "http_sessions_opened": opened, "listeners": status.get("listeners"),
                            "mcp_http": status.get("mcpHttp"), "http_session_after": http_after,
                            "sign_in_listener": sign_in_port is not None, "sessions_open_s": sessions_s,
                            "http_session_statuses": dict(sessions)}
    refused = ", ".join(f"{n:,} got {code or 'no answer'}" for code, n in sorted(sessions.items()) if code != 200)
    how = (f"{IDLE_PER_LISTENER:,} idle TCP connections on each of {', '.join(floods)}; {opened:,} of "
           f"{HTTP_SESSIONS:,} HTTP sessions opened in {sessions_s:.0f} s{f' ({refused})' if refused else ''}, "
           f"never deleted; main under ulimit -Sn {SOFT_OPEN_FILES}")
    survived = main_alive and (http_after or not http_url)
    return [
        Figure(name="abuse", title="abuse: round trip, listeners flooded", value=f"max {fmt_us(loud['max_us'])}",
               target="< 1 s", passed=loud["max_us"] < ROUND_TRIP_TARGET_US,
               absolute=f"p50 {fmt_us(loud['p50_us'])} flooded vs {fmt_us(calm['p50_us'])} quiet; n={loud['n']}",
               how=how, data=data),
        Figure(name="abuse", title="abuse: main's memory, listeners flooded + HTTP sessions",
               value=f"+{grown:.0f} MB", target=f"<= +{RSS_TARGET_MB:.0f} MB", passed=grown <= RSS_TARGET_MB,
               absolute=f"RSS {rss_before:.0f} MB before, peak {peak:.0f} MB (VmHWM)", how=how, data=data),
        Figure(name="abuse", title="abuse: every listener still serves",
               value="main and the HTTP child up" if survived else
               f"main {'up' if main_alive else 'DOWN'}, a new HTTP session {'opened' if http_after else 'FAILED'}",
               target="main and the HTTP child up", passed=survived,
               absolute=f"{held}; {', '.join(capped) or 'no listener reports refusals'}; HTTP gateway {gateway}",
               how="flood still on: main's status, and a new HTTP session (with the demo server)", data=data),
    ]


def _end(proc: "subprocess.Popen[bytes]") -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
