"""Issue 24, the `--mcp-http` child: nobody outside locks HTTP hosts out (idle connections, sessions
never deleted), its token rotates, and a LAN address needs TLS. Real main, real child, mcp's Client."""

import resource
import select
import shutil
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from gateway_kit import HostLoop, status_json, text_of
from kit.demo import demo_stdio_entry
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from test_gateway_http import http_host, post

pytestmark = pytest.mark.slow  # real mains, HTTP children and hosts


@pytest.fixture
def hosts() -> Iterator[HostLoop]:
    loop = HostLoop()
    yield loop
    loop.close()


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_tmp_dir("eli-http-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def soft_nofile(limit: int) -> Iterator[None]:
    """Children started in the block get a soft descriptor limit of `limit` (a desktop's default),
    the hard one unchanged."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def http_main(home: Path, *args: str, soft_limit: int | None = None) -> RunningMain:
    """main with the demo server and `--mcp-http` (port 0 unless `args` names one), its HTTP
    gateway listening (as `status` reports it)."""
    config = write_config(home / "mcp.json", {"demo": demo_stdio_entry()})
    listen = args if args else ("--mcp-http", "0")
    if soft_limit is None:
        main = start_main(config, home, *listen, home=home, wait=False)
    else:
        with soft_nofile(soft_limit):
            main = start_main(config, home, *listen, home=home, wait=False)
    main.wait_up()
    main.wait_server_ready("demo")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # each status is a real round trip to main, as a user would run it
        gateway = status_json(main).get("mcpHttp") or {}
        if gateway.get("state") == "listening":
            return main
    main.stop()
    raise AssertionError("main never reported its MCP HTTP endpoint listening")


def child_log(main: RunningMain) -> Path:
    assert main.home is not None
    return main.home / "state" / "elicitron" / "log" / "mcp-http.stderr.log"


def address_of(url: str) -> tuple[str, int]:
    host, _, port = url.split("//", 1)[1].split("/", 1)[0].rpartition(":")
    return host.strip("[]"), int(port)


def closed_by_server(sock: socket.socket, timeout_s: float) -> bool:
    """True once the server closes `sock` (reads end-of-file or a reset) within `timeout_s`."""
    poll = select.poll()  # not select(): the test holds over 1,024 descriptors
    poll.register(sock, select.POLLIN)
    if not poll.poll(timeout_s * 1000):
        return False
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


# ---- finding 3: idle connections -----------------------------------------------------------------


def test_1100_idle_connections_under_a_1024_soft_limit_lock_no_host_out(home: Path, hosts: HostLoop) -> None:
    main = http_main(home, soft_limit=1024)
    try:
        url, token = main.info["mcpHttpUrl"], main.info["mcpHttpToken"]
        log_before = child_log(main).stat().st_size
        idle: list[socket.socket] = []
        try:
            for number in range(1100):
                sock = socket.create_connection(address_of(url), timeout=30)
                if number % 2:  # half of them send half a request and stall
                    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                idle.append(sock)
            host = http_host(hosts, url, token, "after-the-flood", "legacy")
            try:
                assert "demo__echo" in host.tool_names(timeout=60)
                assert text_of(host.call("demo__echo", {"text": "still served"}, timeout=60)) == "still served"
            finally:
                host.close()
            # a connection that sends nothing, or half a request, is closed after a few seconds
            assert closed_by_server(idle[-1], 30) and closed_by_server(idle[-2], 30)
        finally:
            for sock in idle:
                sock.close()
        gateway = status_json(main)["mcpHttp"]
        assert gateway["state"] == "listening"
        assert gateway["refusedConnections"] > 0  # counted, and shown
        assert "connections refused" in main.cli("status").stdout
        assert child_log(main).stat().st_size - log_before < 64 << 10
    finally:
        main.stop()


# ---- finding 7: the token rotates ----------------------------------------------------------------


def status_of(url: str, token: str) -> int:
    """The HTTP status a host with `token` gets for its first request (a tools/list)."""
    return post(url, {"Authorization": f"Bearer {token}"})[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_token_differs_on_every_main_start_and_rotates_on_demand(home: Path) -> None:
    port = str(free_port())
    first = http_main(home, "--mcp-http", port)
    url, old = first.info["mcpHttpUrl"], first.info["mcpHttpToken"]
    assert status_of(url, old) != 401
    first.stop()
    again = http_main(home, "--mcp-http", port)  # a squatter that read `old` from a host's retry meanwhile
    try:
        new = again.info["mcpHttpToken"]
        assert again.info["mcpHttpUrl"] == url and new != old
        assert status_of(url, old) == 401
        assert status_of(url, new) != 401
        printed = again.cli("serve", "--print-config", "--http")
        assert printed.returncode == 0 and f"Bearer {new}" in printed.stdout

        rotated = again.cli("serve", "--rotate-token")  # on demand, e.g. after the token leaked
        assert rotated.returncode == 0, rotated.stderr
        assert "--print-config --http" in rotated.stdout  # tells what hosts need
        newest = again.info["mcpHttpToken"]
        assert newest not in (old, new)
        deadline = time.monotonic() + 60
        while status_json(again)["mcpHttp"]["state"] != "listening" and time.monotonic() < deadline:
            pass
        assert status_of(url, new) == 401
        assert status_of(url, newest) != 401
    finally:
        again.stop()
