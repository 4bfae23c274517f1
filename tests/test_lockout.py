"""Nobody gets locked out (issue 17): one poison request, one greedy peer, one crowd, planted files,
log abuse — each tried against a real main, as an attacker or a buggy server would."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq
from kit.demo import demo_stdio_entry
from kit.env import child_env
from kit.main import RunningMain, start_main, write_config
from kit.paths import ROOT
from kit.peer import WirePeer

pytestmark = pytest.mark.slow

WINDOW_RECEIVE_LIMIT = 64 << 20  # what Elicitron's own window accepts from main


def call_error_or_text(reply: dict[str, Any]) -> tuple[int | None, str]:
    if "error" in reply:
        return reply["error"]["code"], reply["error"]["message"]
    return None, " ".join(item.get("text", "") for item in reply["result"].get("content", []))


def ask(peer: WirePeer, message: str = "Q?", **arguments: Any) -> str:
    return peer.call_tool("demo", "ask", {"message": message, **arguments})


def book_and_answer(caller: WirePeer, window: WirePeer, timeout_s: float = 10) -> dict[str, Any]:
    """One legitimate round trip: a call that elicits, answered in `window`; the tool's result."""
    call = caller.call_tool("demo", "book_table", {"restaurant": "still served"})
    invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                           and "still served" in b["request"]["params"]["message"], timeout_s)[1]
    window.answer(invoke, "accept", {"name": "Ada", "party_size": 2})
    return caller.expect_topic(call, timeout_s)


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for {pid}")


# ---- 1. a poison request -------------------------------------------------------------------------


def test_a_request_the_wire_cannot_carry_is_refused_and_every_window_still_attaches(demo_main: RunningMain) -> None:
    window = demo_main.peer(name="first")
    beyond_64_bits = {"type": "object", "properties": {"n": {"type": "integer", "title": "N", "x-note": 2**70}}}
    _, text = call_error_or_text(window.expect_topic(ask(window, "poison?", schema_json=json.dumps(beyond_64_bits))))
    assert "cannot carry" in text
    assert "cannot carry" in window.expect_topic("notice")["message"]
    out_of_range = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 2**70}}}
    _, text = call_error_or_text(window.expect_topic(ask(window, "poison?", schema_json=json.dumps(out_of_range))))
    assert "maximum must be a finite number" in text
    late = demo_main.peer(name="late")  # its welcome is built from the pending list: it still works
    assert demo_main.status()["pending"] == []
    assert book_and_answer(late, late)["result"]["isError"] is False
    assert not [b for t, b in window.received + late.received
                if t == "msgElicitationTransferInvoke" and b["request"]["params"]["message"] == "poison?"]


