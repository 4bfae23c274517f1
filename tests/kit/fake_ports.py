"""What main's app would give the broker, faked for the tests that drive it in-process
(test_broker_inproc.py over inproc sockets, test_main_core.py over plain frames): one server, tool
calls echoed back, the extensions those tests do not reach answered with an error saying so."""

from main_process.wire.broker import ProgressTo, Receivers, ReplyTo
from main_process.wire.peers import Peer as AttachedPeer
from shared.messages import (
    Ask,
    AuthRequest,
    CallError,
    CallTool,
    ChannelReply,
    McpClose,
    McpRelay,
    McpRequest,
    RevokeRules,
    ServerControl,
    ServerInfo,
    ServerPolicy,
    SignInRedirect,
    Withdraw,
)

TOKEN = "inproc-token"
NOT_FAKED = ChannelReply(error=CallError(code=-32601, message="not in the test's fake ports"))
FORM = {"mode": "form", "message": "Name?", "requestedSchema": {
    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}


class FakePorts:
    """What main's app would give the broker: one server, tool calls echoed back."""

    def __init__(self) -> None:
        self.unseen = 0
        self.shutdowns = 0

    def server_infos(self) -> list[ServerInfo]:
        return [ServerInfo(name="demo", status="ready", tools=["echo"])]

    def call_tool(self, request: CallTool, caller: AttachedPeer, reply: ReplyTo,
                  progress: ProgressTo | None = None) -> None:
        reply(ChannelReply(result={"content": [{"type": "text", "text": f"{request.tool} from {caller.window}"}]}))

    def mcp_request(self, request: McpRequest, reply: ReplyTo) -> None:
        reply(ChannelReply(result={"tools": []}))

    async def control_server(self, request: ServerControl) -> ChannelReply:
        return ChannelReply()

    async def reload(self, config: str | None = None) -> ChannelReply:
        return ChannelReply()

    def set_server_policy(self, policy: ServerPolicy, caller: AttachedPeer) -> None:
        pass

    def request_shutdown(self) -> None:
        self.shutdowns += 1

    def no_window_attached(self, requests: object) -> None:
        self.unseen += 1

    # The extensions these tests do not reach: an error says so should one ever be asked.
    async def auth(self, request: AuthRequest) -> ChannelReply:
        return NOT_FAKED

    async def sign_in_redirect(self, request: SignInRedirect) -> ChannelReply:
        return NOT_FAKED

    def rules_report(self) -> ChannelReply:
        return ChannelReply(rules=[])

    async def revoke_rules(self, request: RevokeRules, by: str) -> ChannelReply:
        return NOT_FAKED

    def ask(self, asker_id: bytes, request: Ask, reply: ReplyTo) -> None:
        reply(NOT_FAKED)

    def withdraw(self, asker_id: bytes, request: Withdraw) -> None:
        pass

    def asker_gone(self, asker_id: bytes) -> None:
        pass

    def from_peer(self, peer: AttachedPeer, body: McpRelay) -> None:
        pass

    def close_from_peer(self, peer: AttachedPeer, body: McpClose) -> None:
        pass

    def peer_gone(self, routing_id: bytes) -> None:
        pass

    def receivers(self) -> Receivers:
        return Receivers(calls=self, servers=self, server_policy=self.set_server_policy, reload=self.reload,
                         shutdown=self.request_shutdown, rules=self, questions=self, relay=self)
