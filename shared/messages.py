"""Wire contract v1 message bodies as msgspec Structs (camelCase on the wire).

MCP payloads inside (`params`, `content`, `result`) stay MCP's own JSON shape, held as plain
dicts, so this package never depends on `mcp`.
"""

from typing import Annotated, Any, Literal

import msgspec

MAX_ID_CHARS = 200  # window ids, names, tokens and response channels: enough for any uuid or label
ShortText = Annotated[str, msgspec.Meta(max_length=MAX_ID_CHARS)]

Action = Literal["accept", "decline", "cancel"]
ServerStatus = Literal["starting", "ready", "restarting", "failed", "stopped"]
DismissReason = Literal["answered", "cancelled", "expired", "server-closed"]
Role = Literal["renderer", "controller", "host", "asker"]
"""renderer: a window (gets requests, answers them); controller: the CLI; host: an `elicitron serve`
gateway speaking for an MCP host; asker: a program asking a question (`elicitron ask`)."""
RequestKind = Literal["elicitation", "approval", "question", "sign-in"]


class Body(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of every message body."""


# ---- peer -> main -------------------------------------------------------------------------


class Hello(Body):
    protocol: int
    token: ShortText
    window: ShortText
    name: ShortText = ""
    role: Role = "renderer"


class Heartbeat(Body):
    pass


class Bye(Body):
    pass


class ElicitationResult(Body):
    """Body of `msgElicitationTransferResult-<uuid7>`."""

    action: Action
    content: dict[str, Any] | None = None


class CallTool(Body):
    """Body of `msgMcpCallTool`."""

    server: str
    tool: str
    response_channel: ShortText
    arguments: dict[str, Any] = {}
    progress: bool = False  # extension: forward the server's progress as `msgProgress`


class StatusRequest(Body):
    """Extension `msgStatus`: main answers on `responseChannel` with a `ChannelReply.status`."""

    response_channel: ShortText


class Shutdown(Body):
    """Extension `msgShutdown`: a controller asks main to stop its servers and exit."""

    pass


class ServerControl(Body):
    """Extension `msgServerControl`: start, stop or restart one configured server; answered on
    `responseChannel` with `ChannelReply.control` (or `error`)."""

    server: str
    action: Literal["start", "stop", "restart"]
    response_channel: ShortText


class Reload(Body):
    """Extension `msgReload`: re-read the config; answered with `ChannelReply.reload` (or `error`)."""

    response_channel: ShortText


class ServerPolicy(Body):
    """Extension `msgServerPolicy`: for this main session, answer every further elicitation of
    `server` with decline (`declineAll: true`) or stop doing so (`false`)."""

    server: str
    decline_all: bool


McpMethod = Literal[
    "tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get"
]


class McpRequest(Body):
    """Extension `msgMcpRequest`: one read-only MCP request to a server; answered on
    `responseChannel` with `{result: <the MCP result JSON>}` or `{error: {code, message}}`.
    `params` is the MCP request's params JSON (`{uri}` for resources/read, `{name, arguments}`
    for prompts/get, `{}` or `{cursor}` for the lists)."""

    server: str
    method: McpMethod
    response_channel: ShortText
    params: dict[str, Any] = {}


# ---- main -> peer -------------------------------------------------------------------------


class ServerInfo(Body):
    """`tools` is required so it is always on the wire (the contract lists it as present)."""

    name: str
    status: ServerStatus
    tools: list[str]
    error: str | None = None
    instructions: str | None = None  # extension: the server's `instructions` from its handshake


class ElicitationRequest(Body):
    server: str
    params: dict[str, Any]


class AskerInfo(Body):
    """Who asks when a program (not an MCP server) asks: "deploy.sh (pid 4242 on build-7) asks"."""

    name: str
    pid: int | None = None
    machine: str | None = None


class ApprovalInfo(Body):
    """What a tool-call approval is about; the request's form has one enum property `decision`."""

    server: str
    tool: str
    arguments: dict[str, Any]
    title: str | None = None
    description: str | None = None
    annotations: dict[str, Any] | None = None


class SignInInfo(Body):
    """What a sign-in (OAuth) URL request is about; the URL itself is in `params.url`."""

    authorization_server: str  # the host the browser will be sent to
    scopes: list[str] = []


class ElicitationInvoke(Body):
    """Body of `msgElicitationTransferInvoke`; also the items of `welcome.pending`.

    The optional fields are extensions that let Elicitron's own window draw a richer card; a v1
    window ignores them and answers the form or URL in `request.params` as usual."""

    request: ElicitationRequest
    response_channel: str
    created_at: int
    expires_at: int | None
    origin: str | None
    kind: RequestKind | None = None  # None: a server's elicitation
    via: str | None = None  # the MCP host whose call led to this request ("Claude Desktop")
    asker: AskerInfo | None = None  # kind "question"
    approval: ApprovalInfo | None = None  # kind "approval"
    sign_in: SignInInfo | None = None  # kind "sign-in"
    call: str | None = None  # the responseChannel of the msgMcpCallTool that led to it (for its caller)