def test_a_timeout_past_the_bound_is_a_config_error(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {"demo": demo_stdio_entry(elicitationTimeoutSeconds=1e100)})
    done = subprocess.run([sys.executable, "-m", "cli_process", "main", "--config", str(config), "--connection",
                           str(tmp_path / "c.json")], capture_output=True, text=True, env=child_env(), cwd=ROOT,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "elicitationTimeoutSeconds" in done.stderr and "7 days" in done.stderr


# ---- 2. big requests -------------------------------------------------------------------------------


def test_a_request_over_max_request_bytes_is_refused_with_a_notice(demo_main: RunningMain) -> None:
    main = demo_main
    window = main.peer()
    code, text = call_error_or_text(window.expect_topic(ask(window, message="x", repeat=3_000_000), 60))
    assert code == -32602 or "maxRequestBytes" in text
    assert "maxRequestBytes" in window.expect_topic("notice")["message"]
    assert not [t for t, _ in window.received if t == "msgElicitationTransferInvoke"]
    assert main.status()["pending"] == []


def expect_keeping_alive(peer: WirePeer, topic: str, others: list[WirePeer], timeout_s: float = 60.0) -> Any:
    """`peer.expect_topic`, with `others` heartbeating meanwhile: 70 MB to read can take longer than
    main's 5 s silence limit on a busy machine, and a silent peer would be detached."""
    deadline = time.monotonic() + timeout_s
    while True:
        for other in others:
            other.heartbeat_if_due()
        try:
            return peer.expect_topic(topic, 0.3)
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def test_seven_pending_ten_megabyte_requests_still_let_a_window_attach(
        main_factory: Callable[..., RunningMain]) -> None:
    main = main_factory({"demo": demo_stdio_entry(maxRequestBytes=16 << 20)})
    main.wait_server_ready("demo")
    controller = main.peer(role="controller")
    first = main.peer(name="first")
    calls = [ask(controller, message=f"{i}", repeat=10_000_000) for i in range(7)]
    for _ in calls:  # all seven are pending once a window has seen them
        expect_keeping_alive(first, "msgElicitationTransferInvoke", [controller])
    window = WirePeer(main.info["endpoint"], main.info["token"], name="window")
    window.sock.setsockopt(zmq.MAXMSGSIZE, WINDOW_RECEIVE_LIMIT)
    main.peers.append(window)
    welcome = window.hello()
    assert welcome["topic"] == "welcome"
    channels = list(welcome["pendingChannels"])
    assert len(channels) == 7
    delivered = [invoke["responseChannel"] for invoke in welcome["pending"]]
    while len(delivered) < 7:
        delivered.append(expect_keeping_alive(window, "msgElicitationTransferInvoke",
                                              [controller, first])["responseChannel"])
    assert delivered == channels
    assert len(main.status()["pending"]) == 7
    for invoke_channel in channels:
        window.send(invoke_channel, {"action": "decline"})
    for call in calls:
        answer = expect_keeping_alive(controller, call, [first, window])
        assert json.loads(call_error_or_text(answer)[1])["action"] == "decline"


# ---- 3. schema keywords of the wrong type --------------------------------------------------------


@pytest.mark.parametrize(("prop", "named"), [
    ({"type": "string", "minLength": "abc"}, "minLength"),
    ({"type": "number", "minimum": "x"}, "minimum"),
    ({"type": "array", "items": {"enum": 5}}, "items.enum"),
    ({"type": "string", "oneOf": 5}, "oneOf"),
    ({"type": "string", "maxLength": 2**40}, "maxLength"),
])
def test_a_schema_keyword_of_the_wrong_type_is_refused_before_any_window_sees_it(
        demo_main: RunningMain, prop: dict[str, Any], named: str) -> None:
    window = demo_main.peer()
    schema = {"type": "object", "properties": {"field": prop}}
    code, text = call_error_or_text(window.expect_topic(ask(window, schema_json=json.dumps(schema))))
    assert named in text and "-32603" not in text and code != -32603, text
    assert named in window.expect_topic("notice")["message"]
    assert not [t for t, _ in window.received if t == "msgElicitationTransferInvoke"]


# ---- 4. one greedy peer ----------------------------------------------------------------------------


def test_a_peer_flooding_heartbeats_cannot_stall_main(demo_main: RunningMain) -> None:
    window = demo_main.peer(name="legit")
    info = demo_main.info
    stop = threading.Event()
    refusals: list[str] = []

    def flood() -> None:
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.connect(info["endpoint"])
        encode = msgspec.msgpack.encode
        sock.send_multipart([b"hello", encode({"protocol": 1, "token": info["token"], "window": "flooder",
                                               "name": "flooder", "role": "renderer"})])
        heartbeat = [b"heartbeat", encode({})]
        while not stop.is_set():
            for _ in range(1000):
                sock.send_multipart(heartbeat)
            while sock.poll(0):
                frames = sock.recv_multipart()
                if frames[0] == b"error":
                    refusals.append(msgspec.msgpack.decode(frames[1])["code"])
        sock.close()

    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    try:
        for _ in range(3):
            assert book_and_answer(window, window, timeout_s=5)["result"]["isError"] is False
    finally:
        stop.set()
        flooder.join(10)
    # Whether the flooder also hears `rate-limited` depends on how fast this machine lets main read
    # (the in-process broker test pins that); what matters here is that everyone else is served.
    assert set(refusals) <= {"rate-limited"}
    assert demo_main.proc.poll() is None


def test_big_bodies_on_a_channel_that_does_not_exist_are_refused_unread(demo_main: RunningMain) -> None:
    window = demo_main.peer(name="legit")
    attacker = demo_main.peer(name="attacker")
    million_maps = msgspec.msgpack.encode({"action": "accept", "content": {"x": [{}] * 1_000_000}})
    assert len(million_maps) < 1 << 20
    fake = f"msgElicitationTransferResult-{uuid.uuid4()}"
    for _ in range(40):
        attacker.send_raw([fake.encode(), million_maps])
    assert book_and_answer(window, window, timeout_s=5)["result"]["isError"] is False
    codes = [attacker.expect_error(fake, 20)["code"] for _ in range(40)]
    assert set(codes) <= {"unknown-channel", "rate-limited"} and "unknown-channel" in codes


# ---- 5. a crowd ------------------------------------------------------------------------------------


def test_a_crowd_of_vanishing_peers_costs_main_little_memory(demo_main: RunningMain) -> None:
    pid = demo_main.proc.pid
    window = demo_main.peer(name="legit")
    before = rss_mb(pid)
    info = demo_main.info
    crowd = [WirePeer(info["endpoint"], info["token"], name=f"crowd-{i}") for i in range(400)]
    for peer in crowd:
        peer.send("hello", {"protocol": 1, "token": info["token"], "window": peer.window, "name": peer.name,
                            "role": "renderer"})
    for peer in crowd:
        peer.expect_topic("welcome", 30)
    for peer in crowd:  # vanish without a bye, as crashed windows do
        peer.sock.close(linger=0)
    assert book_and_answer(window, window, timeout_s=10)["result"]["isError"] is False
    while any(p["name"].startswith("crowd-") for p in demo_main.status()["peers"]):
        window.expect_topic("peers", 20)  # main notices each silence (5 s) and detaches
    grown = rss_mb(pid, "VmHWM") - before
    assert grown < 150, f"main's peak grew by {grown:.0f} MB for 400 peers"


# ---- 6. planted files --------------------------------------------------------------------------------


def run_main(connection: Path, config: Path | None = None, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "cli_process", "main", "--connection", str(connection)]
    if config is not None:
        argv += ["--config", str(config)]
    return subprocess.run(argv, capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=timeout_s,
                          check=False)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="eli-", dir="/tmp"))
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def test_a_planted_lock_symlink_is_refused_and_its_target_untouched(short_dir: Path, tmp_path: Path) -> None:
    runtime = short_dir / "run"
    runtime.mkdir(mode=0o700)
    target = tmp_path / "victim.txt"
    target.write_text("precious")
    (runtime / "connection.json.lock").symlink_to(target)
    done = run_main(runtime / "connection.json")
    assert done.returncode == 1 and "symlink" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert target.read_text() == "precious"


