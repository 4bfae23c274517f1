"""Issue 24, the `--mcp-http` child: nobody outside locks HTTP hosts out (idle connections, sessions
never deleted), its token rotates, and a LAN address needs TLS. Real main, real child, mcp's Client."""

import resource
import select
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_kit import Host, HostLoop, status_json, text_of
from kit.demo import demo_stdio_entry
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.procs import descendants
from mcp.client.streamable_http import streamable_http_client
from test_gateway_http import LIST_TOOLS, http_host, post

from shared.descriptors import CEILING

pytestmark = pytest.mark.slow  # real mains, HTTP children and hosts



@pytest.fixture
def home() -> Iterator[Path]:
    path = short_tmp_dir("eli-http-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def http_main(home: Path, *args: str, open_files: tuple[int, int] | None = None,
              servers: dict[str, Any] | None = None) -> RunningMain:
    """main with the demo server (or `servers`) and `--mcp-http` (port 0 unless `args` names one),
    its HTTP gateway listening (as `status` reports it); `open_files`: main's (soft, hard) limit."""
    config = write_config(home / "mcp.json", servers or {"demo": demo_stdio_entry()})
    listen = args if args else ("--mcp-http", "0")
    main = start_main(config, home, *listen, home=home, open_files=open_files)
    main.wait_server_ready("demo")
    try:
        main.wait_status(lambda status: (status.get("mcpHttp") or {}).get("state") == "listening",
                         "its MCP HTTP endpoint listening")
    except AssertionError:
        main.stop()
        raise
    return main


def gateway_reports(main: RunningMain, holds: Callable[[dict[str, Any]], bool], timeout_s: float = 30) -> dict[str, Any]:
    """`status --json`'s HTTP gateway, once `holds` (the child reports its counts every second)."""
    status = main.wait_status(lambda status: holds(status["mcpHttp"]), "the HTTP gateway's counts", timeout_s)
    gateway: dict[str, Any] = status["mcpHttp"]
    return gateway


def open_file_limits(pid: int) -> tuple[int, int]:
    """A process's (soft, hard) descriptor limit, from /proc."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError(f"no open-files limit for {pid}")


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


HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


@pytest.mark.parametrize("open_files", [(1024, HARD), (1024, 1024)], ids=["soft-1024", "ulimit-n-1024"])
def test_1100_idle_connections_under_a_1024_limit_lock_no_host_out(home: Path, hosts: HostLoop,
                                                                   open_files: tuple[int, int]) -> None:
    main = http_main(home, open_files=open_files)
    try:
        child = next(pid for pid, command in descendants(main.pid).items() if "--listen-http" in command)
        assert open_file_limits(child) == (min(open_files[1], CEILING), open_files[1])  # raised as it may be
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
        for number in range(300):  # each logged by the SDK with the header in it: said once, cut short
            assert post(url, {"Authorization": f"Bearer {token}", "Host": f"{number}.{'x' * 8000}.example"})[0] == 403
        gateway = gateway_reports(main, lambda gateway: gateway.get("refusedConnections", 0) > 0)
        assert gateway["state"] == "listening"
        assert gateway.get("refusedConnections", 0) > 0  # counted, and shown
        assert "connections refused" in main.cli("status").stdout
        assert child_log(main).stat().st_size - log_before < 64 << 10
    finally:
        main.stop()


# ---- finding 5: sessions never deleted -----------------------------------------------------------


def initialize(url: str, token: str, name: str) -> tuple[int, dict[str, Any]]:
    """One handshake-era session opened (an `initialize` POST, answered in full) and never deleted."""
    import json
    import urllib.error
    import urllib.request

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}})
    request = urllib.request.Request(url, data=body.encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status, {}
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"{}")


def test_600_sessions_never_deleted_leave_room_for_windows_status_and_other_hosts(
    home: Path, hosts: HostLoop, http_demo_server: str
) -> None:
    main = http_main(home, open_files=(1024, HARD), servers={"demo": {"url": http_demo_server}})
    try:
        url, token = main.info["mcpHttpUrl"], main.info["mcpHttpToken"]
        log_before = child_log(main).stat().st_size
        answers: dict[int, int] = {}
        refusal: dict[str, Any] = {}
        for _ in range(600):  # a buggy host that never sends DELETE
            status, body = initialize(f"{url}/demo", token, "leaky-host")
            answers[status] = answers.get(status, 0) + 1
            refusal = refusal or body
        assert answers.get(200, 0) >= 8 and sum(answers.values()) == 600, answers
        assert refusal["jsonrpc"] == "2.0" and "DELETE" in refusal["error"]["message"], refusal  # says what to do

        main.peer("window-after-the-leak")  # main's peer table has room
        report = status_json(main)
        assert "window-after-the-leak" in [peer["name"] for peer in report["peers"] if peer["role"] == "renderer"]
        leaky = [peer for peer in report["peers"] if peer["role"] == "host"]
        assert 1 <= len(leaky) <= 4, leaky  # the sessions share main peers
        gateway = gateway_reports(main, lambda gateway: gateway.get("refusedSessions", 0) == answers[503])
        assert gateway["refusedSessions"] == answers[503] and gateway["sessions"] == answers[200]
        assert "sessions refused" in main.cli("status").stdout

        other = http_host(hosts, url, token, "another-host", "legacy")  # not locked out by the leak
        try:
            assert text_of(other.call("demo__echo", {"text": "room for me"})) == "room for me"
        finally:
            other.close()
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
        again.wait_status(lambda status: status["mcpHttp"]["state"] == "listening", "the gateway listening again")
        assert status_of(url, new) == 401
        assert status_of(url, newest) != 401
    finally:
        again.stop()


# ---- finding 16: a LAN address needs TLS ---------------------------------------------------------


def lan_address() -> str:
    """This machine's address on its default route (no packet is sent); skips without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 9))
        except OSError:
            pytest.skip("no network route: no LAN address to serve")
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("only loopback here")
    return address


