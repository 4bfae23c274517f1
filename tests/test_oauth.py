"""Sign-in (OAuth, MCP authorization spec) across real processes: main, the test authorization
server and protected MCP server (tests/oauth_server.py), a v1 wire peer as the window, and the test
browser named in BROWSER (tests/oauth_browser.py)."""

import json
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kit.env import child_env
from kit.paths import ROOT
from kit.peer import WirePeer
from oauth_kit import (
    Browser,
    IdleFlood,
    OAuthMain,
    OAuthServers,
    expect_sign_in_card,
    oauth_config,
    oauth_servers,
    open_files_of,
    reply_on,
    server_status,
    start_oauth_main,
    start_with_window,
    started_mains,
    stop_and_read_log,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def servers() -> Iterator[OAuthServers]:
    with oauth_servers() as running:
        yield running


@pytest.fixture
def mains() -> Iterator[list[OAuthMain]]:
    with started_mains() as started:
        yield started


def _sign_in(peer: WirePeer, browser: Browser, **options: bool) -> dict[str, Any]:
    """Answer the sign-in card with Accept and let the browser do the rest, as a window does."""
    invoke = expect_sign_in_card(peer)
    peer.answer(invoke, "accept")
    browser.open(invoke["request"]["params"]["url"], **options)
    return invoke


def _call(peer: WirePeer, server: str, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    channel = peer.call_tool(server, tool, arguments or {})
    return reply_on(peer, channel)


def _cards(peer: WirePeer) -> list[dict[str, Any]]:
    return [b for t, b in peer.received if t == "msgElicitationTransferInvoke" and b.get("kind") == "sign-in"]


def _text(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    return str(reply["result"]["content"][0]["text"])


def test_first_sign_in_goes_through_the_card_and_a_restarted_main_reuses_the_token(
        servers: OAuthServers, mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    config = oauth_config(tmp_path, "remote", servers.mcp)
    main, peer = start_with_window(mains, config, tmp_path / "data")

    assert server_status(peer, "remote", "needs-sign-in")
    invoke = _sign_in(peer, browser)
    params, info = invoke["request"]["params"], invoke["signIn"]
    assert params["mode"] == "url" and params["elicitationId"]
    assert info["authorizationServer"] == "127.0.0.1" and info["scopes"] == ["mcp:read"]
    assert info["resource"] == servers.mcp and info["redirectUri"].startswith("http://127.0.0.1:")
    query = parse_qs(urlsplit(params["url"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [servers.mcp]
    assert browser.steps()[-1]["status"] == 200  # the listener took the redirect

    server_status(peer, "remote", "ready")
    peer.expect(lambda t, b: t == "msgElicitationComplete" and b["elicitationId"] == params["elicitationId"])
    who = json.loads(_text(_call(peer, "remote", "whoami")))
    assert who["scopes"] == ["mcp:read"] and who["resource"] == servers.mcp
    assert servers.stats()["registrations"] == 1  # Dynamic Client Registration

    status = main.running.cli("auth", "status", "remote")
    assert status.returncode == 0 and "signed in (file)" in status.stdout and servers.issuer in status.stdout

    # A restarted main finds the token in the file: no card, no new registration or authorization.
    main.running.stop()
    _again, peer = start_with_window(mains, config, main.data_home)
    server_status(peer, "remote", "ready")
    assert json.loads(_text(_call(peer, "remote", "whoami")))["clientId"] == who["clientId"]
    assert not [b for t, b in peer.received if t == "msgElicitationTransferInvoke"]
    stats = servers.stats()
    assert stats["registrations"] == 1 and stats["authorizations"] == 1


def test_an_expired_token_is_refreshed_without_a_card_and_a_revoked_one_shows_the_card_again(
        servers: OAuthServers, mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    _main, peer = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
    _sign_in(peer, browser)
    server_status(peer, "remote", "ready")

    servers.post("/test/expire-access")
    assert "mcp:read" in _text(_call(peer, "remote", "whoami"))
    assert servers.stats()["refreshes"] == 1
    assert len(_cards(peer)) == 1  # only the first sign-in's

    servers.post("/test/revoke-refresh")
    servers.post("/test/expire-access")
    channel = peer.call_tool("remote", "whoami", {})
    _sign_in(peer, browser)  # the refresh was refused: the card again, and the call goes through
    assert "mcp:read" in _text(reply_on(peer, channel))
    assert servers.stats()["authorizations"] == 2


def test_a_call_that_needs_a_wider_scope_steps_up_through_the_card(
        servers: OAuthServers, mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    _main, peer = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
    _sign_in(peer, browser)
    server_status(peer, "remote", "ready")

    channel = peer.call_tool("remote", "write_note", {"text": "hi"})
    invoke = expect_sign_in_card(peer)
    assert invoke["signIn"]["scopes"] == ["mcp:read", "mcp:write"]
    peer.answer(invoke, "accept")
    browser.open(invoke["request"]["params"]["url"])
    assert _text(reply_on(peer, channel)) == "wrote 'hi' with mcp:read mcp:write"
    server_status(peer, "remote", "ready")


def test_decline_leaves_the_server_needing_sign_in_and_calls_fail_with_a_clear_error(
        servers: OAuthServers, mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    main, peer = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
    waiting = peer.call_tool("remote", "whoami", {})  # waits for the sign-in
    peer.answer(expect_sign_in_card(peer), "decline")

    error = reply_on(peer, waiting)["error"]
    assert error["code"] == -32000 and "declined" in error["message"] and "elicitron auth login" in error["message"]
    server_status(peer, "remote", "needs-sign-in", error_has="declined")
    error = _call(peer, "remote", "whoami")["error"]  # at once, no new card
    assert error["code"] == -32000 and "declined" in error["message"]
    status = main.running.cli("status")
    assert "needs-sign-in" in status.stdout
    assert servers.stats()["authorizations"] == 0

    login = main.running.cli("auth", "login", "remote")
    assert login.returncode == 0, login.stderr
    _sign_in(peer, browser)
    server_status(peer, "remote", "ready")
    assert "mcp:read" in _text(_call(peer, "remote", "whoami"))

    logout = main.running.cli("auth", "logout", "remote")
    assert logout.returncode == 0 and "not signed in" in logout.stdout
    server_status(peer, "remote", "needs-sign-in")
    error = _call(peer, "remote", "whoami")["error"]
    assert "signed out" in error["message"]
    assert servers.stats()["revocations"] >= 1  # the refresh token was revoked at the server


def test_a_wrong_state_on_the_loopback_is_refused_and_the_listener_waits_for_the_real_one(
        servers: OAuthServers, mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    _main, peer = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
    _sign_in(peer, browser, tamper=True)
    steps = {step["step"]: step for step in browser.steps()}
    assert steps["tampered"]["status"] == 400 and "does not match" in steps["tampered"]["body"]
    assert steps["redirect"]["status"] == 200
    server_status(peer, "remote", "ready")


def test_a_window_on_another_machine_pastes_the_redirected_address(
        servers: OAuthServers, mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    _main, peer = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
    invoke = _sign_in(peer, browser, follow=False)
    landed = browser.steps()[-1]["redirect"]  # what the remote browser's address bar shows
    eid = invoke["request"]["params"]["elicitationId"]

    def paste(url: str) -> dict[str, Any]:
        channel = f"paste-{uuid.uuid4()}"
        peer.send("msgSignInRedirect", {"server": "remote", "elicitationId": eid, "url": url,
                                        "responseChannel": channel})
        return reply_on(peer, channel)

    forged = paste(landed.replace("state=", "state=x"))
    assert forged["error"]["code"] == -32602 and "does not match" in forged["error"]["message"]
    assert paste(landed)["auth"]["server"] == "remote"
    server_status(peer, "remote", "ready")


def test_a_pre_registered_client_from_config_with_configured_scopes(mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    with oauth_servers("--client-id", "elicitron-test", "--client-secret", "s3cret",
                       "--auth-method", "client_secret_post") as servers:
        config = oauth_config(tmp_path, "remote", servers.mcp, oauth={
            "clientId": "elicitron-test", "clientSecret": "s3cret", "tokenEndpointAuthMethod": "client_secret_post",
            "scopes": ["mcp:read", "mcp:write"]})
        _main, peer = start_with_window(mains, config, tmp_path / "data")
        invoke = _sign_in(peer, browser)
        assert invoke["signIn"]["scopes"] == ["mcp:read", "mcp:write"]  # oauth.scopes overrides
        server_status(peer, "remote", "ready")
        who = json.loads(_text(_call(peer, "remote", "whoami")))
        assert who["clientId"] == "elicitron-test" and who["scopes"] == ["mcp:read", "mcp:write"]
        stats = servers.stats()
        assert stats["registrations"] == 0 and stats["tokenClientAuth"] == ["client_secret_post"]


def test_the_token_file_is_private_and_no_token_reaches_the_log_the_audit_or_a_window(
        servers: OAuthServers, mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    main, peer = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
    _sign_in(peer, browser)
    server_status(peer, "remote", "ready")
    servers.post("/test/expire-access")
    _call(peer, "remote", "whoami")  # a refresh: a second pair of tokens

    assert stat.S_IMODE(main.token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(main.token_file.parent.stat().st_mode) == 0o700
    record = json.loads(main.token_file.read_text())["remote"]
    secrets = [record["tokens"]["access_token"], record["tokens"]["refresh_token"], record["client"]["client_secret"]]
    log = stop_and_read_log(main)  # a clean stop also checkpoints the audit database
    assert "signed in to remote" in log  # the log is the real one, at debug level
    audit = main.audit_db.read_bytes() + b"".join(
        p.read_bytes() for p in main.audit_db.parent.glob("audit.sqlite3-*"))
    seen_by_window = json.dumps(peer.received)
    for secret in secrets:
        assert secret not in log
        assert secret.encode() not in audit
        assert secret not in seen_by_window


OPEN_FILES = 1024  # the usual desktop soft limit, as the probe of issue 24 ran main
FLOOD = 1_100


def test_a_flood_of_idle_connections_to_the_redirect_listener_neither_kills_main_nor_stops_the_sign_in(
        servers: OAuthServers, mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    main = start_oauth_main(oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data", open_files=OPEN_FILES)
    mains.append(main)
    window = main.running.peer("sign-in window")
    invoke = expect_sign_in_card(window)
    port = urlsplit(invoke["signIn"]["redirectUri"]).port
    assert port is not None
    pid = main.running.proc.pid

    flood = IdleFlood(port, FLOOD)
    try:
        # Until main took in what it will of the flood: it closed most of it at once, or it holds
        # nearly every descriptor it may have (today's listener: held, each for 10 s), or it died.
        deadline = time.monotonic() + 60
        while flood.closed_by_peer(wait_s=0.1) < FLOOD - 200 and open_files_of(pid) < OPEN_FILES - 40 \
                and main.running.proc.poll() is None:
            assert time.monotonic() < deadline, (flood.closed, open_files_of(pid))
        try:
            late = main.running.peer("window after the flood")  # a new connection to main's ROUTER
        finally:
            assert main.running.proc.poll() is None, \
                f"main died ({main.running.proc.returncode}): {main.running.stderr.tail()[-300:]}"
        assert late.status()["pid"] == pid
        assert open_files_of(pid) < 200  # the listener holds a few of the flood, not main's descriptors
        # The ones it held are closed after its short header timeout, while the attacker keeps them.
        deadline = time.monotonic() + 30
        while flood.closed_by_peer(wait_s=0.1) < FLOOD:
            assert time.monotonic() < deadline, f"{len(flood.open)} idle connections still held"
    finally:
        flood.close()

    status = main.running.cli("auth", "status", "remote", "--json")
    report = json.loads(status.stdout)
    assert report["listenerRefused"] >= FLOOD - 200, report  # counted, for `elicitron auth status`
    # The first window sat silent through the flood and main let it go (5 s): a window attached now
    # gets the card replayed in its welcome and accepts it (else the redirect waits for an accept).
    main.running.peer("window after the flood ended").answer(invoke, "accept")
    browser.open(invoke["request"]["params"]["url"])
    assert browser.steps()[-1]["status"] == 200
    server_status(main.running.peer("window after the sign-in"), "remote", "ready")
    assert main.running.proc.poll() is None


FORGED = 1_000


def test_a_thousand_forged_redirects_add_a_line_or_two_to_the_log_and_are_counted(
        servers: OAuthServers, mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    main, window = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
    invoke = expect_sign_in_card(window)
    redirect_uri = invoke["signIn"]["redirectUri"]
    before = main.running.stderr.text().splitlines()

    for n in range(FORGED):
        status, body = _get(f"{redirect_uri}?code=stolen-{n}&state=forged-{n}")
        assert status == 400 and "does not match" in body
        window.pump()  # the window heartbeats through the flood: main lets a peer silent for 5 s go
    grown = main.running.stderr.text().splitlines()[len(before):]
    assert len(grown) <= 3, f"{len(grown)} lines, e.g. {grown[:3]}"

    report = json.loads(main.running.cli("auth", "status", "remote", "--json").stdout)
    assert report["forgedRedirects"] == FORGED
    window.pump()
    status_text = main.running.cli("auth", "status", "remote").stdout
    assert f"{FORGED} redirects of no sign-in" in status_text
    window.pump()
    window.answer(invoke, "accept")  # and the real redirect still signs in
    browser.open(invoke["request"]["params"]["url"])
    server_status(window, "remote", "ready")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_token_endpoint_on_another_origin_is_named_on_the_card_and_gets_nothing_unless_allowed(
        mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    with oauth_servers("--token-elsewhere") as servers:
        assert servers.elsewhere is not None
        main, window = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")
        invoke = expect_sign_in_card(window)
        hosts = {(h["role"], h["origin"], h.get("elsewhere", False)) for h in invoke["signIn"]["hosts"]}
        assert ("authorization", servers.issuer, False) in hosts
        assert ("token", servers.elsewhere, True) in hosts
        assert ("resource", urlsplit(servers.mcp)._replace(path="").geturl(), False) in hosts
        assert servers.elsewhere in invoke["request"]["params"]["message"]  # for windows that ignore `hosts`

        # A plain accept (a v1 window, or the box left unticked) allows nothing: refused, nothing sent.
        window.answer(invoke, "accept")
        server_status(window, "remote", "needs-sign-in", error_has="did not allow")
        assert servers.stats()["elsewhereTokenRequests"] == 0

        # The code goes there only once the card allowed that origin; the audit says so.
        assert main.running.cli("auth", "login", "remote").returncode == 0
        invoke = expect_sign_in_card(window)
        window.answer(invoke, "accept", {"allowHosts": [servers.elsewhere]})
        browser.open(invoke["request"]["params"]["url"])
        server_status(window, "remote", "ready")
        stats = servers.stats()
        assert stats["elsewhereCodes"] == 1 and stats["codeExchanges"] == 1
        assert "mcp:read" in _text(_call(window, "remote", "whoami"))
        audit = subprocess.run([sys.executable, "-m", "cli_process", "audit", "--json"], capture_output=True,
                               text=True, env=child_env(XDG_DATA_HOME=str(main.data_home)), cwd=ROOT, timeout=60,
                               check=True)
        decisions = [e.get("decision") for e in json.loads(audit.stdout) if e.get("kind") == "sign-in"]
        assert f"allow-hosts {servers.elsewhere}" in decisions, decisions


def test_a_registration_endpoint_on_another_origin_gets_nothing_until_its_own_card_allows_it(
        mains: list[OAuthMain], tmp_path: Path) -> None:
    browser = Browser(tmp_path)
    with oauth_servers("--registration-elsewhere") as servers:
        assert servers.elsewhere is not None
        main, window = start_with_window(mains, oauth_config(tmp_path, "remote", servers.mcp), tmp_path / "data")

        def registration_card() -> dict[str, Any]:
            invoke = expect_sign_in_card(window)
            params = invoke["request"]["params"]
            assert params["mode"] == "form" and servers.elsewhere in params["message"]
            assert params["requestedSchema"]["properties"]["allowHosts"]["items"]["enum"] == [servers.elsewhere]
            assert invoke["signIn"]["hosts"] == [{"role": "registration", "origin": servers.elsewhere,
                                                  "elsewhere": True}]
            return invoke

        # Accepted with the host left unticked: refused and held, nothing sent there.
        window.answer(registration_card(), "accept", {"allowHosts": []})
        server_status(window, "remote", "needs-sign-in", error_has="registration endpoint")
        error = _call(window, "remote", "whoami")["error"]  # held, like a decline: at once, no card
        assert "registration endpoint" in error["message"] and "elicitron auth login" in error["message"]
        assert servers.stats()["elsewhereRegistrations"] == 0

        # Ticked: registered there, then the sign-in card names it too.
        assert main.running.cli("auth", "login", "remote").returncode == 0
        window.answer(registration_card(), "accept", {"allowHosts": [servers.elsewhere]})
        invoke = expect_sign_in_card(window)
        assert invoke["request"]["params"]["mode"] == "url"
        assert {"role": "registration", "origin": servers.elsewhere, "elsewhere": True} in invoke["signIn"]["hosts"]
        window.answer(invoke, "accept")
        browser.open(invoke["request"]["params"]["url"])
        server_status(window, "remote", "ready")
        assert servers.stats()["elsewhereRegistrations"] == 1