@pytest.mark.skipif(os.getuid() != 0, reason="making a directory owned by another user needs root")
def test_a_directory_owned_by_another_user_is_refused_in_one_line(short_dir: Path) -> None:
    runtime = short_dir / "theirs"
    runtime.mkdir(mode=0o700)
    os.chown(runtime, 65534, 65534)
    done = run_main(runtime / "connection.json")
    assert done.returncode == 1 and "owned by uid 65534" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0


@pytest.mark.skipif(os.getuid() != 0, reason="making a directory owned by another user needs root")
def test_a_squatted_fallback_directory_for_long_paths_is_refused(short_dir: Path) -> None:
    deep = short_dir / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True, mode=0o700)
    connection = deep / "connection.json"
    digest = hashlib.sha256(str(connection).encode()).hexdigest()[:16]
    squatted = Path(tempfile.gettempdir()) / f"elicitron-{digest}"
    squatted.mkdir(mode=0o700)
    os.chown(squatted, 65534, 65534)
    try:
        done = run_main(connection)
    finally:
        subprocess.run(["rm", "-rf", str(squatted)], check=False)
    assert done.returncode == 1 and "owned by uid 65534" in done.stderr and "Traceback" not in done.stderr


# ---- 7. logs -----------------------------------------------------------------------------------------


