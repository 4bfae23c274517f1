"""Every fixed topic of the wire contract: its name, and its row in TABLE (body, direction, roles,
reply); and the one-time result channels.

What derives from TABLE: the codec's decoders (shared/codec.py), main's dispatch, role checks,
reserved response-channel names and who a broadcast reaches (main_process/wire/broker.py), the topics of
the peers' requests (shared/peer_requests.py); tests/test_protocol_doc.py holds PROTOCOL.md's §5 and
§6 tables to it. A new topic is its name and row here, its body in messages.py, and its handler
(main's `@handles` method, for a topic peers send).

The one-time result channels (`msgElicitationTransferResult-<uuid7>`, peer -> main) and the
response channels a peer names (main -> peer) are no fixed topics: RESULT_BODY and REPLY_BODY are
their bodies.
"""

from dataclasses import dataclass
from typing import Final, Literal, get_args

from shared.messages import (
    Ask,
    AuditRequest,
    AuthRequest,
    Body,
    Bye,
    CallTool,
    CancelCall,
    ChannelReply,
    ElicitationComplete,
    ElicitationDismiss,
    ElicitationInvoke,
    ElicitationResult,
    ErrorNotice,
    Heartbeat,
    Hello,
    ListChanged,
    McpClose,
    McpRelay,
    McpRequest,
    Notice,
    PeersUpdate,
    Progress,
    Reload,
    RevokeRules,
    Role,
    RotateHttpToken,
    RulesRequest,
    RulesUpdate,
    ServerControl,
    ServerPolicy,
    ServersUpdate,
    Shutdown,
    SignInRedirect,
    StatusRequest,
    Welcome,
    Withdraw,
)

RESULT_CHANNEL_PREFIX = "msgElicitationTransferResult-"

# peer -> main
HELLO = "hello"
HEARTBEAT = "heartbeat"
BYE = "bye"
CALL_TOOL = "msgMcpCallTool"
# Extension channels (documented in shared/PROTOCOL.md): controllers use them for the CLI.
STATUS = "msgStatus"
SHUTDOWN = "msgShutdown"
SERVER_CONTROL = "msgServerControl"
RELOAD = "msgReload"
SERVER_POLICY = "msgServerPolicy"
MCP_REQUEST = "msgMcpRequest"
AUTH = "msgAuth"  # sign-in extension: `elicitron auth status|login|logout`
SIGN_IN_REDIRECT = "msgSignInRedirect"  # sign-in extension: a pasted redirect address
RULES = "msgRules"  # extension (issue 11): list the rules
REVOKE_RULES = "msgRevokeRules"  # extension (issue 11)
ASK = "msgAsk"  # extension: a program asks the windows a question
WITHDRAW = "msgWithdraw"  # extension: the program takes its question back
CANCEL_CALL = "msgCancelCall"  # extension
# Extension (both directions): one MCP session of a host with one server, relayed message by message.
MCP_RELAY = "msgMcpRelay"
MCP_CLOSE = "msgMcpClose"
ROTATE_HTTP_TOKEN = "msgRotateHttpToken"  # extension (issue 24): a new --mcp-http bearer token
AUDIT = "msgAudit"  # extension (issue 37): `elicitron audit` reads main's store, whichever it is

# main -> peer
WELCOME = "welcome"
INVOKE = "msgElicitationTransferInvoke"
DISMISS = "msgElicitationTransferDismiss"
COMPLETE = "msgElicitationComplete"
SERVERS = "servers"
ERROR = "error"
PEERS = "peers"  # extension
NOTICE = "notice"  # extension
RULES_UPDATE = "rules"  # extension (issue 11): every rule, pushed to renderers on each change
PROGRESS = "msgProgress"  # extension: a call's progress, to its caller
LIST_CHANGED = "msgListChanged"  # extension: to host peers


Direction = Literal["to-main", "to-peer", "both"]
EVERY_ROLE: Final[frozenset[Role]] = frozenset(get_args(Role))
HOSTS: Final[frozenset[Role]] = frozenset({"host"})
# A host reaches servers only through its relayed sessions (§14), where consent decides its calls:
# the direct calls and reads are for the other roles (a window's call panel, the CLI).
CALLERS: Final[frozenset[Role]] = EVERY_ROLE - HOSTS
RENDERERS: Final[frozenset[Role]] = frozenset({"renderer"})
# The audit log may hold answered values (auditValues): for the CLI, not for windows or programs.
CONTROLLERS: Final[frozenset[Role]] = frozenset({"controller"})


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    body: type[Body]
    direction: Direction
    # To main: the roles main takes it from (from any other: `error` `bad-body`). To a peer: the
    # roles main sends it to, each attached peer of them, unless `addressed`.
    roles: frozenset[Role] = EVERY_ROLE
    addressed: bool = False  # to a peer: main sends it to the one peer it concerns (a request's sender)
    reply: bool = False  # to main: answered once, with a ChannelReply, on the body's `responseChannel`

    @property
    def to_main(self) -> bool:
        return self.direction != "to-peer"

    @property
    def to_peer(self) -> bool:
        return self.direction != "to-main"


