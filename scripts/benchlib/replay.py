"""Replay: 1,000 pending elicitations, a new renderer attaches; time until all arrive in welcome.

Through a real main with the demo server over stdio: a controller (no renderer attached, so
nothing is answered) fires 1,000 `book_table` calls; main holds 1,000 pending requests, each a
real MCP elicitation waiting in its callback. Then fresh renderers attach one after another;
each sample runs from just before the hello is sent until its welcome is received and decoded
with every pending invoke in it. main's RSS (VmRSS) is read with the 1,000 pending held.
"""

import time

from kit import wire
from kit.peer import WirePeer

from benchlib.common import Figure, fmt_us, now_ns, rss_mb, running_demo_main, summarize_ns


def _fill(controller: WirePeer, count: int, timeout_s: float = 90.0) -> float:
    """Fire `count` calls and wait until main reports them all pending; returns the seconds it took."""
    t0 = time.monotonic()
    for _ in range(count):
        controller.call_tool("demo", "book_table", {"restaurant": "Replay"})
    deadline = t0 + timeout_s
    while True:
        pending = len(controller.status()["pending"])
        if pending >= count:
            return time.monotonic() - t0
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {pending} of {count} requests became pending in {timeout_s} s")
        time.sleep(0.05)


def _attach_once(main_endpoint: str, token: str, count: int, i: int) -> tuple[int, int]:
    peer = WirePeer(main_endpoint, token, name=f"replay-{i}")
    try:
        peer.sock.poll(0)
        time.sleep(0.05)  # let the connection come up: the figure is main's work, not the connect
        frames = wire.hello_frames(token, peer.window, peer.name)
        t0 = now_ns()
        peer.sock.send_multipart(frames)
        while True:
            if not peer.sock.poll(15_000):
                raise TimeoutError("no welcome within 15 s")
            raw = peer.sock.recv_multipart()
            if raw[0] == b"welcome":
                welcome = wire.decode(raw[1])
                t1 = now_ns()
                break
        got = len(welcome["pending"])
        if got < count:
            raise AssertionError(f"welcome held {got} pending, expected {count}")
        return t1 - t0, len(raw[1])
    finally:
        peer.close()


def run(quick: bool) -> list[Figure]:
    count, attaches = (200, 3) if quick else (1000, 7)
    with running_demo_main() as main:
        rss_idle = rss_mb(main.pid)
        info = main.info
        controller = main.peer(name="replay-controller", role="controller", strict=True)
        try:
            fill_s = _fill(controller, count)
            rss_full = rss_mb(main.pid)
            samples, sizes = [], []
            for i in range(attaches):
                elapsed, size = _attach_once(info["endpoint"], info["token"], count, i)
                samples.append(elapsed)
                sizes.append(size)
                controller.heartbeat_if_due()
            rss_after = rss_mb(main.pid)
        finally:
            controller.close()
    s = summarize_ns(samples)
    rss_peak = max(rss_full, rss_after)
    ok_time = s["p50_us"] < 500_000
    ok_rss = rss_peak < 150
    return [
        Figure(
            name="replay",
            title=f"replay {count} pending",
            value=f"p50 {fmt_us(s['p50_us'])}",
            target="< 0.5 s",
            passed=ok_time,
            absolute=f"max {fmt_us(s['max_us'])} over {attaches} attaches; welcome {sizes[0] / 1024:.0f} KiB; "
            f"filling took {fill_s:.1f} s",
            how="real main + demo server (stdio), pending made by a controller's msgMcpCallTool with no window "
            "attached; hello sent -> welcome decoded with all pending",
            data={**s, "pending": count, "welcome_bytes": sizes[0], "fill_s": fill_s},
        ),
        Figure(
            name="replay",
            title=f"main RSS, {count} pending",
            value=f"{rss_peak:.0f} MB",
            target="< 150 MB",
            passed=ok_rss,
            absolute=f"idle {rss_idle:.0f} MB, with pending {rss_full:.0f} MB, after attaches {rss_after:.0f} MB",
            how="VmRSS of the main process from /proc/<pid>/status",
            data={"rss_idle_mb": rss_idle, "rss_pending_mb": rss_full, "rss_after_mb": rss_after},
        ),
    ]
