"""`elicitron config import [PATH]`: the servers of a Claude Desktop, Cursor or VS Code config added
to Elicitron's own (`<user config dir>/elicitron/mcp.json`), instead of copying `mcp.json` by hand.

It shows what it would add and writes only with --yes (or a "y" on a terminal). Names already in
Elicitron's config stay as they are. With no config file yet, Elicitron runs the embedded demo
server; the first file written keeps it as an entry (unless --no-demo, said in so many words),
because a config file replaces the embedded default and the demo would otherwise silently leave.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cli_process.command import EXIT_FAILED
from cli_process.host_configs import Imported, found_configs, guess_host, read_host_config, usual_places
from main_process.config import DEMO_SERVER_SCRIPT, default_config_path, parse_config
from main_process.private_files import write_private
from shared.command_name import elicitron_command
from shared.errors import ConfigError
from shared.terminal_text import for_terminal

DEMO_DROPPED = ("the embedded demo server is left out (--no-demo): it runs only while there is no config file, "
                "and this file replaces it")


def add_config_arguments(sub: Any) -> None:
    p = sub.add_parser("config", help="Elicitron's config: import a host's servers (Claude Desktop, Cursor, VS Code)")
    actions = p.add_subparsers(dest="config_action", required=True)
    imp = actions.add_parser("import", help="add the servers of a Claude Desktop, Cursor or VS Code config",
                             description="Read an MCP host's config (PATH, else the usual places of Claude Desktop, "
                                         "Cursor and VS Code), show what it would add to Elicitron's config, and "
                                         "write it with --yes.")
    imp.add_argument("path", nargs="?", type=Path, metavar="PATH", help="the host's config file")
    imp.add_argument("--config", type=Path, help="Elicitron's config to add to (default: the user config dir's mcp.json)")
    imp.add_argument("--yes", action="store_true", help="write it without asking")
    imp.add_argument("--no-demo", action="store_true",
                     help="a new config file leaves out the embedded demo server (kept by default)")
    imp.set_defaults(func=cmd_config_import)


def cmd_config_import(args: argparse.Namespace) -> int:
    sources = [guess_host(args.path)] if args.path is not None else found_configs()
    if not sources:
        looked = ", ".join(str(place.path) for place in usual_places())
        print(f"elicitron: no MCP host config found (looked in {looked}); name one: "
              f"`{elicitron_command()} config import PATH`", file=sys.stderr)
        return EXIT_FAILED
    target: Path = args.config or default_config_path()
    document = _read_target(target)
    servers: dict[str, Any] = document.setdefault("mcpServers", {})
    new_file = not target.exists()
    about_demo = ""
    if new_file and args.no_demo:
        about_demo = f"  note: {DEMO_DROPPED}"
    elif new_file:
        servers["demo"] = {"command": sys.executable, "args": [str(DEMO_SERVER_SCRIPT)]}
        about_demo = "  demo: kept (the embedded demo server, written into the file)"
    lines: list[str] = []
    added: list[str] = []
    for found in (read_host_config(source) for source in sources):
        lines += _describe(found, servers, added, target)
    lines.append(f"to {target}{' (a new file)' if new_file else ''}:")
    lines += [about_demo] if about_demo else []
    lines.append(f"  {len(added)} server{'s' if len(added) != 1 else ''} to add")
    print("\n".join(for_terminal(line) for line in lines))
    if not added:
        print("nothing to add")
        return 0
    parse_config(document, str(target))  # what is written is a config main accepts
    if not (args.yes or _confirmed()):
        print(f"nothing written; to write it: `{elicitron_command()} config import"
              f"{' ' + str(args.path) if args.path else ''} --yes`")
        return 0
    write_private(target, json.dumps(document, indent=2) + "\n")  # 0600: entries may carry API keys in env
    print(f"wrote {target}: added {', '.join(added)}; a running main starts them with `{elicitron_command()} reload`")
    return 0


def _read_target(target: Path) -> dict[str, Any]:
    if not target.exists():
        return {"mcpServers": {}}
    try:
        document = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{target}: cannot read Elicitron's config to add to it: {exc}") from None
    parse_config(document, str(target))  # a broken config is not made worse
    return dict(document)


def _describe(found: Imported, servers: dict[str, Any], added: list[str], target: Path) -> list[str]:
    lines = [f"from {found.source.host} ({found.source.path}):"]
    for name, entry in found.servers.items():
        if name in servers:
            lines.append(f"  = {name:16} already in {target.name}: kept as it is")
            continue
        servers[name] = entry
        added.append(name)
        lines.append(f"  + {name:16} {_summary(entry)}")
    lines += [f"  - {name:16} left out: {why}" for name, why in found.skipped.items()]
    return lines


def _summary(entry: dict[str, Any]) -> str:
    """The command line or URL; of `env` and `headers` only the names (they often hold secrets)."""
    if "url" in entry:
        text = str(entry["url"])
        if entry.get("headers"):
            text += f"  (headers: {', '.join(map(str, entry['headers']))})"
        return text
    text = " ".join([str(entry["command"]), *map(str, entry.get("args", []))])
    if entry.get("env"):
        text += f"  (env: {', '.join(map(str, entry['env']))})"
    return text


def _confirmed() -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input("write it? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False
