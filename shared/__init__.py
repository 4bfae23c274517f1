"""Elicitron's protocol package: wire types, codec, channel names, connection file, schema checks.

Depends only on msgspec, uuid6 and platformdirs (and pyzmq, which every peer has, for
peer_socket.py and curve_options' constants) so that main, renderer and third-party peers can
share it without pulling in Qt or mcp. PROTOCOL.md beside this file is the wire protocol
written out for third parties.

messages.py         every wire body as a msgspec Struct (camelCase on the wire)
codec.py            frames <-> messages: the one decode point, and the checked encodes
channels.py         the topic table (each topic's name, body, direction, roles and reply: the codec,
                    main's dispatch, the peers' requests and PROTOCOL.md's §5/§6 tables derive from
                    it) and the one-time result channels
errors.py           every exception Elicitron raises, WireCode and RpcCode
schema.py           MCP's restricted elicitation schema: what is accepted, answer validation
connection_file.py  how peers find main (endpoint, token, pid, CURVE keys); private directories
peer.py             PeerCore: a peer's side of the contract with no I/O (hello, liveness, reattach,
                    replies by channel, errors by WireCode) and curve_options(); every peer's core
peer_socket.py      MainSocket: the DEALER under that core (file, CURVE, sends, drain), for every adapter
peer_requests.py    every request answered on a fresh response channel, built once; Answer, its waiter
peer_asyncio.py     AsyncPeer: that core on an asyncio loop (the gateways' link, the asker, a web page)
peer_blocking.py    BlockingPeer: that core in a blocking wait loop (the CLI's controller)
window_core.py      WindowCore: a window's cards with no I/O (shown, queued oldest first by
                    card_queue.py, waiting in another window, the welcome's replay, answers asked
                    again); the Qt window and each web page render its effects
relay_pump.py       RelayPump: one host's relayed session, nothing lost while main is away (sans-IO;
                    in serve, or in main for a host whose pipes it holds)
host_pipes.py       the handover of a local serve's stdio to main and the records main sends back
lines.py            newline-delimited JSON-RPC on descriptors (stdio): split, write, oversized lines
url_safety.py       inspect_url(): where a link really goes and whether it may open (both windows)
grant_text.py       what a grant covers, in one line (approval cards, `elicitron rules`, Remembered panels)
denial_reason.py    clean_reason(): the reason typed on an approval's deny, one capped line (windows, main)
web_devices.py      the web window's paired devices as on disk: the reader for `devices`, `status`
command_name.py     elicitron_command(): how to type `elicitron` here (on PATH, or .venv/bin/elicitron), for
                    messages that tell the user to run it
person.py           person_at_machine(): `ana@laptop`, a window's default name
addresses.py        is_loopback(): whether a host stays on this machine (`--mcp-http`'s check)
descriptors.py      raise_soft_limit(): the open-file limit raised toward the hard one at start;
                    DescriptorBudget: the reserve a listener keeps before it takes a connection
http_guard.py       ConnectionGuard: an HTTP server's connections capped and timed out (uvicorn,
                    only for the HTTP gateway and the web window, which import it); accept_log.py:
                    their accept errors (EMFILE) logged once per interval
"""

PROTOCOL_VERSION = 1
