"""Names of the one-time reply channels and the fixed topics of wire contract v1."""

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
HOST_INFO = "msgHostInfo"  # extension: MCP hosts through `elicitron serve`
CANCEL_CALL = "msgCancelCall"  # extension
# Extension (both directions): one MCP session of a host with one server, relayed message by message.
MCP_RELAY = "msgMcpRelay"
MCP_CLOSE = "msgMcpClose"
ROTATE_HTTP_TOKEN = "msgRotateHttpToken"  # extension (issue 24): a new --mcp-http bearer token

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
