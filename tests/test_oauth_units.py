"""Units of sign-in that need no network: the "oauth" config object and the token file."""

import asyncio
import json
import stat
from pathlib import Path

import pytest

from main_process.config import HttpServerConfig, parse_config
from main_process.oauth.token_store import FileBackend, TokenStore
from shared.errors import ConfigError


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
