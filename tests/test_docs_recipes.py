"""The pages' recipes are run (or their config read) as the pages write them, so they cannot rot
(issue 37): docs/hosts.md "Hosts over HTTP" (start main with the page's `--mcp-http`, print the
entry with the page's command, and reach the servers with mcp's `Client` over streamable HTTP
using exactly that entry, rotate its token; the page's command for other machines without its
certificate is refused in one line), and docs/web.md's reverse-proxy recipe (the Caddyfile and Tailscale
lines name the upstream the page's `elicitron web` listens on, and its `--origin` is the address
the web window then accepts and pairs on). A port the page names is replaced by a free one."""

import json
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from docs_kit import commands
from gateway_kit import Host, HostLoop, text_of
from kit.demo import demo_stdio_entry
from kit.env import child_env
from kit.main import RunningMain
from kit.paths import PYTHON, ROOT
from kit.recipes import caddy_sites, caddyfile, command, first, lines_starting, proxy_recipe, section
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from web_kit import web_window

from web_process.listen import DEFAULT_HOST, DEFAULT_PORT, check_listen

# ---- docs/hosts.md: Hosts over HTTP -----------------------------------------------------------------


HTTP_HOSTS = section("hosts.md", "Hosts over HTTP")


def _entry(printed: str) -> dict[str, object]:
    """The `elicitron` server entry in what `serve --print-config --http` printed (its first JSON)."""
    config = json.loads(printed[printed.index("{"):printed.index("\n}") + 2])
    entry: dict[str, object] = config["mcpServers"]["elicitron"]
    return entry


