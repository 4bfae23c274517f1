"""Elicitron's main process: headless; MCP clients, the ZeroMQ broker, the audit log. Never imports Qt,
nor its peers' packages (cli_process, gateway_process, asker_process, renderer_process): shared/ only.

Rooms by responsibility, each __init__.py with the map of its modules:
wire/            the wire: main's sockets, who is attached, each topic to its handler, the Broker that
                 puts them together, --listen's tcp front, CURVE keys
servers/         the configured servers: one supervised mcp.Client each (ManagedServer), ServerDesk (the
                 servers as peers reach them), Reloader (msgReload) and what a reload reports
relay/           hosts' own relayed sessions (Relay), their upstream connections, host pipes, and merge/:
                 every server as one session (`<server>__<name>`), sans-IO, run by merged_relay.py
consent/         what the person is asked and answered: PendingRequests, ElicitationGate, Consent and its
                 rules, tool approval, programs' questions, when audit rows reach the store
store/           what outlives a request (remembered rules and approvals, the audit log) behind one async
                 interface, SQLite or PostgreSQL behind it
notify/          webhooks for new requests (the config's `notify`): Notifier, what a notice says per
                 format, the rate-limited retrying POSTs
oauth/           signing in to remote servers: OAuth per the MCP spec, tokens at rest, the loopback listener
policy/          the config's Cedar policy files: loaded, validated, deciding hosts' tool calls before
                 rules and cards (consent/tool_approval.py asks them first)

Top level: the composition and what every room uses.
app.py           MainApp: lock, signals, and the one function that builds every part and stops it
config.py        the mcpServers config (Claude Desktop format) and Elicitron's own keys; config_keys.py:
                 every key and what it means; config_values.py: the number checks every part uses
notifications.py the `notify` webhooks main runs now; published_connection.py: its connection file
auto_open.py     AutoOpen: a window for a request no window got
audit.py         what `elicitron audit` prints
lock.py          InstanceLock: one main per connection file
clock.py         the time expiry, liveness and backoff read (tests move a SettableClock)
tasks.py         Tasks: background work a part accounts for at close; Rerun: one run at a time, again if asked
private_files.py 0600 files in 0700 dirs, safe file names; paths.py: default locations
log_limiter.py   RateLimitedLog and cut(): logs a peer cannot flood or forge
capped_log.py    a child's stderr copied into its log file, capped in size (the --mcp-http child)
child.py         SupervisedChild: a peer process main runs and restarts (http_gateway.py's --mcp-http
                 gateway, web_child.py's --web web window)
device_mirror.py DeviceMirror: on a shared store, the web dir's devices.json and the store's paired
                 devices kept the same, so a device paired through one main is every main's
demo_server.py   the demo MCP server (the embedded default config), run as its own process
__main__.py      `python -m main_process ...`: exec's `python -m cli_process ...` (old host entries)
"""
