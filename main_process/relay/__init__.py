"""The relay: hosts' own relayed sessions with a server (extension msgMcpRelay), message by message,
consent decided on the way; or with every server at once, merged.

relay.py           Relay: a host's own session with one server, through main
input_rounds.py    InputRounds: a session's 2026-07-28 input rounds (`input_required`), windows' answers joined
upstream.py        StdioUpstream: a relayed session's own connection to a stdio server, raw JSON-RPC
upstream_http.py   HttpUpstream: the same for a `url` server (MCP streamable HTTP)
merged_relay.py    MergedRelays: a host's one session with every server, one relayed session per server
merge/             MergedSession: every server as one session (`<server>__<name>`), sans-IO; run by
                   merged_relay.py (merge/__init__.py has its map)
host_pipes.py      HostPipes: a local serve's stdin/stdout handed to main, which then reads them itself
progress.py        HostProgress: main's own progress notifications to a host whose request waits on a card
host_cancels.py    HostCancels: whose call a 2025-era server's elicitation was for, when the host cancels one
"""
