"""Wire contract v1 (DESIGN.md section 3) and its extensions, as a peer written from the page sees
it: topics, error codes, limits, and the shape of every body a peer may send.

The shapes are decoded with msgspec, which like any lenient reader skips unknown keys.
"""

from typing import Any, Literal

import msgspec

# peer -> main
HELLO = "hello"
HEARTBEAT = "heartbeat"
BYE = "bye"
CALL_TOOL = "msgMcpCallTool"
RESULT_PREFIX = "msgElicitationTransferResult-"
# extensions, peer -> main
STATUS = "msgStatus"
SHUTDOWN = "msgShutdown"
SERVER_CONTROL = "msgServerControl"
RELOAD = "msgReload"
SERVER_POLICY = "msgServerPolicy"
MCP_REQUEST = "msgMcpRequest"
ROTATE_HTTP_TOKEN = "msgRotateHttpToken"
AUTH = "msgAuth"
SIGN_IN_REDIRECT = "msgSignInRedirect"
RULES = "msgRules"
REVOKE_RULES = "msgRevokeRules"
ASK = "msgAsk"
WITHDRAW = "msgWithdraw"
CANCEL_CALL = "msgCancelCall"
MCP_RELAY = "msgMcpRelay"
MCP_CLOSE = "msgMcpClose"
AUDIT = "msgAudit"  # from `controller` only

# main -> peer
WELCOME = "welcome"
INVOKE = "msgElicitationTransferInvoke"
DISMISS = "msgElicitationTransferDismiss"
COMPLETE = "msgElicitationComplete"
SERVERS = "servers"
ERROR = "error"
PEERS = "peers"  # extension
NOTICE = "notice"  # extension
MAIN_TOPICS = frozenset({WELCOME, HEARTBEAT, BYE, INVOKE, DISMISS, COMPLETE, SERVERS, ERROR, PEERS, NOTICE,
                         "rules", "msgProgress", "msgListChanged", MCP_RELAY, MCP_CLOSE})  # section 6

# Topics whose valid bodies do something (detach, stop main, stop a server, decline everything, run a
# tool or a request, answer with a status, rotate a token, sign in, revoke rules, ask a question, open
# or close a relayed session): a fuzzing peer sends them only bodies that cannot be valid.
ACTING_TOPICS = (BYE, SHUTDOWN, SERVER_CONTROL, RELOAD, SERVER_POLICY, CALL_TOOL, MCP_REQUEST, STATUS,
                 ROTATE_HTTP_TOKEN, AUTH, SIGN_IN_REDIRECT, RULES, REVOKE_RULES, ASK, WITHDRAW, MCP_RELAY, MCP_CLOSE)
# Topics whose valid bodies get a fixed answer from a window (role "renderer", as the fuzzing peer is):
# a msgCancelCall naming none of the sender's calls in flight is ignored.
FIXED_ANSWER_TOPICS = (CANCEL_CALL,)
# Topics section 5 takes from controllers only: from a window (as the fuzzing peer is), bad-body whatever the body.
CONTROLLER_TOPICS = (AUDIT,)
PEER_TOPICS = (HELLO, HEARTBEAT, *ACTING_TOPICS, *FIXED_ANSWER_TOPICS, *CONTROLLER_TOPICS)
# What main may send a welcomed peer besides errors while nothing is being elicited.
BACKGROUND_TOPICS = frozenset({HEARTBEAT, PEERS, SERVERS, NOTICE})

CONTRACT_CODES = frozenset({
    "bad-protocol", "bad-token", "not-attached", "unknown-topic", "bad-body", "too-large",
    "unknown-channel", "already-answered", "not-recipient", "invalid-content",
    # A peer sending faster than main serves has messages dropped, and is told so at most once a second.
    "rate-limited",
    # hello refused: as many peers are attached as main allows.
    "too-many-peers",
})
MAX_ID_CHARS = 200  # hello's token, window and name (PROTOCOL.md section 3)
MAX_BODY = 1 << 20  # main's default limit on a body: larger ones are refused with too-large
MAX_NESTING_DEPTH = 128  # levels of maps and arrays in a body, its own map level 1 (PROTOCOL.md section 1)
MCP_METHODS = ("tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list",
               "prompts/get")


class Hello(msgspec.Struct):
    protocol: int
    token: str
    window: str
    name: str = ""
    role: Literal["renderer", "controller", "host", "asker"] = "renderer"


class Empty(msgspec.Struct):
    pass


class Result(msgspec.Struct):
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


class CallTool(msgspec.Struct, rename="camel"):
    server: str
    tool: str
    response_channel: str
    arguments: dict[str, Any] = {}


class McpRequest(msgspec.Struct, rename="camel"):
    server: str
    method: Literal["tools/list", "resources/list", "resources/templates/list", "resources/read",
                    "prompts/list", "prompts/get"]
    response_channel: str
    params: dict[str, Any] = {}


class Replying(msgspec.Struct, rename="camel"):  # msgStatus, msgReload
    response_channel: str


class ServerControl(msgspec.Struct, rename="camel"):
    server: str
    action: Literal["start", "stop", "restart"]
    response_channel: str


class ServerPolicy(msgspec.Struct, rename="camel"):
    server: str
    decline_all: bool


class Auth(msgspec.Struct, rename="camel"):
    server: str
    action: Literal["status", "login", "logout"]
    response_channel: str


class SignInRedirect(msgspec.Struct, rename="camel"):
    server: str
    elicitation_id: str
    url: str
    response_channel: str


class RevokeRules(msgspec.Struct, rename="camel"):
    response_channel: str
    ids: list[str] = []
    revoke_all: bool = False
    server: str | None = None
    asker: str | None = None


class Audit(msgspec.Struct, rename="camel"):
    response_channel: str
    limit: int = 50
    server: str | None = None


class Asker(msgspec.Struct):
    name: str
    pid: int | None = None
    machine: str | None = None


class Ask(msgspec.Struct, rename="camel"):
    response_channel: str
    params: dict[str, Any]
    asker: Asker
    timeout_seconds: float | None = None


class McpRelay(msgspec.Struct):
    session: str
    message: bytes
    server: str | None = None
    headers: dict[str, str] | None = None


class McpClose(msgspec.Struct):
    session: str


SHAPES: dict[str, type] = {
    HELLO: Hello, HEARTBEAT: Empty, BYE: Empty, SHUTDOWN: Empty, CALL_TOOL: CallTool, MCP_REQUEST: McpRequest,
    STATUS: Replying, RELOAD: Replying, SERVER_CONTROL: ServerControl, SERVER_POLICY: ServerPolicy,
    ROTATE_HTTP_TOKEN: Replying, AUTH: Auth, SIGN_IN_REDIRECT: SignInRedirect, RULES: Replying,
    REVOKE_RULES: RevokeRules, ASK: Ask, WITHDRAW: Replying, CANCEL_CALL: Replying,
    MCP_RELAY: McpRelay, MCP_CLOSE: McpClose, AUDIT: Audit,
}


def is_result_channel(topic: str) -> bool:
    return topic.startswith(RESULT_PREFIX)


def is_good_channel(name: str) -> bool:
    """A `responseChannel` as section 5 allows: printable ASCII without spaces, at most 200
    characters, not a main -> peer topic, not a result channel."""
    return (0 < len(name) <= MAX_ID_CHARS and all("!" <= c <= "~" for c in name)
            and name not in MAIN_TOPICS and not is_result_channel(name))


def shape_of(topic: str) -> type:
    """The body shape of a peer -> main topic (a known topic or a result channel)."""
    return Result if is_result_channel(topic) else SHAPES[topic]
