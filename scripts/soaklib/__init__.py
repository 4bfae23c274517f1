"""The soak test (issue 5, "Load"): scripts/soak drives a real main with many elicitations while
windows come and go, then checks that every request was decided exactly once and that the audit
log agrees.

    driver.py  one event loop: a controller issuing tool calls, renderers answering, churn; its peers
               are the testing kit's WirePeer (tests/kit), read without blocking
    verify.py  what must hold afterwards, and the audit log's agreement

`--hosts N` (issue 39): N host sessions ended every way a host ends one, and what main holds after.

    hosts.py         the run: main with `--mcp-http`, windows, sessions at once, before/after, audit
    sessions.py      one row per way a session ends (stdio and HTTP, `--server` and merged)
    stdio_host.py    a raw stdio host of `elicitron serve` (stdlib only)
    host_proc.py     that host in a process of its own, to be SIGKILLed
    http_host.py     a raw streamable-HTTP host (stdlib only)
    hosts_window.py  the scripted windows that answer the sessions' elicitations
    tiny_server.py   the stdlib MCP server main starts per session (fast to start)
    probe.py         a process's RSS, descriptors and children, from /proc
"""
