"""The configured servers: one supervised mcp.Client each, as peers reach them, and reloading them.

servers.py           ManagedServer: one supervised mcp.Client per configured server (the face of the next)
server_session.py    ServerSession: a server's mcp.Client connection, its watch and list changes
server_calls.py      ServerCalls: a server's tool calls and read-only requests
server_era.py        ProtocolEra: a server's protocol era (protocolMode auto)
server_elicitation.py ServerElicitation: its session's elicitations after the gate
server_faults.py     error replies peers get, one line for an exception
server_identity.py   which program a configured server is (what its rules are bound to)
stdio_transport.py   main's own stdio connection to a server for the SDK's Client (a line cap, linear reading,
                     writes straight to stdin)
server_desk.py       ServerDesk: the configured servers as peers reach them (calls, control, sign-in)
reloader.py          Reloader: msgReload, the config re-read and the servers started, stopped, restarted
reload_report.py     what a reload did: servers restarted, updated in place (toolApproval), settings, notes
"""
