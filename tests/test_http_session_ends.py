"""Issue 39, HTTP hosts: however a host leaves its sessions, main and its `--mcp-http` child give back
what they held. Sessions ended with DELETE give back main's descriptors (and the per-session server
processes) at once; abandoned ones (and ones whose connection dropped mid-call) when they are swept
as idle (`ELICITRON_MCP_HTTP_IDLE_S` shortens the ten minutes); `elicitron status` counts go back
down in both cases. Real main, real HTTP child, raw HTTP hosts (scripts/soaklib/http_host.py)."""

import shutil
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from gateway_kit import status_json
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import PYTHON, ROOT

sys.path.insert(0, str(ROOT / "scripts"))  # the soak's hosts and probes
from soaklib.http_host import HttpHostSession
from soaklib.probe import Held, children, held

pytestmark = pytest.mark.slow  # a real main, its HTTP child, per-session server processes

TINY = ROOT / "scripts" / "soaklib" / "tiny_server.py"
SESSIONS = 12
IDLE_S = 3.0


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_tmp_dir("eli-http-ends-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def tiny_main(home: Path) -> RunningMain:
    """main with the stdlib tiny server (one process per relayed session) and `--mcp-http 0`."""
    config = write_config(home / "mcp.json", {"tiny": {"command": PYTHON, "args": ["-I", "-S", str(TINY)]}})
    main = start_main(config, home, "--mcp-http", "0", home=home)
    try:
        main.wait_status(lambda status: (status.get("mcpHttp") or {}).get("state") == "listening",
                         "its MCP HTTP endpoint listening")
    except AssertionError:
        main.stop()
        raise
    return main


def http_child(main: RunningMain) -> int:
    return next(pid for pid, command in children(main.pid).items() if "--listen-http" in command)


def tiny_servers(main: RunningMain) -> int:
    """The per-session copies of the server main runs (beside its own, for windows and `call`)."""
    return sum(1 for command in children(main.pid).values() if "tiny_server.py" in command) - 1


def hosts_of(status: dict[str, Any]) -> list[str]:
    return [peer["name"] for peer in status["peers"] if peer["role"] == "host"]


def wait_for(main: RunningMain, holds: Callable[[], bool], what: str, timeout_s: float) -> None:
    """Until `holds()`, or AssertionError naming `what`. What it reads (main's status, processes,
    descriptors) sends no event, so it is read again whenever main logs something (a session
    ending, a server stopping), and at least every 0.2 s."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = main.stderr.size
        if holds():
            return
        left = deadline - time.monotonic()
        assert left > 0, f"not within {timeout_s} s: {what}"
        main.stderr.wait_change(seen, min(left, 0.2))


def settled(main: RunningMain) -> tuple[Held, Held]:
    """main's and its HTTP child's holdings once no session is left anywhere: no host peer, no
    session counted by the child, no per-session server running, descriptors steady."""
    def quiet() -> bool:
        status = status_json(main)
        gateway = status["mcpHttp"]  # counts at 0 are left out
        return not hosts_of(status) and not gateway.get("sessions") and not gateway.get("mainPeers") \
            and tiny_servers(main) == 0
    wait_for(main, quiet, "no session, host peer or per-session server left", 30)
    child = http_child(main)
    readings: list[tuple[int, int]] = []

    def steady() -> bool:  # the same count three readings in a row: nothing is still closing
        readings.append((held(main.pid).descriptors, held(child).descriptors))
        return len(readings) >= 3 and len(set(readings[-3:])) == 1
    wait_for(main, steady, "descriptors steady", 15)
    return held(main.pid), held(child)


def tool(name: str, path: str) -> str:
    """A tool's name on `/mcp<path>`: as itself on `/mcp/tiny`, prefixed on `/mcp` (merged)."""
    return name if path else f"tiny__{name}"


def open_sessions(main: RunningMain, count: int, path: str, tag: str) -> list[HttpHostSession]:
    """`count` sessions, each with a call answered, opened all at once: their idle time then starts
    together (one after another, the first could pass IDLE_S while the last were opening on a loaded
    machine, and be swept before the test counted it: 9 of 12 seen)."""
    url, token = main.info["mcpHttpUrl"], main.info["mcpHttpToken"]

    def opened(number: int) -> HttpHostSession:
        session = HttpHostSession(url + path, token, f"{tag}-{number % 3}").open()  # three hosts share peers
        assert session.call(tool("echo", path), {"text": f"{tag} {number}"})["content"][0]["text"] == f"{tag} {number}"
        return session

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(opened, range(count)))


