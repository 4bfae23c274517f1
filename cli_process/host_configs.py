"""MCP hosts' own config files, read for `elicitron config import`: where Claude Desktop, Cursor and
VS Code keep them, and their entries in Elicitron's `mcpServers` form.

Claude Desktop and Cursor use `{"mcpServers": {name: {command, args, env} | {url, headers}}}`, as
Elicitron does. VS Code uses `{"servers": {name: {type, command, args, env, url, headers}}}` (its
`mcp.json`), or the same under `"mcp"` in its `settings.json`. An entry that is Elicitron itself
(`elicitron serve`) is left out: main would start a gateway to itself.
"""

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.errors import ConfigError


@dataclass(frozen=True)
class HostConfig:
    host: str  # "Claude Desktop", "Cursor", "VS Code"
    path: Path


@dataclass
class Imported:
    """What one host file holds: entries Elicitron can run, and the ones left out with why."""

    source: HostConfig
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def usual_places(home: Path | None = None, cwd: Path | None = None) -> list[HostConfig]:
    """Where each host keeps its config on this platform, most common first (they may not exist)."""
    home = home or Path.home()
    cwd = cwd or Path.cwd()
    if sys.platform == "darwin":
        support = home / "Library" / "Application Support"
        claude, code_user = support / "Claude", support / "Code" / "User"
    elif sys.platform == "win32":
        appdata = Path(os.environ.get("APPDATA", home / "AppData" / "Roaming"))
        claude, code_user = appdata / "Claude", appdata / "Code" / "User"
    else:
        config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        claude, code_user = config / "Claude", config / "Code" / "User"
    return [
        HostConfig("Claude Desktop", claude / "claude_desktop_config.json"),
        HostConfig("Cursor", home / ".cursor" / "mcp.json"),
        HostConfig("Cursor", cwd / ".cursor" / "mcp.json"),
        HostConfig("VS Code", code_user / "mcp.json"),
        HostConfig("VS Code", cwd / ".vscode" / "mcp.json"),
    ]


def found_configs(home: Path | None = None, cwd: Path | None = None) -> list[HostConfig]:
    return [place for place in usual_places(home, cwd) if place.path.is_file()]


def guess_host(path: Path) -> HostConfig:
    """A file named on the command line: which host's it is, from its name and folder."""
    if path.name == "claude_desktop_config.json":
        return HostConfig("Claude Desktop", path)
    if path.parent.name == ".cursor":
        return HostConfig("Cursor", path)
    if path.parent.name in (".vscode", "User"):
        return HostConfig("VS Code", path)
    return HostConfig("an MCP host", path)


def read_host_config(source: HostConfig) -> Imported:
    """Its entries as `mcpServers` entries; ConfigError when it is not a host config at all."""
    try:
        data = json.loads(source.path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{source.path}: cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{source.path}: not a JSON file ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("mcp"), dict):  # VS Code's settings.json
        data = data["mcp"]
    entries = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise ConfigError(f"{source.path}: no \"mcpServers\" (Claude Desktop, Cursor) or \"servers\" (VS Code) "
                          "object in it")
    found = Imported(source)
    for name, entry in entries.items():
        why = _unusable(entry)
        if why is not None:
            found.skipped[name] = why
        else:
            found.servers[name] = _as_mcp_servers_entry(entry)
    return found


def _unusable(entry: Any) -> str | None:
    if not isinstance(entry, dict) or not (isinstance(entry.get("command"), str) or isinstance(entry.get("url"), str)):
        return "neither a command nor a url"
    if entry.get("disabled") is True:
        return "disabled in the host"
    if is_elicitron(entry):
        return "this is Elicitron itself (`elicitron serve`)"
    if entry.get("type") == "sse":
        return "SSE transport (Elicitron speaks stdio and streamable HTTP)"
    if "${input:" in json.dumps(entry):
        return "it asks VS Code for an input (${input:…}); put the value in by hand"
    return None


def is_elicitron(entry: dict[str, Any]) -> bool:
    command = Path(str(entry.get("command", ""))).name
    args = [str(arg) for arg in entry.get("args", []) if isinstance(arg, str)]
    return "serve" in args and (command == "elicitron" or "cli_process" in args)


def _as_mcp_servers_entry(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ("url", "headers") if isinstance(entry.get("url"), str) else ("command", "args", "env", "cwd")
    return {key: entry[key] for key in keys if key in entry}
