"""`elicitron serve --print-config [--http] [--server NAME]`: the exact entries to paste.

Claude Desktop and Cursor read `{"mcpServers": {...}}`; VS Code reads `{"servers": {...}}` with a
`type`; a Python agent gets a script for `mcp.Client`. The stdio entry names this installation's
`elicitron` by its absolute path (hosts do not see the venv's PATH) and, in `env`, this session's
display and runtime dir (hosts start servers with only HOME, LOGNAME, PATH, SHELL, TERM and USER:
with these, a main that serve starts opens its windows on this display, and serve finds the main
this desktop started at its default path). The HTTP entry needs main running with `--mcp-http` and
carries its token, which changes on every main start: such an entry is printed again then.
"""

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from shared.connection_file import read_connection_file
from shared.errors import ConnectionFileError
from shared.merged_names import Exposure

EXIT_FAILED = 1
# What serve and the windows of a main it starts need from a desktop session, when set here.
DESKTOP_ENV = ("DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR")

PYTHON_AGENT = """import asyncio

from mcp import Client, StdioServerParameters

ELICITRON = StdioServerParameters({params})


async def main() -> None:
    async with Client(ELICITRON) as client:
        listing = await client.list_tools()
        print(", ".join(tool.name for tool in listing.tools))


asyncio.run(main())"""


def stdio_entry(exposure: Exposure, config: Path | None, connection: str | None) -> dict[str, Any]:
    script = Path(sys.executable).with_name("elicitron")
    command = str(script) if script.exists() else (shutil.which("elicitron") or "")
    args = ["serve"] if command else ["-m", "cli_process", "serve"]
    command = command or sys.executable
    if exposure.only is not None:
        args += ["--server", exposure.only]
    if config is not None:
        args += ["--config", str(config.resolve())]
    if connection is not None:
        args += ["--connection", str(Path(connection).resolve())]
    env = {name: os.environ[name] for name in DESKTOP_ENV if os.environ.get(name)}
    return {"command": command, "args": args, **({"env": env} if env else {})}


def python_agent(entry: dict[str, Any]) -> str:
    """A script for `mcp.Client` on the stdio entry (JSON strings, lists and objects are Python)."""
    params = ", ".join(f"{key}={json.dumps(value)}" for key, value in entry.items())
    return PYTHON_AGENT.format(params=params)


def http_entry(connection: Path, exposure: Exposure) -> dict[str, Any]:
    """Raises ConnectionFileError when main is not running or not serving HTTP."""
    info = read_connection_file(connection)
    if not info.mcp_http_url or not info.mcp_http_token:
        raise ConnectionFileError("main is not serving MCP over HTTP; start it with "
                                  "`elicitron main --mcp-http [HOST:]PORT`")
    url = info.mcp_http_url if exposure.only is None else f"{info.mcp_http_url}/{exposure.only}"
    return {"url": url, "headers": {"Authorization": f"Bearer {info.mcp_http_token}"}}


def print_config(connection: Path, exposure: Exposure, *, http: bool, config: Path | None,
                 explicit_connection: str | None) -> int:
    name = exposure.only or "elicitron"
    try:
        entry = http_entry(connection, exposure) if http else stdio_entry(exposure, config, explicit_connection)
    except ConnectionFileError as exc:
        print(f"elicitron: {exc}", file=sys.stderr)
        return EXIT_FAILED
    vscode = {"type": "http" if http else "stdio", **entry}
    print("Claude Desktop, Cursor (mcpServers in claude_desktop_config.json / .cursor/mcp.json):")
    print(json.dumps({"mcpServers": {name: entry}}, indent=2))
    print()
    print("VS Code (servers in .vscode/mcp.json):")
    print(json.dumps({"servers": {name: vscode}}, indent=2))
    print()
    if not http:
        print("A Python agent (mcp.Client; save as agent.py, run it with a Python that has mcp):")
        print(python_agent(entry))
    else:
        print("The token is a secret: it lets any program on this machine use your servers. It changes on every "
              "main start and on `elicitron serve --rotate-token`: paste the entry again then (the stdio entry, "
              "without --http, needs no token).", file=sys.stderr)
    return 0