def _to_main(name: str, body: type[Body], *, roles: frozenset[Role] = EVERY_ROLE, reply: bool = False) -> Topic:
    return Topic(name, body, "to-main", roles=roles, reply=reply)


def _to_peer(name: str, body: type[Body], *, roles: frozenset[Role] = EVERY_ROLE, addressed: bool = False) -> Topic:
    return Topic(name, body, "to-peer", roles=roles, addressed=addressed)


TABLE: Final[tuple[Topic, ...]] = (
    # PROTOCOL.md §5, peer -> main (hello is the one a peer sends before it is welcomed)
    _to_main(HELLO, Hello),
    Topic(HEARTBEAT, Heartbeat, "both"),
    Topic(BYE, Bye, "both"),
    _to_main(CALL_TOOL, CallTool, roles=CALLERS, reply=True),
    _to_main(MCP_REQUEST, McpRequest, roles=CALLERS, reply=True),
    _to_main(STATUS, StatusRequest, reply=True),
    _to_main(SHUTDOWN, Shutdown),
    _to_main(SERVER_CONTROL, ServerControl, reply=True),
    _to_main(RELOAD, Reload, reply=True),
    _to_main(ROTATE_HTTP_TOKEN, RotateHttpToken, reply=True),
    _to_main(SERVER_POLICY, ServerPolicy),
    _to_main(AUTH, AuthRequest, reply=True),
    _to_main(SIGN_IN_REDIRECT, SignInRedirect, reply=True),
    _to_main(RULES, RulesRequest, reply=True),
    _to_main(REVOKE_RULES, RevokeRules, reply=True),
    _to_main(AUDIT, AuditRequest, roles=CONTROLLERS, reply=True),
    _to_main(ASK, Ask, reply=True),
    _to_main(WITHDRAW, Withdraw),  # the answer comes on the msgAsk's channel
    _to_main(CANCEL_CALL, CancelCall),
    # Both ways; from a peer that is not a host, main answers in the session (§14), not at dispatch.
    Topic(MCP_RELAY, McpRelay, "both", addressed=True),
    Topic(MCP_CLOSE, McpClose, "both", addressed=True),
    # PROTOCOL.md §6, main -> peer
    _to_peer(WELCOME, Welcome, addressed=True),
    _to_peer(INVOKE, ElicitationInvoke, addressed=True),
    _to_peer(DISMISS, ElicitationDismiss, addressed=True),
    _to_peer(COMPLETE, ElicitationComplete),
    _to_peer(SERVERS, ServersUpdate),
    _to_peer(ERROR, ErrorNotice, addressed=True),
    _to_peer(PEERS, PeersUpdate),
    _to_peer(NOTICE, Notice),
    _to_peer(RULES_UPDATE, RulesUpdate, roles=RENDERERS),
    _to_peer(PROGRESS, Progress, addressed=True),
    _to_peer(LIST_CHANGED, ListChanged, roles=HOSTS),
)

RESULT_BODY: Final = ElicitationResult  # on a one-time result channel, peer -> main
REPLY_BODY: Final = ChannelReply  # on a response channel a peer named, main -> peer

TO_MAIN: Final[dict[str, Topic]] = {topic.name: topic for topic in TABLE if topic.to_main}
TO_PEER: Final[dict[str, Topic]] = {topic.name: topic for topic in TABLE if topic.to_peer}
SENT_AS: Final[dict[type[Body], str]] = {topic.body: name for name, topic in TO_MAIN.items()}
"""The topic a body a peer sends goes on: each has a body type of its own."""
REQUESTS: Final[frozenset[str]] = frozenset(name for name, topic in TO_MAIN.items() if topic.reply)
"""Topics main answers on the body's response channel: a refusal of one is the refusal of the
request waited on."""


def new_uuid7() -> str:
    # Imported on first use: uuid6 reads its own package metadata when imported, which every
    # short-lived peer that never mints one (`elicitron ask`, the CLI) would pay for nothing.
    from uuid6 import uuid7

    return str(uuid7())


def new_result_channel() -> str:
    """A fresh one-time reply channel for one elicitation."""
    return RESULT_CHANNEL_PREFIX + new_uuid7()


def is_result_channel(topic: str) -> bool:
    return topic.startswith(RESULT_CHANNEL_PREFIX)
