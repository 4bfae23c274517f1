"""Units of sign-in that need no network: the "oauth" config object, the token file, the PKCE
check (and the metadata-less 2025-03-26 path), and the quiet SDK log."""

import asyncio
import json
import logging
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import msgspec
import pytest
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata

from main_process.config import HttpServerConfig, parse_config
from main_process.consent.pending import PendingRequests
from main_process.oauth.provider import SDK_FLOW_LOGGER, QuietFlowErrors, check_pkce
from main_process.oauth.token_store import FileBackend, TokenStore
from shared.errors import ConfigError, InvalidContentError, SignInError, SignInRefusedError
from shared.messages import SignInInfo


def _server(entry: dict[str, object]) -> HttpServerConfig:
    config = parse_config({"mcpServers": {"s": {"url": "https://example.com/mcp", **entry}}}, "test")
    server = config.servers["s"]
    assert isinstance(server, HttpServerConfig)
    return server


def test_oauth_config_defaults_and_keys() -> None:
    assert _server({}).oauth.enabled  # a 401 is enough: no config needed
    assert not _server({"headers": {"Authorization": "Bearer static"}}).oauth.enabled
    assert not _server({"oauth": False}).oauth.enabled
    settings = _server({"oauth": {"clientId": "id", "clientSecret": "s", "scopes": "repo read:org"}}).oauth
    assert settings.scopes == ("repo", "read:org") and settings.auth_method == "client_secret_basic"
    assert "'s'" not in repr(settings)  # the secret never shows in a log line