def _refused_for_its_token(url: str, headers: dict[str, str]) -> bool:
    """Whether a POST with these headers gets 401 (a bare tools/list past the token is another
    status: it opened no session)."""
    request = urllib.request.Request(url, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
        data=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')
    try:
        with urllib.request.urlopen(request, timeout=30):
            return False
    except urllib.error.HTTPError as refused:
        return refused.code == 401


def _reach(hosts: HostLoop, entry: dict[str, object]) -> None:
    """A host configured with `entry` (its url and headers) lists the servers' tools and calls one."""
    headers = entry["headers"]
    assert isinstance(headers, dict)
    client = create_mcp_http_client(headers=headers)
    host = Host(hosts, streamable_http_client(str(entry["url"]), http_client=client), "docs-http-host").open()
    try:
        assert "demo__book_table" in host.tool_names()
        assert text_of(host.call("demo__echo", {"text": "as the page says"})) == "as the page says"
    finally:
        host.close()


@pytest.mark.slow
def test_the_http_host_entry_the_page_prints_reaches_the_servers(
        main_factory: Callable[..., RunningMain], hosts: HostLoop, tmp_path: Path) -> None:
    start, show = command(HTTP_HOSTS, "elicitron main --mcp-http"), command(HTTP_HOSTS, "elicitron serve --print")
    page_port = start[start.index("--mcp-http") + 1]
    shape = json.loads(first(r'`(\{"url": .*?\})`', HTTP_HOSTS))

    with socket.socket() as probe:  # a free port for the page's: fixed, as the page's is, across a rotation
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    main = main_factory({"demo": demo_stdio_entry()}, *[(port if word == page_port else word) for word in start[2:]])
    # "with no main running it exits 3 and says so": a connection file no main runs on
    nothing = main.cli_plain(*show[1:], "--connection", str(tmp_path / "none.json"))
    assert (nothing.returncode, nothing.stdout) == (3, ""), nothing.stderr
    assert nothing.stderr.startswith("elicitron: no main is running")

    main.wait_server_ready("demo")
    main.wait_status(lambda status: (status.get("mcpHttp") or {}).get("state") == "listening",
                     "its MCP HTTP endpoint listening")
    printed = main.cli(*show[1:])
    assert printed.returncode == 0, printed.stderr
    entry = _entry(printed.stdout)
    assert entry.keys() == shape.keys() and entry["url"] == shape["url"].replace(page_port, port)
    headers = entry["headers"]
    assert isinstance(headers, dict) and headers.keys() == shape["headers"].keys()
    assert headers["Authorization"].startswith("Bearer ") and len(headers["Authorization"]) > 30
    url = str(entry["url"])
    _reach(hosts, entry)
    assert _refused_for_its_token(url, {})  # "Every request needs that token (401 without it)"

    # "The token is new ... on `elicitron serve --rotate-token`": the old entry is refused, a new one works.
    rotated = main.cli(*command(HTTP_HOSTS, "elicitron serve --rotate")[1:])
    assert rotated.returncode == 0, rotated.stderr
    assert " ".join(show) in rotated.stdout  # it says what to run again
    main.wait_status(lambda status: status["mcpHttp"]["state"] == "listening", "the gateway listening again")
    assert _refused_for_its_token(url, headers)
    fresh = _entry(main.cli(*show[1:]).stdout)
    assert fresh["url"] == url and isinstance(fresh["headers"], dict) and fresh["headers"] != headers
    assert not _refused_for_its_token(url, fresh["headers"])


@pytest.mark.slow
def test_the_pages_address_for_other_machines_without_its_certificate_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """"Without TLS a non-loopback address is refused at start (one line, exit 2)": the page's
    command for other machines, its --tls-cert and --tls-key left out."""
    words = first(r"`(elicitron main --mcp-http\s+\S+ --tls-cert [^`]*)`", HTTP_HOSTS).split()
    for option in ("--tls-cert", "--tls-key"):
        at = words.index(option)
        del words[at:at + 2]
    refused = subprocess.run([PYTHON, "-m", "cli_process", *words[1:], "--connection", str(tmp_path / "c.json")],
                             check=False, capture_output=True, text=True, env=child_env(tmp_path), cwd=ROOT,
                             timeout=60)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "would send the bearer token in clear text" in refused.stderr
    assert not (tmp_path / "c.json").exists()  # main did not start


# ---- docs/web.md: a reverse proxy in front of the web window -----------------------------------------


RECIPE = proxy_recipe()


def _caddyfile() -> str:
    return caddyfile(RECIPE)


def _web_commands() -> list[list[str]]:
    return lines_starting(RECIPE, "elicitron web")


def test_the_proxies_forward_to_where_the_pages_elicitron_web_listens() -> None:
    """Each `elicitron web` of the recipe leaves --listen at its default, so the proxy in front must
    name that address: Caddy's reverse_proxy upstream and Tailscale's port."""
    web = commands()["elicitron web"]
    listens = {web.parse_args(words[2:]).listen for words in _web_commands()}
    assert listens == {f"{DEFAULT_HOST}:{DEFAULT_PORT}"}, "the recipe's `elicitron web` listens elsewhere"

    sites = caddy_sites(_caddyfile())
    assert list(sites) == ["phone.example.net"], sites
    (directive,) = sites["phone.example.net"]
    assert directive == ["reverse_proxy", f"{DEFAULT_HOST}:{DEFAULT_PORT}"]
    (tailscale,) = lines_starting(RECIPE, "tailscale serve")
    assert tailscale[-1] == str(DEFAULT_PORT)


def test_each_origin_the_recipe_gives_is_the_https_address_its_proxy_serves() -> None:
    web = commands()["elicitron web"]
    origins = []
    for words in _web_commands():
        args = web.parse_args(words[2:])
        listen = check_listen(args.listen, args.tls_cert, args.tls_key, args.insecure_http, tuple(args.origin))
        assert listen.tls is None and args.origin and all(o.startswith("https://") for o in args.origin)
        origins += args.origin
    caddy_site, = caddy_sites(_caddyfile())
    assert f"https://{caddy_site}" in origins  # Caddy serves its site address over https
    assert any(origin.endswith(".ts.net") for origin in origins)  # tailscale serve: <machine>.<tailnet>.ts.net


@pytest.mark.slow
def test_the_recipes_web_window_accepts_what_the_proxy_forwards_and_pairs_on_its_address(
        demo_main: RunningMain, tmp_path: Path) -> None:
    """Caddy's reverse_proxy keeps the browser's Host: the web window started as the recipe says
    serves its pairing page to a request for the public name (the page: "Whoever can reach the
    proxy can reach the pairing page"), refuses another name, and `pair --web` links to it."""
    (caddy_site,) = caddy_sites(_caddyfile())
    words = next(words for words in _web_commands() if f"https://{caddy_site}" in words)
    with web_window(demo_main, tmp_path / "web", *words[2:]) as web:
        def get(host: str) -> int:
            request = urllib.request.Request(f"{web.url}/pair", headers={"Host": host})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return int(response.status)
            except urllib.error.HTTPError as refused:
                return refused.code

        assert get(caddy_site) == 200
        assert get("evil.example") == 403
        assert web.pair_link("recipe phone").startswith(f"https://{caddy_site}/pair#")
