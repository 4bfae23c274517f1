"""The wire: main's ZeroMQ side of the wire contract (shared/PROTOCOL.md), from the sockets to each
topic's handler. Who is attached, what every peer hears, and the broker that puts it together.

broker.py          Broker: the pending requests and gate over the wire, each topic to its handler group
broker_ports.py    Publisher and the ports servers, consent and relayed sessions are made with
wire.py            Wire: main's sockets, who is attached, what every peer hears (the modules below)
router_sockets.py  FrameSockets (what the wire needs of its sockets; tests hand it plain frames) and
                   RouterSockets: the ROUTER sockets (CURVE per listener), frames in and out, the drain
attachments.py     Attachments: who is attached, sends to peers, liveness, the coalesced `peers` list
greeter.py         Greeter: `hello` and `welcome`, the one topic a peer sends before it is attached
inbound.py         Inbound: every message a peer sends, rate limits, then each message to its handler
topic_routes.py    @handles and each topic's route
replies.py         answers on a peer's response channel: at once, later (a task), or progress first
*_topics.py        what each topic does, by area: peer_ (liveness), call_ (tool calls), control_ (status,
                   servers, reload, shutdown), consent_ (rules), question_ (msgAsk), relay_ (msgMcpRelay)
peers.py           PeerTable (who is attached, slots per role) and RateLimiter (per connection)
peer_calls.py      the tool calls peers make through main (msgMcpCallTool), each with its cancel
open_calls.py      the calls open for peers, answered while the socket is open when main stops
tcp_front.py       --listen's tcp port in front of libzmq: caps per address and in total, the reserve
zmtp_handshake.py  where a ZMTP 3 handshake stands, read from the bytes main's side sends
curve_keys.py      CURVE keypair and allow-list for remote windows
"""