@pytest.mark.parametrize("path", ["/tiny", ""], ids=["one-server", "merged"])
def test_sessions_ended_with_delete_give_back_descriptors_and_status_counts_at_once(home: Path, path: str) -> None:
    main = tiny_main(home)
    try:
        child = http_child(main)
        before_main, before_child = settled(main)
        sessions = open_sessions(main, SESSIONS, path, "deleting")
        assert tiny_servers(main) == SESSIONS  # main holds one server per session, and its pipes
        during = held(main.pid)
        assert during.descriptors > before_main.descriptors, (before_main, during)
        main.wait_status(lambda status: status["mcpHttp"].get("sessions") == SESSIONS, "the sessions counted")
        assert sorted(set(hosts_of(status_json(main)))) == ["deleting-0", "deleting-1", "deleting-2"]

        assert {session.delete() for session in sessions} == {200}
        began = time.monotonic()
        after_main, after_child = settled(main)
        assert time.monotonic() - began < 10  # at once: no sweep involved (the idle time is ten minutes)
        assert after_main.descriptors <= before_main.descriptors, (before_main, after_main)
        assert after_child.descriptors <= before_child.descriptors, (before_child, after_child)
        assert after_main.rss_kib - before_main.rss_kib < 20 << 10, (before_main, after_main)
        assert held(child).descriptors == after_child.descriptors
    finally:
        main.stop()


@pytest.mark.parametrize("path", ["/tiny", ""], ids=["one-server", "merged"])
def test_abandoned_sessions_and_dropped_calls_give_everything_back_when_swept_as_idle(
    home: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ELICITRON_MCP_HTTP_IDLE_S", str(IDLE_S))  # main's HTTP child inherits it
    main = tiny_main(home)
    try:
        before_main, before_child = settled(main)
        sessions = open_sessions(main, SESSIONS, path, "leaving")
        for session in sessions[: SESSIONS // 2]:
            session.abandon()
        with ThreadPoolExecutor(max_workers=SESSIONS) as pool:  # at once, for the reason open_sessions says
            list(pool.map(lambda session: session.drop_mid_call(tool("hang", path)),  # a call in flight, its
                          sessions[SESSIONS // 2:]))                                  # connection gone
        opened = time.monotonic()
        assert tiny_servers(main) == SESSIONS  # held until they are idle long enough
        after_main, after_child = settled(main)
        assert time.monotonic() - opened >= IDLE_S * 0.5  # the sweep, not the hosts, ended them
        assert after_main.descriptors <= before_main.descriptors, (before_main, after_main)
        assert after_child.descriptors <= before_child.descriptors, (before_child, after_child)
        gateway = status_json(main)["mcpHttp"]
        assert not gateway.get("sessions") and not gateway.get("refusedSessions"), gateway
    finally:
        main.stop()


def test_a_swept_session_is_not_found_and_a_new_one_is_served(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELICITRON_MCP_HTTP_IDLE_S", str(IDLE_S))
    main = tiny_main(home)
    try:
        url, token = main.info["mcpHttpUrl"], main.info["mcpHttpToken"]
        first = HttpHostSession(url + "/tiny", token, "returning").open()
        settled(main)  # swept
        assert first.delete() == 404  # the host is told its session is gone, as the spec says
        again = HttpHostSession(url + "/tiny", token, "returning").open()
        assert again.call("echo", {"text": "back"})["content"][0]["text"] == "back"
        assert again.delete() == 200
    finally:
        main.stop()