def self_signed(directory: Path, address: str) -> tuple[Path, Path]:
    """A certificate for `address` (and localhost) and its key, made here."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, address)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address)),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


def tls_host(loop: HostLoop, url: str, token: str, cert: Path) -> Host:
    import ssl

    import httpx2

    trust = ssl.create_default_context(cafile=str(cert))
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, verify=trust,
                                timeout=httpx2.Timeout(30, read=300))
    return Host(loop, streamable_http_client(url, http_client=client), "lan-host", mode="legacy").open()


def https_post(url: str, cert: Path, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    import http.client
    import json
    import ssl

    host, port = address_of(url)
    connection = http.client.HTTPSConnection(host, port, timeout=30,
                                             context=ssl.create_default_context(cafile=str(cert)))
    try:
        connection.request("POST", "/mcp", body=LIST_TOOLS, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def test_a_lan_address_needs_tls_or_insecure_http_and_its_hosts_are_served(home: Path, hosts: HostLoop) -> None:
    address = lan_address()
    port = free_port()
    config = write_config(home / "mcp.json", {"demo": demo_stdio_entry()})
    plain = start_main(config, home, "--mcp-http", f"0.0.0.0:{port}", home=home, wait=False)
    try:
        code = plain.proc.wait(60)  # refused before anything starts
    except subprocess.TimeoutExpired:
        plain.stop()
        raise AssertionError("main started serving the bearer token over plain HTTP on every address") from None
    said = plain.stderr.text().strip().splitlines()
    assert code == 2 and len(said) == 1, said
    assert "--tls-cert" in said[0] and "--insecure-http" in said[0]

    cert, key = self_signed(home, address)
    main = http_main(home, "--mcp-http", f"0.0.0.0:{port}", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        url, token = main.info["mcpHttpUrl"], main.info["mcpHttpToken"]
        assert url == f"https://{address}:{port}/mcp"  # what a host on the LAN uses
        host = tls_host(hosts, url, token, cert)  # its Host header names the LAN address
        try:
            assert text_of(host.call("demo__echo", {"text": "over the LAN"})) == "over the LAN"
        finally:
            host.close()
        silent = socket.create_connection((address, port), timeout=30)  # never starts its TLS handshake
        try:
            assert closed_by_server(silent, 30)
        finally:
            silent.close()
        foreign = https_post(url, cert, {"Authorization": f"Bearer {token}", "Host": f"evil.example:{port}"})
        assert foreign[0] == 403 and address in foreign[1]["error"]  # it names what it serves
    finally:
        main.stop()

    port = free_port()
    insecure = http_main(home, "--mcp-http", f"0.0.0.0:{port}", "--insecure-http")
    try:
        url, token = insecure.info["mcpHttpUrl"], insecure.info["mcpHttpToken"]
        assert url == f"http://{address}:{port}/mcp"
        assert status_of(url, token) not in (401, 403)  # the LAN address in Host is the one it serves
        assert post(url, {"Authorization": f"Bearer {token}", "Host": f"evil.example:{port}"})[0] == 403
    finally:
        insecure.stop()
