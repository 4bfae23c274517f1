"""main_process.config: the mcpServers file a user already has for other MCP hosts."""

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from main_process import config
from main_process.config import (
    DEFAULT_ELICITATION_TIMEOUT_S,
    Config,
    HttpServerConfig,
    StdioServerConfig,
    load_config,
)
from main_process.oauth.settings import OAuthSettings
from shared.errors import ConfigError, ElicitronError


def write(tmp_path: Path, data: Any, name: str = "mcp.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2), encoding="utf-8")
    return path


def servers(**entries: Any) -> dict[str, Any]:
    return {"mcpServers": entries}


# ---- good files -----------------------------------------------------------------------------


def test_stdio_entry_with_everything(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        servers(
            shop={
                "command": "uvx",
                "args": ["shop-server", "--port", "0"],
                "env": {"SHOP_TOKEN": "s3cret", "EMPTY": ""},
                "cwd": "/srv/shop",
                "elicitationTimeoutSeconds": 30,
            }
        ),
    )
    cfg = load_config(path)
    assert cfg == Config(
        servers={
            "shop": StdioServerConfig(
                name="shop",
                command="uvx",
                args=["shop-server", "--port", "0"],
                env={"SHOP_TOKEN": "s3cret", "EMPTY": ""},
                cwd="/srv/shop",
                elicitation_timeout_s=30.0,
                tool_timeout_s=330.0,  # defaults to the elicitation timeout + 300
            )
        },
        source=str(path),
        path=path,
    )
    assert isinstance(cfg.servers["shop"].elicitation_timeout_s, float)


def test_stdio_entry_with_only_a_command_gets_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, servers(a={"command": "server-a"})))
    assert cfg.servers["a"] == StdioServerConfig(
        name="a",
        command="server-a",
        args=[],
        env={},
        cwd=None,
        elicitation_timeout_s=DEFAULT_ELICITATION_TIMEOUT_S,
    )
    assert DEFAULT_ELICITATION_TIMEOUT_S == 600.0  # the contract's 10 minutes


def test_url_entry_with_headers(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        servers(
            remote={
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": "Bearer x"},
                "elicitationTimeoutSeconds": 2.5,
            },
            plain={"url": "http://127.0.0.1:8000/mcp"},
        ),
    )
    cfg = load_config(path)
    assert cfg.servers == {
        "remote": HttpServerConfig(
            name="remote",
            url="https://mcp.example.com/mcp",
            headers={"Authorization": "Bearer x"},
            elicitation_timeout_s=2.5,
            tool_timeout_s=302.5,
            oauth=OAuthSettings(enabled=False),  # a static Authorization header: no sign-in
        ),
        "plain": HttpServerConfig(name="plain", url="http://127.0.0.1:8000/mcp"),
    }


def test_several_servers_keep_file_order(tmp_path: Path) -> None:
    cfg = load_config(
        write(tmp_path, servers(z={"command": "z"}, a={"url": "http://a/"}, m={"command": "m"}))
    )
    assert list(cfg.servers) == ["z", "a", "m"]


def test_keys_other_hosts_use_are_ignored(tmp_path: Path) -> None:
    data = {
        "globalShortcut": "Ctrl+M",
        "mcpServers": {"a": {"command": "a", "disabled": False, "autoApprove": [], "type": "stdio"}},
    }
    cfg = load_config(write(tmp_path, data))
    assert cfg.servers["a"] == StdioServerConfig(name="a", command="a")


def test_an_empty_mcp_servers_object_is_fine(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, servers())).servers == {}


def test_a_utf8_file_with_non_ascii_text_loads(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, servers(café={"command": "café-server", "args": ["—"]})))
    assert cfg.servers["café"].args == ["—"]  # type: ignore[union-attr]


# ---- the default file -----------------------------------------------------------------------


def test_embedded_default_when_no_path_and_no_default_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(config, "default_config_path", lambda: tmp_path / "absent" / "mcp.json")
    cfg = load_config(None)
    assert list(cfg.servers) == ["demo"]
    demo = cfg.servers["demo"]
    assert isinstance(demo, StdioServerConfig)
    assert demo.command == sys.executable
    assert demo.args == [str(config.DEMO_SERVER_SCRIPT)]
    assert Path(demo.args[0]).is_file()
    assert "embedded default" in cfg.source


