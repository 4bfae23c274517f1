"""Elicitron's MCP gateway: `elicitron serve` (stdio) and main's `--mcp-http` child.

An MCP host (Claude Desktop, Cursor, VS Code, a Python agent) talks MCP to this process; this
process is one peer of main with role "host", and main opens the host's own session with each
server (PROTOCOL.md §14): the host's JSON-RPC is relayed, main decides only consent on the way. It
imports `shared/` (and `mcp` only for HTTP), never `main_process`: it is written against
shared/PROTOCOL.md alone.

cli.py           the `serve` arguments (cli_process adds them) and `python -m gateway_process`
relay_stdio.py   one host over stdio until it closes our stdin: `serve --server NAME` relays one
                 server's session, `serve` the session with every server that main merges
                 (main_process/relay/merge/: `<server>__<name>`); both on host pipes with a local main
relayed.py       RelayedSession: a pump (shared/relay_pump.py) over a host peer's link to main
handover.py      serve's side of host pipes: a local main holds the host's stdio, serve takes it back
http_app.py      streamable HTTP for main's --mcp-http: bearer token, Origin/Host checks,
                 /mcp (every server) and /mcp/<server>
                 (its connections bounded by shared/http_guard.py: caps, idle ones evicted, TLS)
http_relay.py    HTTP for relayed sessions: handshake-era sessions on the SDK's transport, 2026-07-28 POSTs
http_sessions.py the child's MCP sessions bounded: per host and in all, an idle one gives way
http_peers.py    the sessions of one host share a peer of main (PeerPool)
http_hosts.py    which Host names the child serves; whether an address leaves this machine
http_logs.py     the child's log: a repeated message once per 10 s, long lines cut
attachment.py    MainAttachment: the link to main attached on demand, the wait for starting servers
link.py          MainLink: the DEALER to main (hello, heartbeat, reattach, replies, pushes)
link_events.py   LinkEvents: what a gateway hears from main through its link: on_pushed, on_detached
starter.py       start main in the background when none runs (`launch --no-window`)
print_config.py  `serve --print-config`: entries for Claude Desktop, Cursor, VS Code
"""
