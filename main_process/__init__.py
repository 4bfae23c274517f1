"""Elicitron's main process: headless; MCP clients, the ZeroMQ broker, the audit log. Never imports Qt,
nor its peers' packages (cli_process, gateway_process, asker_process, renderer_process): shared/ only.

app.py           MainApp: lock, signals, and the one function that builds every part and stops it
server_desk.py   ServerDesk: the configured servers as peers reach them (calls, control, sign-in)
reloader.py      Reloader: msgReload; auto_open.py AutoOpen: a window for a request no window got
notifications.py the `notify` webhooks main runs now; published_connection.py: its connection file
wire.py          Wire: main's sockets, who is attached, what every peer hears (the modules below)
broker.py        Broker: the pending requests and gate over the wire, each topic to its handler group
router_sockets.py RouterSockets: the ROUTER sockets (CURVE per listener), frames in and out, the drain
attachments.py   Attachments: who is attached, sends to peers, liveness, the coalesced `peers` list
greeter.py       Greeter: hello and welcome; inbound.py Inbound: rate limits, then each message to
                 its handler
topic_routes.py  @handles and each topic's route; replies.py: answers on a peer's response channel
*_topics.py      what each topic does, by area: peer_ (liveness), call_ (tool calls), control_ (status,
                 servers, reload, shutdown), consent_ (rules), question_ (msgAsk), relay_ (msgMcpRelay)
broker_ports.py  Publisher and the ports servers, consent and relayed sessions are made with
pending.py       PendingRequests: the life of every request a window answers (one close path)
consent.py       Consent: rules and remembered answers; tool_approval.py ToolApproval: hosts' tool calls
elicitation_gate.py ElicitationGate: what becomes of every elicitation first (rules, route, screening)
peers.py         PeerTable (who is attached, slots per role) and RateLimiter (per connection)
servers.py       ManagedServer: one supervised mcp.Client per configured server (the face of the next)
server_session.py ServerSession: a server's mcp.Client connection, its watch and list changes
server_calls.py  ServerCalls: a server's tool calls and read-only requests; server_era.py ProtocolEra:
                 its protocol era (protocolMode auto); server_elicitation.py ServerElicitation: its
                 session's elicitations after the gate; server_faults.py: error replies, one-line errors
config.py        the mcpServers config (Claude Desktop format) and Elicitron's own keys
reload_report.py what a reload did: servers restarted, updated in place (toolApproval), settings, notes
store/           the store: what outlives a request (remembered rules and approvals, the audit log)
                 behind one async interface, SQLite or PostgreSQL behind it (store/__init__.py has its map)
audit_writer.py  when the audit rows reach the store; audit.py: what `elicitron audit` prints
notify/          webhooks for new requests (the config's `notify`): notifier.py (Notifier), its config
                 keys, what a notice says per format, the rate-limited retrying POSTs, the web
                 window's URL (notify/__init__.py has its map)
policy/          the config's Cedar policy files: loaded, validated, deciding hosts' tool calls before
                 rules and cards (policy/__init__.py has its map)
relay.py         Relay: hosts' own relayed sessions with a server (consent decided on the way);
                 host_pipes.py: a local serve's stdin/stdout, which main then reads itself
merge/           MergedSession: every server as one session for a host (`<server>__<name>`), sans-IO;
                 merged_relay.py runs it, one relayed session per server (merge/__init__.py has its map)
lock.py          InstanceLock: one main per connection file
server_identity.py which program a configured server is (what its rules are bound to)
curve_keys.py    CURVE keypair and allow-list for remote windows
private_files.py 0600 files in 0700 dirs, safe file names; paths.py: default locations
log_limiter.py   RateLimitedLog and cut(): logs a peer cannot flood or forge
capped_log.py    a child's stderr copied into its log file, capped in size (the --mcp-http child)
child.py         SupervisedChild: a peer process main runs and restarts (http_gateway.py's --mcp-http
                 gateway, web_child.py's --web web window)
demo_server.py   the demo MCP server (the embedded default config), run as its own process
__main__.py      `python -m main_process ...`: exec's `python -m cli_process ...` (old host entries)
"""