@pytest.mark.parametrize("oauth, problem", [
    ({"clientSecret": "s"}, "needs \"oauth.clientId\""),
    ({"tokenEndpointAuthMethod": "private_key_jwt", "clientId": "x"}, "tokenEndpointAuthMethod"),
    ({"clientMetadataUrl": "http://example.com/c.json"}, "https://"),
    ({"scope": "x"}, "unknown keys"),
    ("yes", "must be an object"),
])
def test_bad_oauth_config_is_a_clear_error(oauth: object, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(")):
        _server({"oauth": oauth})


def test_the_token_file_is_0600_in_a_0700_dir_and_keeps_each_server(tmp_path: Path) -> None:
    path = tmp_path / "data" / "elicitron" / "oauth-tokens.json"
    store = TokenStore(FileBackend(path))

    async def run() -> dict[str, object]:
        await store.update("a", "https://a/mcp", tokens={"access_token": "A"})
        await store.update("b", "https://b/mcp", tokens={"access_token": "B"})
        await store.update("a", "https://a/mcp", tokens=None)
        return await store.load("b", "https://b/mcp")

    assert asyncio.run(run())["tokens"] == {"access_token": "B"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "tokens" not in json.loads(path.read_text())["a"]
    assert asyncio.run(store.load("b", "https://elsewhere/mcp")) == {}  # made for another URL: ignored


def _metadata(**fields: Any) -> OAuthMetadata:
    return OAuthMetadata.model_validate({"issuer": "https://as.example.com", "response_types_supported": ["code"],
                                         "authorization_endpoint": "https://as.example.com/authorize",
                                         "token_endpoint": "https://as.example.com/token", **fields})


def test_no_metadata_at_all_is_the_2025_03_26_fallback_signed_in_with_s256() -> None:
    assert check_pkce(None, None, None) is True  # legacy: the card says so, the SDK sends S256
    assert check_pkce(_metadata(code_challenge_methods_supported=["plain", "S256"]), None, None) is False


@pytest.mark.parametrize("methods, problem", [
    (None, "lists no PKCE methods"),
    ([], "lists no PKCE methods"),
    (["plain"], "offers PKCE only with plain, not S256"),
])
def test_metadata_without_s256_is_refused_in_one_line(methods: list[str] | None, problem: str) -> None:
    fields = {} if methods is None else {"code_challenge_methods_supported": methods}
    with pytest.raises(SignInError, match=problem) as refused:
        check_pkce(_metadata(**fields), None, "https://as.example.com")
    assert "\n" not in str(refused.value) and "https://as.example.com" in str(refused.value)


def test_an_authorization_server_named_by_resource_metadata_must_publish_its_own() -> None:
    resource = ProtectedResourceMetadata.model_validate({"resource": "https://mcp.example.com/mcp",
                                                         "authorization_servers": ["https://as.example.com"]})
    with pytest.raises(SignInError, match="publishes no metadata"):
        check_pkce(None, resource, "https://as.example.com")


def test_the_sign_in_card_says_legacy_metadata_only_when_it_is() -> None:
    plain = SignInInfo(authorization_server="localhost", scopes=[])
    assert b"legacyMetadata" not in msgspec.json.encode(plain)
    legacy = msgspec.json.decode(msgspec.json.encode(SignInInfo(authorization_server="localhost",
                                                                legacy_metadata=True)), type=SignInInfo)
    assert legacy.legacy_metadata is True


def test_the_sdk_traceback_per_failed_attempt_is_dropped_or_rate_limited() -> None:
    quiet = QuietFlowErrors()

    def record(error: Exception) -> logging.LogRecord:
        info = (type(error), error, None)
        return logging.LogRecord(SDK_FLOW_LOGGER, logging.ERROR, __file__, 1, "OAuth flow error", None, info)

    assert not quiet.filter(record(SignInError("no S256")))  # SignIn says it in one line
    assert not quiet.filter(record(OAuthFlowError("token endpoint said no")))
    assert quiet.filter(record(RuntimeError("a bug")))  # unexpected: the traceback, once
    assert not quiet.filter(record(RuntimeError("a bug")))
    assert quiet.filter(record(RuntimeError("another bug")))
    assert quiet.filter(logging.LogRecord(SDK_FLOW_LOGGER, logging.INFO, __file__, 1, "other", None, None))


class _Cards:
    """PendingRequests as SignIn uses it: what it was asked to show."""

    def __init__(self) -> None:
        self.opened: list[dict[str, Any]] = []

    def open(self, request: Any, options: Any, resolve: Any) -> Any:
        self.opened.append({"request": request, "sign_in": options.sign_in})
        return type("Pending", (), {"channel": "card-1"})()


def test_a_metadata_less_sign_in_card_carries_legacy_metadata_and_says_so(tmp_path: Path) -> None:
    from main_process.oauth.sign_in import LEGACY_NOTE, SignIn

    async def run(legacy: bool) -> dict[str, Any]:
        cards = _Cards()
        sign_in = SignIn(_server({}), TokenStore(FileBackend(tmp_path / "tokens.json")),
                         requests=lambda: cast(PendingRequests, cards),
                         on_needed=lambda needed: None, publish_complete=lambda eid: None)
        redirect = await sign_in._bind_listener()
        sign_in.provider.legacy_metadata = legacy
        try:
            await sign_in._ask(f"https://example.com/authorize?state=s&redirect_uri={redirect}")
        finally:
            assert sign_in._listener is not None
            sign_in._listener.close()
        return cards.opened[0]

    legacy = asyncio.run(run(True))
    assert legacy["sign_in"].legacy_metadata is True
    assert legacy["request"].params.message.endswith(LEGACY_NOTE)
    plain = asyncio.run(run(False))
    assert plain["sign_in"].legacy_metadata is False and LEGACY_NOTE not in plain["request"].params.message


def test_the_same_sign_in_failure_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from main_process.oauth.sign_in import SignIn

    async def run() -> None:
        sign_in = SignIn(_server({}), TokenStore(FileBackend(tmp_path / "tokens.json")),
                         requests=lambda: cast(PendingRequests, _Cards()),
                         on_needed=lambda needed: None, publish_complete=lambda eid: None)
        for _ in range(5):
            sign_in._failed(SignInError("the authorization server offers PKCE only with plain, not S256"))
        sign_in._failed(SignInError("something else"))

    with caplog.at_level(logging.WARNING, logger="main_process.oauth.sign_in"):
        asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records if r.name == "main_process.oauth.sign_in"]
    assert len(lines) == 2 and "not S256" in lines[0] and "something else" in lines[1]


def test_origins_are_compared_without_case_path_or_default_port() -> None:
    from main_process.oauth.hosts import origin, sign_in_hosts

    assert origin("HTTPS://Login.Example.com:443/authorize?x=1") == "https://login.example.com"
    assert origin("http://127.0.0.1:8080/token") == "http://127.0.0.1:8080"
    assert origin("http://[::1]:9/t") == "http://[::1]:9"
    hosts = sign_in_hosts(issuer="https://as.example.com/", authorization="https://as.example.com/authorize",
                          token="https://AS.example.com:443/token", registration="https://evil.example.net/register",
                          resource="https://mcp.example.com/mcp")
    assert [(h.role, h.origin, h.elsewhere) for h in hosts] == [
        ("authorization", "https://as.example.com", False), ("token", "https://as.example.com", False),
        ("registration", "https://evil.example.net", True), ("resource", "https://mcp.example.com", False)]


@pytest.mark.parametrize("content", [{"allowHosts": "https://x"}, {"allowHosts": [1]}, {"other": []},
                                     {"allowHosts": ["https://x"] * 9}, {"allowHosts": [""]}])
def test_a_sign_in_accept_carries_only_a_short_list_of_origins(content: dict[str, Any]) -> None:
    from main_process.oauth.hosts import allowance

    with pytest.raises(InvalidContentError, match="allowHosts"):
        allowance(content)
    assert allowance(None) is None and allowance({}) is None
    assert allowance({"allowHosts": ["https://x", "https://x"]}) == {"allowHosts": ["https://x"]}


def test_a_refresh_token_never_goes_to_a_token_endpoint_elsewhere_that_was_not_allowed(tmp_path: Path) -> None:
    from main_process.oauth.sign_in import SignIn

    async def run() -> None:
        sign_in = SignIn(_server({}), TokenStore(FileBackend(tmp_path / "tokens.json")),
                         requests=lambda: cast(PendingRequests, _Cards()),
                         on_needed=lambda needed: None, publish_complete=lambda eid: None)
        provider = sign_in.provider
        provider.context.oauth_metadata = _metadata(token_endpoint="https://tokens.elsewhere.net/token")
        provider.context.client_info = OAuthClientInformationFull(client_id="c", client_secret="s",
                                                                  redirect_uris=None)
        provider.context.current_tokens = OAuthToken(access_token="a", refresh_token="r")
        with pytest.raises(SignInRefusedError, match="tokens.elsewhere.net"):
            await provider._refresh_token()
        provider.allowed_origins = {"https://tokens.elsewhere.net"}
        assert str((await provider._refresh_token()).url) == "https://tokens.elsewhere.net/token"

    asyncio.run(run())


def test_the_redirect_listener_caps_connections_per_source_and_in_total_and_drops_silent_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from main_process.oauth import loopback

    monkeypatch.setattr(loopback, "HEADER_TIMEOUT_S", 0.5)

    async def run() -> None:
        listener = loopback.RedirectListener()
        uri = await listener.start()
        port = int(urlsplit(uri).port or 0)
        listener.expect("right")

        async def connect(source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))

        async def until(holds: Callable[[], bool]) -> None:
            async with asyncio.timeout(10):
                while not holds():
                    await asyncio.sleep(0)  # a turn of the loop: the listener's callbacks run

        async def closed(reader: asyncio.StreamReader) -> bool:
            """The listener closed it without an answer (a reset, or an empty EOF)."""
            try:
                async with asyncio.timeout(10):
                    return await reader.read() == b""
            except ConnectionResetError:
                return True

        held = [await connect("127.0.0.1") for _ in range(loopback.MAX_PER_SOURCE)]
        await until(lambda: listener.held == loopback.MAX_PER_SOURCE)
        reader, _ = await connect("127.0.0.1")  # one more from the same address: reset at once
        assert await closed(reader)
        held += [await connect("127.0.0.2") for _ in range(loopback.MAX_CONNECTIONS - loopback.MAX_PER_SOURCE)]
        await until(lambda: listener.held == loopback.MAX_CONNECTIONS)
        reader, _ = await connect("127.0.0.3")  # another address, but the total is reached
        assert await closed(reader)
        assert listener.counts.refused_connections == 2
        for silent, _ in held:  # none sent a request: each closed at the header timeout
            assert await closed(silent)
        await until(lambda: listener.held == 0)
        assert listener.counts.refused_connections == 2 + loopback.MAX_CONNECTIONS
        listener.accepted()  # the card's accept, then the real redirect: it still gets in
        reader, writer = await connect("127.0.0.1")
        writer.write(b"GET /callback?code=c&state=right HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.read()).startswith(b"HTTP/1.1 200 OK")
        assert (await listener.result(5)).code == "c"

    asyncio.run(run())


def test_a_redirect_before_the_cards_accept_is_held_and_answered_by_the_cards_answer() -> None:
    from main_process.oauth import loopback

    async def run() -> None:
        listener = loopback.RedirectListener()
        uri = await listener.start()
        listener.expect("right")
        replies: list[tuple[int, str]] = []
        listener.deliver(f"{uri}?code=early&state=right", lambda status, text: replies.append((status, text)))
        assert listener.holding and replies == []  # no page yet: the card decides
        listener.deliver(f"{uri}?code=x&state=forged", lambda status, text: replies.append((status, text)))
        assert replies[0][0] == 400 and listener.holding  # a forged one is still refused at once
        listener.accepted()
        assert replies[1] == (200, loopback.SIGNED_IN_PAGE) and not listener.listening
        assert (await listener.result(5)).code == "early"

        declined = loopback.RedirectListener()
        uri = await declined.start()
        declined.expect("right")
        pages: list[tuple[int, str]] = []
        declined.deliver(f"{uri}?code=early&state=right", lambda status, text: pages.append((status, text)))
        declined.fail(SignInError("sign-in to s was declined"))
        assert pages == [(403, ("Elicitron did not finish this sign-in: sign-in to s was declined. "
                                 "You can close this tab."))]
        with pytest.raises(SignInError, match="declined"):
            await declined.result(5)

        unanswered = loopback.RedirectListener()
        uri = await unanswered.start()
        unanswered.expect("right")
        unanswered.deliver(f"{uri}?code=early&state=right", lambda status, text: pages.append((status, text)))
        with pytest.raises(SignInError, match="card was not answered"):
            await unanswered.result(0.05)
        assert pages[-1][0] == 403 and "card was not answered" in pages[-1][1]

    asyncio.run(run())


def test_after_the_accept_a_redirect_is_answered_at_once() -> None:
    from main_process.oauth import loopback

    async def run() -> None:
        listener = loopback.RedirectListener()
        uri = await listener.start()
        listener.expect("right")
        listener.accepted()
        replies: list[tuple[int, str]] = []
        listener.deliver(f"{uri}?code=c&state=right", lambda status, text: replies.append((status, text)))
        assert replies == [(200, loopback.SIGNED_IN_PAGE)] and not listener.holding
        assert (await listener.result(5)).code == "c"

    asyncio.run(run())
