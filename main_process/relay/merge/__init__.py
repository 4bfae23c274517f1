"""The merged session: one host's MCP session with every server at once (`elicitron serve`, `/mcp`).

The host speaks JSON-RPC with one server, Elicitron; behind it, one relayed session per configured
server (main_process/relay/merged_relay.py: the host's own connection to that server, in main's relay)
does the work, as a transparent aggregating proxy does it (MetaMCP, mcp-proxy). main runs it for a
relayed session opened with server `EVERY_SERVER` (PROTOCOL.md §14). Sans-IO: messages in, messages
out, and a timer (`call_later`); the server sessions are given by `open_server` (in tests: plain fakes).
Each module's docstring says its part of what goes where.

session.py    MergedSession, the face: the servers, each message read and handed to its part; `ping`
handshake.py  `initialize` and `server/discover` at every server, one answer; servers that join late
catalog.py    the lists (`<server>__<name>`, clashes left out), where a name or URI leads
router.py     the host's requests by name, URI, task id, to everyone or by guess; answers back
fanout.py     one request to several servers, its answers (and pages) gathered, time limits
asks.py       the servers' requests to the host: ids both ways, cancellations, progress
listen.py     `subscriptions/listen` (2026-07-28) merged; changed lists announced to the host
state.py      Shared: the state every part reads; records.py what it keeps per server and request;
              wire.py the messages the merger writes itself; templates.py URI template matching;
              versions.py Elicitron's serverInfo and the handshake versions it knows
"""

from main_process.relay.merge.fanout import REQUEST_TIMEOUT_S
from main_process.relay.merge.handshake import HANDSHAKE_TIMEOUT_S
from main_process.relay.merge.listen import LISTEN_ACK_TIMEOUT_S
from main_process.relay.merge.records import Upstream
from main_process.relay.merge.session import MergedSession

__all__ = ["HANDSHAKE_TIMEOUT_S", "LISTEN_ACK_TIMEOUT_S", "REQUEST_TIMEOUT_S", "MergedSession", "Upstream"]