def test_bad_requests_and_hostile_ids_cannot_flood_or_forge_the_log(demo_main: RunningMain) -> None:
    peer = demo_main.peer(name="noisy", role="controller")
    logged_before = len(demo_main.stderr.text())
    for i in range(2000):
        peer.send("msgStatus", {"responseChannel": f"é-{i}"})
    peer.send("msgStatus", {"responseChannel": "sentinel"})
    peer.expect_topic("sentinel", 30)
    assert peer.expect_error("msgStatus")["code"] == "bad-body"
    forger = WirePeer(demo_main.info["endpoint"], demo_main.info["token"], name="x\nFORGED: main stopped")
    forger.window = "w\nFORGED: all good"
    demo_main.peers.append(forger)
    forger.hello()
    huge = WirePeer(demo_main.info["endpoint"], demo_main.info["token"], name="huge")
    huge.window = "w" * ((1 << 20) - 1000)
    demo_main.peers.append(huge)
    assert huge.hello()["code"] == "bad-body"
    demo_main.status()  # a round trip after all of it: main has handled and logged everything above
    written = demo_main.stderr.text()[logged_before:]
    assert len(written) < 20_000, f"{len(written)} bytes of log for 2,000 bad requests"
    lines = written.splitlines()
    assert not [line for line in lines if line.startswith("FORGED")]
    assert max(map(len, lines), default=0) < 2000


def test_logs_are_private_and_every_server_name_has_its_own_stderr_log(tmp_path: Path, short_dir: Path) -> None:
    servers = {name: {"command": sys.executable, "args": ["-c", f"import sys; sys.stderr.write('I am {name}')"]}
               for name in ("a/b", "a_b", "a b")}
    config = write_config(tmp_path / "mcp.json", servers)
    main = start_main(config, short_dir, home=short_dir)
    try:
        watcher = main.peer(name="watcher", role="controller")
        errors: dict[str, str] = {}
        while len(errors) < 3:  # each server wrote its line and exited: its error carries the tail
            update = watcher.expect_topic("servers", 60)["servers"]
            errors = {s["name"]: s["error"] for s in update if s.get("error")}
    finally:
        main.stop()
    for name in servers:
        assert f"I am {name}" in errors[name]
        assert all(f"I am {other}" not in errors[name] for other in servers if other != name)
    log_dir = short_dir / "state" / "elicitron" / "log"
    assert oct(log_dir.stat().st_mode & 0o777) == oct(0o700)
    logs = list(log_dir.glob("server-a*.stderr.log"))
    assert len(logs) == 3
    assert all(oct(p.stat().st_mode & 0o777) == oct(0o600) for p in logs)


def test_main_log_file_is_private(tmp_path: Path, short_dir: Path) -> None:
    log_file = tmp_path / "logs" / "main.log"
    bad_config = tmp_path / "mcp.json"
    bad_config.write_text("{}")  # main opens its log first, then stops at the config error
    done = subprocess.run([sys.executable, "-m", "cli_process", "main", "--connection", str(short_dir / "c.json"),
                           "--log-file", str(log_file), "--config", str(bad_config)], capture_output=True,
                          text=True, env=child_env(), cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 2
    assert oct(log_file.stat().st_mode & 0o777) == oct(0o600)
    assert oct(log_file.parent.stat().st_mode & 0o777) == oct(0o700)


# ---- 8. smaller ----------------------------------------------------------------------------------------


def test_a_stale_connection_file_is_named_at_once(demo_main: RunningMain) -> None:
    demo_main.proc.kill()
    demo_main.proc.wait(10)
    done = demo_main.cli("status")
    assert done.returncode == 3
    assert "stale" in done.stderr and f"pid {demo_main.proc.pid}" in done.stderr


@pytest.mark.parametrize(("text", "named"), [
    ('{"mcpServers": {"demo": {"command": "x", "elicitationBurst": 0.5}}}', "elicitationBurst"),
    ('{"mcpServers": {"demo": {"command": "x"}, "demo": {"command": "y"}}}', "'demo' appears twice"),
])
def test_config_values_that_would_silently_misbehave_are_errors(tmp_path: Path, text: str, named: str) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(text)
    done = run_main(tmp_path / "c.json", config)
    assert done.returncode == 2 and named in done.stderr and done.stderr.count("\n") == 1