class Welcome(Body):
    """`pending` holds every unresolved request while they fit main's welcome budget; the rest
    follow as separate invokes right after. Extension `pendingChannels` lists every pending
    channel, oldest first, so a window knows which requests are still open before they all arrive."""

    session: str
    window: str
    servers: list[ServerInfo]
    pending: list[ElicitationInvoke]
    pending_channels: list[str] | None = None
    max_message_bytes: int | None = None  # extension: the largest body main accepts from a peer


class ElicitationDismiss(Body):
    response_channel: str
    reason: DismissReason
    by: str | None = None


class ElicitationComplete(Body):
    server: str
    elicitation_id: str


class ServersUpdate(Body):
    servers: list[ServerInfo]


class PeersUpdate(Body):
    """Extension `peers`: who is attached, sent to every peer whenever that changes."""

    peers: list["PeerInfo"]


class Notice(Body):
    """Extension `notice`: something the user should know that is not a card (e.g. a server's
    unsupported schema was refused, or a rate limit kicked in)."""

    level: Literal["info", "warning", "error"]
    message: str
    server: str | None = None


class ErrorNotice(Body):
    """Body of the `error` topic: something a peer sent was refused. `code` is a
    `shared.errors.WireCode` value (kept a plain string here so a newer main's codes still decode)."""

    code: str
    message: str
    topic: str | None = None


class CallError(Body):
    code: int
    message: str


class PeerInfo(Body):
    window: str
    name: str
    role: Role
    calls: int | None = None  # extension, hosts only: their tool calls in flight


class PendingSummary(Body):
    """One unresolved request as `msgStatus` lists it: who asks what, without its schema."""

    response_channel: str
    server: str
    mode: str
    message: str  # cut to 200 characters
    created_at: int
    expires_at: int | None
    origin: str | None
    sent_to: int  # how many windows have it


class StatusReport(Body):
    session: str
    pid: int
    endpoint: str
    servers: list[ServerInfo]
    peers: list[PeerInfo]
    pending: list[PendingSummary]


class ServerControlReport(Body):
    """Answer to `msgServerControl`: the server's status once the action was carried out."""

    server: str
    status: ServerStatus


class ReloadReport(Body):
    """Answer to `msgReload`: server names by what the reload did to them."""

    added: list[str]
    removed: list[str]
    changed: list[str]
    unchanged: list[str]


class ChannelReply(Body):
    """Body sent on a peer-chosen response channel: exactly one field is set. `result` is MCP's
    own JSON (a CallToolResult, or the result of a msgMcpRequest); the others are Elicitron's."""

    result: dict[str, Any] | None = None
    error: CallError | None = None
    status: StatusReport | None = None
    control: ServerControlReport | None = None
    reload: ReloadReport | None = None


# ---- extension: MCP hosts through `elicitron serve` (role "host") ---------------------------


class HostInfo(Body):
    """Extension `msgHostInfo` (peer -> main): who the MCP host behind a gateway peer is (its
    `clientInfo`) and which elicitation modes it can answer itself. Sent right after `welcome` and
    whenever it changes; main shows `name` as the peer's name and in the `via` of invokes its calls
    cause, and may send those invokes to it (per server `elicitationRoute`)."""

    name: ShortText
    version: ShortText | None = None
    form_elicitation: bool = False  # the host declared the elicitation capability (form mode)
    url_elicitation: bool = False  # ... and URL mode


class CancelCall(Body):
    """Extension `msgCancelCall` (peer -> main): cancel the sender's own `msgMcpCallTool` at the
    server; its `responseChannel` then gets `{error: {code: -32800}}` (unless it had finished)."""

    response_channel: ShortText


class Progress(Body):
    """Extension `msgProgress` (main -> the caller): a server's progress on a call made with
    `progress: true`."""

    response_channel: str
    progress: float
    total: float | None = None
    message: str | None = None


ListName = Literal["tools", "resources", "prompts"]


class ListChanged(Body):
    """Extension `msgListChanged` (main -> host peers): these lists of `server` may have changed
    (the server said so, it (re)started or stopped, or a reload added or removed it)."""

    server: str
    lists: list[ListName]


PeerBody = (
    Hello | Heartbeat | Bye | ElicitationResult | CallTool | StatusRequest | Shutdown | ServerControl | Reload
    | ServerPolicy | McpRequest | HostInfo | CancelCall
)
MainBody = (
    Welcome
    | Heartbeat
    | ElicitationInvoke
    | ElicitationDismiss
    | ElicitationComplete
    | ServersUpdate
    | ErrorNotice
    | PeersUpdate
    | Notice
    | ChannelReply
    | Progress
    | ListChanged
)