def test_the_default_file_is_used_when_it_exists(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = write(tmp_path, servers(mine={"command": "mine"}))
    monkeypatch.setattr(config, "default_config_path", lambda: path)
    cfg = load_config(None)
    assert list(cfg.servers) == ["mine"]
    assert cfg.source == str(path)


def test_a_broken_default_file_is_an_error_not_the_demo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = write(tmp_path, "{")
    monkeypatch.setattr(config, "default_config_path", lambda: path)
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(None)


def test_default_config_path_is_named_mcp_json() -> None:
    path = config.default_config_path()
    assert path.name == "mcp.json"
    assert "elicitron" in str(path.parent)


# ---- bad files ------------------------------------------------------------------------------


def test_an_explicit_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_malformed_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "line 3" in message
    assert "not valid JSON" in message


@pytest.mark.parametrize(
    "data",
    [
        [],
        "just a string",
        3,
        {},
        {"servers": {}},
        {"mcpServers": []},
        {"mcpServers": None},
        {"mcpServers": "a"},
    ],
    ids=["list", "string", "number", "empty", "other key", "servers list", "servers null", "servers string"],
)
def test_no_mcp_servers_object_is_an_error_naming_the_file(tmp_path: Path, data: Any) -> None:
    path = write(tmp_path, json.dumps(data))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert "mcpServers" in str(info.value)


BAD_ENTRIES = {
    "neither command nor url": {"args": ["x"]},
    "empty object": {},
    "entry is a string": "uvx shop-server",
    "entry is a list": ["uvx", "shop-server"],
    "entry is null": None,
    "command not a string": {"command": ["uvx", "shop"]},
    "empty command": {"command": ""},
    "args not a list": {"command": "uvx", "args": "shop-server --port 0"},
    "args with a number": {"command": "uvx", "args": ["--port", 0]},
    "env not an object": {"command": "uvx", "env": ["A=1"]},
    "env value not a string": {"command": "uvx", "env": {"PORT": 8080}},
    "env value null": {"command": "uvx", "env": {"A": None}},
    "cwd not a string": {"command": "uvx", "cwd": 1},
    "url not a string": {"url": 42},
    "url ws scheme": {"url": "ws://example.com/mcp"},
    "url file scheme": {"url": "file:///tmp/sock"},
    "url without scheme": {"url": "example.com/mcp"},
    "headers not an object": {"url": "https://x/", "headers": ["Authorization: x"]},
    "header value not a string": {"url": "https://x/", "headers": {"X-Retries": 3}},
    "timeout zero": {"command": "uvx", "elicitationTimeoutSeconds": 0},
    "timeout negative": {"command": "uvx", "elicitationTimeoutSeconds": -5},
    "timeout string": {"command": "uvx", "elicitationTimeoutSeconds": "60"},
    "timeout boolean": {"url": "https://x/", "elicitationTimeoutSeconds": True},
    "timeout null": {"command": "uvx", "elicitationTimeoutSeconds": None},
}


@pytest.mark.parametrize("entry", list(BAD_ENTRIES.values()), ids=list(BAD_ENTRIES))
def test_each_bad_entry_names_the_file_and_the_entry(tmp_path: Path, entry: Any) -> None:
    path = write(tmp_path, servers(good={"command": "fine"}, shop=entry))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "mcpServers.shop" in message
    assert "mcpServers.good" not in message


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({}, '"command"'),
        ({"command": "x", "args": "y"}, '"args"'),
        ({"command": "x", "env": {"A": 1}}, '"env"'),
        ({"command": "x", "cwd": 3}, '"cwd"'),
        ({"url": "ftp://x"}, '"url"'),
        ({"url": "https://x/", "headers": {"A": 1}}, '"headers"'),
        ({"command": "x", "elicitationTimeoutSeconds": 0}, '"elicitationTimeoutSeconds"'),
    ],
)
def test_the_error_names_the_bad_key(tmp_path: Path, entry: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, servers(shop=entry)))
    assert needle in str(info.value)


@pytest.mark.parametrize("name", ["", "tab\there", "new\nline"], ids=["empty", "tab", "newline"])
def test_unprintable_server_names_are_refused(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, {"mcpServers": {name: {"command": "x"}}})
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert "mcpServers." in str(info.value)


def test_config_error_is_an_elicitron_error() -> None:
    assert issubclass(ConfigError, ElicitronError)


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b'{"mcpServers": {"caf\xe9": {"command": "x"}}}')  # Latin-1
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("literal", ["NaN", "Infinity"])
def test_a_non_finite_timeout_is_refused(tmp_path: Path, literal: str) -> None:
    text = '{"mcpServers": {"shop": {"command": "x", "elicitationTimeoutSeconds": LITERAL}}}'
    path = write(tmp_path, text.replace("LITERAL", literal))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "mcpServers.shop" in str(info.value)
