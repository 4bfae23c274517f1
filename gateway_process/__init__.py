"""Elicitron's MCP gateway: `elicitron serve` (stdio) and main's `--mcp-http` child.

An MCP host (Claude Desktop, Cursor, VS Code, a Python agent) talks MCP to this process; this
process is one peer of main with role "host" and reaches every configured server through main, so
the servers' elicitations land in Elicitron's windows and the servers outlive the host. It imports
`shared/` and `mcp`, never `main_process`: it is written against shared/PROTOCOL.md alone.

cli.py          the `serve` arguments (main's CLI adds them) and `python -m gateway_process`
stdio.py        one host over stdio until it closes our stdin: attaches and answers `initialize`
                (handshake.py) while the SDK loads on a thread; stdio_host.py then serves on the
                SDK; stdio_wire.py the transport
                (JSON-RPC errors for garbage and oversized lines)
http_app.py     streamable HTTP for main's --mcp-http: bearer token, Origin/Host checks,
                /mcp and /mcp/<server>, one host peer per MCP session
proxy.py        GatewayServer: the low-level mcp Server whose handlers forward through main
session.py      HostSession (one host = one peer of main) and HostCall (one tools/call)
attachment.py   MainAttachment: the link to main attached on demand, the wait for starting servers
forward.py      driving a call in the host's era: progress, elicitations to the host, results
catalog.py      tools, resources, prompts of the exposed servers, every page, renamed
names.py        `<server>__<tool>` naming and the combined instructions (pure)
link.py         MainLink: the DEALER to main (hello, heartbeat, reattach, replies, pushes)
starter.py      start main in the background when none runs (`launch --no-window`)
print_config.py `serve --print-config`: entries for Claude Desktop, Cursor, VS Code
"""
