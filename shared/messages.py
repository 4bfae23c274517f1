"""Wire contract v1 message bodies as msgspec Structs (camelCase on the wire).

MCP payloads inside (`params`, `content`, `result`) stay MCP's own JSON shape, held as plain
dicts, so this package never depends on `mcp`.
"""

from typing import Annotated, Any, Final, Literal

import msgspec

from shared.denial_reason import REASON_MAX_CHARS

MAX_ID_CHARS = 200  # window ids, names, tokens and response channels: enough for any uuid or label
ShortText = Annotated[str, msgspec.Meta(max_length=MAX_ID_CHARS)]

Action = Literal["accept", "decline", "cancel"]
ServerStatus = Literal["starting", "ready", "restarting", "failed", "stopped", "needs-sign-in"]
DismissReason = Literal["answered", "cancelled", "expired", "server-closed"]
HOST_GONE: Final = "host-gone"
"""A dismiss's extension `cause` (with reason "cancelled"): the MCP host whose call it was for stopped
waiting (cancelled the call, or its session ended). Not a new reason: v1 windows know only four."""
Role = Literal["renderer", "controller", "host", "asker"]
"""renderer: a window (gets requests, answers them); controller: the CLI; host: an `elicitron serve`
gateway speaking for an MCP host; asker: a program asking a question (`elicitron ask`)."""
RequestKind = Literal["elicitation", "approval", "question", "sign-in"]


class Body(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of every message body."""


# ---- peer -> main -------------------------------------------------------------------------


class DeviceRef(Body):
    """Extension: the paired web device a web window's page answers for (`elicitron devices`
    lists it): its random id and its name, never its credential."""

    id: ShortText
    name: ShortText


class Hello(Body):
    """Extension `device`: a web window's page names the paired device it serves (renderers only).
    Extension `user`: a desktop window's OS user, so the audit can name who answered (renderers only)."""

    protocol: int
    token: ShortText
    window: ShortText
    name: ShortText = ""
    role: Role = "renderer"
    device: DeviceRef | None = None
    user: ShortText | None = None


class Heartbeat(Body):
    pass


class Bye(Body):
    pass


# ---- consent memory (issue 11): remembered answers, tool-call approvals, rules ---------------

RememberScope = Literal["session", "always", "until"]
ApprovalDecision = Literal["allow-once", "allow-session", "allow-always", "deny"]
APPROVAL_DECISIONS: tuple[ApprovalDecision, ...] = ("allow-once", "allow-session", "allow-always", "deny")
DECISION_PROPERTY = "decision"  # the one required enum property of an approval's form


class Remember(Body):
    """Extension field `remember` of a result: keep this answer as a rule. `session`: until main
    stops; `always`: until revoked; `until`: until `until` (epoch ms, in the future)."""

    scope: RememberScope
    until: int | None = None


GrantArguments = Literal["exact", "pattern", "any"]
GrantDuration = Literal["session", "hour", "until", "always"]


class GrantChoice(Body):
    """What an approval's allow covers besides its own call (a grant, main_process/consent/grants.py):
    `arguments` "exact" (these arguments only), "pattern" (`pattern`: a glob per argument, naming
    each argument of the call) or "any"; `duration` "session" (this host, until main stops), "hour"
    (an hour on main's clock), "until" (`until`, epoch ms in the future) or "always"; `single_use`:
    it covers one later call, then it is gone."""

    arguments: GrantArguments = "any"
    duration: GrantDuration = "session"
    pattern: dict[str, str] | None = None
    until: int | None = None
    single_use: bool = False


class ElicitationResult(Body):
    """Body of `msgElicitationTransferResult-<uuid7>`. `remember` is an extension (form-mode
    accept or decline only); a v1 window never sends it. `reason` too (optional, at most
    REASON_MAX_CHARS): why the person denied an approval, for the agent whose call it was (main
    keeps it only on an approval's deny, cleaned by shared.denial_reason)."""

    action: Action
    content: dict[str, Any] | None = None
    remember: Remember | None = None
    reason: Annotated[str, msgspec.Meta(max_length=REASON_MAX_CHARS)] | None = None
    grant: GrantChoice | None = None  # an approval's allow-session / allow-always: what it covers (PROTOCOL.md §11)


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


class ServerControl(Body):
    """Extension `msgServerControl`: start, stop or restart one configured server; answered on
    `responseChannel` with `ChannelReply.control` (or `error`)."""

    server: str
    action: Literal["start", "stop", "restart"]
    response_channel: ShortText


class Reload(Body):
    """Extension `msgReload`: re-read the config; answered with `ChannelReply.reload` (or `error`)."""

    response_channel: ShortText
    config: str | None = None  # an absolute path on main's machine to read instead (then main's config)


class RotateHttpToken(Body):
    """Extension `msgRotateHttpToken`: a new `--mcp-http` bearer token now (the old one is refused
    from then on); answered with `ChannelReply.status` once the HTTP gateway restarted on it."""

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


# ---- sign-in (OAuth) extension: peer -> main ---------------------------------------------


AuthAction = Literal["status", "login", "logout"]


class AuthRequest(Body):
    """Extension `msgAuth`: a controller asks about one server's sign-in (`elicitron auth`);
    answered on `responseChannel` with `ChannelReply.auth` (or `error`). `login` starts a sign-in
    (the card shows in the windows) and answers at once; `logout` forgets the server's tokens."""

    server: str
    action: AuthAction
    response_channel: ShortText


class SignInRedirect(Body):
    """Extension `msgSignInRedirect`: a window on another machine hands main the address its
    browser was redirected to after signing in (main's loopback URL, with `code` and `state`).
    main checks `state` as its loopback listener does; answered with `ChannelReply.auth`."""

    server: str
    elicitation_id: str
    url: Annotated[str, msgspec.Meta(max_length=16_384)]
    response_channel: ShortText


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


class GrantOffer(Body):
    """Extension `approval.grants`: the grants main accepts beside an allow (GrantChoice), and the
    pattern it proposes for "arguments like these" (a glob per argument; the person may edit it)."""

    arguments: list[GrantArguments]
    durations: list[GrantDuration]
    pattern: dict[str, str]


class ApprovalInfo(Body):
    """What a tool-call approval is about; the request's form has one enum property `decision`.
    `grants`: what an allow may cover besides this call (absent: today's choices only)."""

    server: str
    tool: str
    arguments: dict[str, Any]
    title: str | None = None
    description: str | None = None
    annotations: dict[str, Any] | None = None
    grants: GrantOffer | None = None


class QuorumInfo(Body):
    """Extension `quorum` of an approval's invoke: the call needs `needed` approvals from
    `approvers` (people: a window's name or OS user, a paired web device's name); `approved` names
    those given so far. main re-sends the invoke with it after each approval that does not decide."""

    needed: int
    approvers: list[str]
    approved: list[str]


SignInRole = Literal["authorization", "token", "registration", "resource"]
SIGN_IN_ALLOW_PROPERTY = "allowHosts"  # accept content of a sign-in: the `elsewhere` origins the user allowed
MAX_SIGN_IN_HOSTS = 8


class SignInHost(Body):
    """One place a sign-in talks to: the authorization endpoint (the browser), the token endpoint
    (the code, the PKCE verifier and any client secret go there), the registration endpoint, the
    MCP server (the resource)."""

    role: SignInRole
    origin: str  # scheme://host[:port]
    # A token or registration endpoint on another origin than the authorization server's issuer:
    # main sends nothing there unless the accept's content lists this origin in `allowHosts`.
    elsewhere: bool = False


class SignInInfo(Body):
    """What a sign-in (OAuth) URL request is about; the URL itself is in `params.url`."""

    authorization_server: str  # the host the browser will be sent to
    scopes: list[str] = []
    # Extension (sign-in): where the browser lands after signing in: main's one-use loopback
    # listener. A window on another machine offers a field to paste that address into
    # (`msgSignInRedirect`), since the browser there cannot reach main's 127.0.0.1.
    redirect_uri: str | None = None
    resource: str | None = None  # the MCP server the sign-in is for (RFC 8707 resource)
    # The server publishes no OAuth metadata (it predates the metadata spec, 2025-03-26): the sign-in
    # goes to its own /authorize, with PKCE S256.
    legacy_metadata: bool = False
    hosts: list[SignInHost] = []  # every origin the flow talks to, by role


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
    machine: str | None = None  # another main's request on a shared store: that main's machine (PROTOCOL.md §4)
    quorum: QuorumInfo | None = None  # kind "approval" under a config rule's quorum (PROTOCOL.md §11)


class Welcome(Body):
    """`pending` holds every unresolved request while they fit main's welcome budget; the rest
    follow as separate invokes right after. Extension `pendingChannels` lists every pending
    channel, oldest first, so a window knows which requests are still open before they all arrive.
    Extension `peers`: the attached peers as the `peers` push that follows would list them, so a
    window places every replayed request by its origin at once (no turn in which it is not known)."""

    session: str
    window: str
    servers: list[ServerInfo]
    pending: list[ElicitationInvoke]
    pending_channels: list[str] | None = None
    max_message_bytes: int | None = None  # extension: the largest body main accepts from a peer
    peers: "list[PeerInfo] | None" = None


class ElicitationDismiss(Body):
    """Extension `rule`: the id of the rule that answered (reason "answered", no `by`). Extension
    `cause`: why it was cancelled, when main knows more than v1's reasons say (HOST_GONE); any text,
    so a window that does not know a cause still takes the dismiss."""

    response_channel: str
    reason: DismissReason
    by: str | None = None
    rule: str | None = None
    cause: str | None = None


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
    device: DeviceRef | None = None  # extension, web windows only: the paired device of the page


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


HttpGatewayState = Literal["starting", "listening", "restarting", "failed", "stopped"]


class ChildStatus(Body):
    """A child main supervises (`--mcp-http`, `--web`): its state, the address it was given, where
    it is reached once it listens, and why it last stopped."""

    state: HttpGatewayState
    address: str
    url: str | None = None
    error: str | None = None


class HttpGatewayStatus(ChildStatus):
    """Extension (`main --mcp-http`): the HTTP gateway, with its connection and session counts."""

    open_connections: int = 0
    refused_connections: int = 0  # closed at once, or to make room, for being over a cap (issue 24)
    timed_out_connections: int = 0  # closed for sending no request (or no body) in time
    sessions: int = 0  # MCP sessions open (a 2026-07-28 client counts as one)
    refused_sessions: int = 0  # over a cap (per host, in all), answered 503
    main_peers: int = 0  # host peers of main those sessions share


class WebWindowStatus(ChildStatus):
    """Extension (`main --web`): the web window child, where browsers reach it."""


class ListenerStatus(Body):
    """Extension: one listener main runs for others (e.g. `--listen tcp://…` for remote windows):
    connections it holds, and those it refused (at its caps, short of descriptors) or closed (no
    handshake in time), in all and by reason."""

    name: str
    address: str
    open: int
    refused: int
    dropped: int
    refused_by: dict[str, int] = {}
    dropped_by: dict[str, int] = {}


NotifyState = Literal["idle", "sending", "retrying", "rate-limited"]


class NotifyStatus(Body):
    """Extension: one `notify` receiver (main POSTs a notice of each new request): named by its
    scheme and host alone (its path or query may be a credential), POSTs it took and that failed
    after their retries, notices held by the rate limit and dropped from a full queue, the last
    failure (ms since the epoch)."""

    target: str
    state: NotifyState
    sent: int = 0
    failed: int = 0
    held: int = 0
    dropped: int = 0
    last_error: str | None = None
    last_error_at: int | None = None
    last_sent_at: int | None = None


class PolicyStatus(Body):
    """Extension: the config's policy files (`elicitron.policies`) in force, how many policies they
    hold, and why the last reload could not replace them (None: it did)."""

    files: list[str]
    policies: int
    problem: str | None = None


class StoreMain(Body):
    """Extension: one main of a shared store with a live lease: its `machine` name, its pid on that
    machine, when it started (ms since the epoch)."""

    machine: str
    pid: int
    started_at: int


class StoreState(Body):
    """Extension: main's store as `status` lists it: its kind, where (a URL redacted, never its
    password), whether main reached it last time (None: not tried yet) and why not, this main's
    `machine` (a shared store), the mains on it now (PostgreSQL: the live leases), and how many
    writes of what was decided while it was away wait to be written (`waiting`)."""

    kind: Literal["SQLite", "PostgreSQL"]
    location: str
    reachable: bool | None = None
    problem: str | None = None
    machine: str | None = None
    mains: list[StoreMain] = []
    waiting: int = 0


class StatusReport(Body):
    session: str
    pid: int
    endpoint: str
    servers: list[ServerInfo]
    peers: list[PeerInfo]
    pending: list[PendingSummary]
    event_loop: str | None = None  # extension: "uvloop 0.23.0" or "asyncio", what main runs on
    mcp_http: HttpGatewayStatus | None = None  # extension: only with `main --mcp-http`
    listeners: list[ListenerStatus] = []  # extension: main's own listeners (tcp+CURVE), refusals counted
    notify: list[NotifyStatus] = []  # extension: the config's webhook receivers
    web_window: WebWindowStatus | None = None  # extension: only with `main --web`
    policies: PolicyStatus | None = None  # extension: only with the config's `elicitron.policies`
    store: StoreState | None = None  # extension: main's store (rules, audit; a shared inbox)


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
    # Extensions: servers whose approval keys (toolApproval) changed, applied without a restart (not
    # in `changed` nor `unchanged`); config-wide settings that changed and apply now (rules, notify,
    # auditValues); sentences on what the reload did not do, or why a server left.
    updated: list[str] = []
    settings: list[str] = []
    notes: list[str] = []


class AuthReport(Body):
    """Answer to `msgAuth` and `msgSignInRedirect`: a server's sign-in state, never a token."""

    server: str
    status: ServerStatus
    signed_in: bool  # tokens are stored for this server
    store: Literal["keyring", "file", "none"]  # where they are kept
    authorization_server: str | None = None  # issuer the tokens came from
    scopes: list[str] = []
    expires_at: int | None = None  # epoch ms of the access token's expiry, when known
    message: str | None = None  # what was done, or why not
    # Extension: what this server's sign-in redirect listeners turned away since main started:
    # connections over their cap or silent past the header timeout, and redirects (or pasted
    # addresses) whose state matched no sign-in.
    listener_refused: int = 0
    forged_redirects: int = 0
# ---- consent memory (issue 11), continued ------------------------------------------------


class RuleInfo(Body):
    """One rule as windows and `elicitron rules` see it. Remembered values never leave main:
    an answer rule names the fields it fills, not what is in them.

    `source` "user" (made in a window: `scope` session / always / until) or "config" (read-only,
    from the config file). `kind` "answer" (answers a server's form request: `message`, `fields`,
    `action`) or "tool" (decides a host's tool call: `tool`, `decision`). Config rules' `tool` and
    `message` are globs. Who it was given to: `party` "server" (`server` is a configured server's
    name) or "asker" (`server` is the name of a program asking with `elicitron ask`); `host`, a
    session approval's host (absent: every host); `applies` false for a rule given to another
    program than the one now configured under that name (it is not applied)."""

    id: str
    source: Literal["user", "config"]
    kind: Literal["answer", "tool"]
    server: str
    scope: Literal["session", "always", "until"]
    created_at: int  # epoch ms (config rules: when main read the config)
    created_by: str  # a window's name (user rules), the config file (config rules)
    expires_at: int | None = None  # epoch ms, scope "until"
    tool: str | None = None
    decision: Literal["allow", "deny"] | None = None
    message: str | None = None
    fields: list[str] | None = None
    action: Literal["accept", "decline"] | None = None
    party: Literal["server", "asker"] = "server"
    host: str | None = None
    applies: bool = True
    quorum: QuorumInfo | None = None  # a config rule that asks several people (no `decision`; `approved` empty)
    # a user tool rule (a grant): which arguments it covers ("exact": those approved, kept as a digest;
    # "pattern": `pattern`, a glob per argument; "any"), and whether it covers one call only
    arguments: Literal["exact", "pattern", "any"] | None = None
    pattern: dict[str, str] | None = None
    single_use: bool = False


class RulesUpdate(Body):
    """Extension `rules` (main -> renderers): every rule, whenever one is added, revoked or expires."""

    rules: list[RuleInfo]


class RulesRequest(Body):
    """Extension `msgRules`: answered on `responseChannel` with `ChannelReply.rules`."""

    response_channel: ShortText


# ---- extension: a program asks (msgAsk / msgWithdraw; `elicitron ask`, asker_process) --------

MAX_QUESTION_TIMEOUT_S = 7 * 24 * 3600.0  # the same cap as config's per-server times
DEFAULT_QUESTION_TIMEOUT_S = 600.0  # the same default as a server's elicitation timeout
QuestionOutcome = Literal["accept", "decline", "cancel", "expired", "withdrawn"]
"""How a question ended: a window's action, or nobody answered in time (`expired`), or the asker
withdrew it (`withdrawn`)."""


class Ask(Body):
    """Extension `msgAsk`: a peer asks the windows a question. `params` is an MCP
    `ElicitRequestParams` JSON (form or url mode), checked like a server's request; answered once on
    `responseChannel` with `ChannelReply.answer` (or `error`, e.g. -32602 for a bad schema)."""

    response_channel: ShortText
    params: dict[str, Any]
    asker: AskerInfo
    timeout_seconds: float | None = None  # default DEFAULT_QUESTION_TIMEOUT_S, at most MAX_QUESTION_TIMEOUT_S
    # The channel this question was asked on before its main was lost: on a shared store, main
    # hands over the answer given meanwhile (once), or ends that copy and asks it here anew.
    resumes: ShortText | None = None


class Withdraw(Body):
    """Extension `msgWithdraw`: the asker takes back its open question on `responseChannel`; the
    windows get a dismiss `cancelled`, the asker an answer with outcome `withdrawn`."""

    response_channel: ShortText


class RevokeRules(Body):
    """Extension `msgRevokeRules`: revoke user rules by id, or every one (`revokeAll`, optionally
    only the server `server`'s, or only the asker `asker`'s). Answered with `ChannelReply.revoked`."""

    response_channel: ShortText
    ids: list[ShortText] = []
    revoke_all: bool = False
    server: str | None = None
    asker: str | None = None


class RevokeReport(Body):
    """Answer to `msgRevokeRules`: the ids revoked, and one sentence per id that was not."""

    revoked: list[str]
    refused: list[str] = []
class QuestionAnswer(Body):
    """`ChannelReply.answer`: how a question ended. `action` is what an MCP asker hands on
    (`cancel` for expired and withdrawn); `content` only for accept in form mode."""

    action: Action
    outcome: QuestionOutcome
    content: dict[str, Any] | None = None


# ---- extension: the audit log through main (msgAudit; `elicitron audit`) ---------------------

MAX_AUDIT_ROWS = 10_000  # one answer's rows: main reads them on its loop, and a peer takes 64 MiB at most


class QuorumApprover(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One person of a quorum approval's decision in an `AuditEntry`, and the machine of the main
    their window was attached to."""

    person: str
    machine: str


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One elicitation as the audit log holds it (camelCase in JSON, like the wire contract), in
    `ChannelReply.audit` too. Not a Body: its nulls are kept, so `elicitron audit --json` prints the
    same whether it read the store or asked main."""

    channel: str
    server: str
    mode: str
    message: str
    fields: list[str] | None  # form mode: requested property names
    url: str | None  # url mode
    origin: str | None
    created_at: int
    expires_at: int | None
    outcome: str | None  # None while pending
    window: str | None  # the window that answered (its id)
    decided_at: int | None
    content: dict[str, Any] | None  # only when recorded with record_values=True
    kind: str | None = None  # None: a server's elicitation; else "approval", "question", "sign-in"
    via: str | None = None  # the MCP host whose call led to it
    tool: str | None = None  # approvals: the tool asked about
    arguments: dict[str, Any] | None = None  # approvals, only with record_values=True
    rule_id: str | None = None  # answered by this rule rather than by a window
    decision: str | None = None  # approvals: allow-once | allow-session | allow-always | deny
    window_name: str | None = None  # the answering window's name when it answered
    device: str | None = None  # a web window answered: the paired device's name then
    device_id: str | None = None  # and its id, as `elicitron devices` lists it
    machine: str | None = None  # the main that asked (a shared store: PostgreSQL); None in SQLite
    reason: str | None = None  # a denied call: the reason the person typed, or the forbidding policy's
    answer_machine: str | None = None  # a shared store: the machine of the main the answering window was attached to
    answer_user: str | None = None  # a shared store: the answering desktop window's OS user, when it said
    approvers: list[QuorumApprover] | None = None  # a shared store's quorum: who approved (then who decided), in order

    @property
    def status(self) -> str:
        return self.outcome or "pending"  # main_process.store.records.PENDING


class AuditRequest(Body):
    """Extension `msgAudit` (controllers): the newest `limit` rows of main's audit log (only
    `server`'s), answered on `responseChannel` with `ChannelReply.audit`, newest first."""

    response_channel: ShortText
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_AUDIT_ROWS)] = 50
    server: str | None = None


class ChannelReply(Body):
    """Body sent on a peer-chosen response channel: exactly one field is set. `result` is MCP's
    own JSON (a CallToolResult, or the result of a msgMcpRequest); the others are Elicitron's."""

    result: dict[str, Any] | None = None
    error: CallError | None = None
    status: StatusReport | None = None
    control: ServerControlReport | None = None
    reload: ReloadReport | None = None
    auth: AuthReport | None = None  # extension: msgAuth, msgSignInRedirect
    rules: list[RuleInfo] | None = None  # msgRules
    revoked: RevokeReport | None = None  # msgRevokeRules
    answer: QuestionAnswer | None = None  # extension msgAsk
    audit: list[AuditEntry] | None = None  # extension msgAudit


# ---- extension: a caller's calls (cancel, progress); host peers' list changes ------------------


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


# ---- extension: relayed MCP sessions (a host's own session with one server, through main) ----


# McpRelay.server (and a host-pipes handover's): the host's one session with every server at once,
# merged by main (`<server>__<name>`); no configured server has an empty name.
EVERY_SERVER = ""


class McpRelay(Body):
    """Extension `msgMcpRelay`, both directions: one JSON-RPC message of a relayed MCP session, as
    the JSON text the host or the server wrote (`message`, UTF-8 bytes, never re-encoded on the
    way). Peer -> main: `session` is a name the peer picks (like a response channel); the first
    message of a session names its `server`, and main opens the peer's own connection to that
    server. main -> peer: what the server sent in that session (and main's own answers for it, e.g.
    a tool call a window denied)."""

    session: ShortText
    message: bytes
    server: str | None = None
    # Peer -> main: the HTTP routing headers the host sent with this message (`mcp-*`, lower-case
    # names), for a server main reaches over HTTP; main sends none.
    headers: dict[str, str] | None = None


class McpClose(Body):
    """Extension `msgMcpClose`, both directions: the relayed session ends. From the peer: main
    closes the server connection. From main: the server went away (`reason` says why); the next
    message on the same `session` name opens a new connection."""

    session: ShortText
    reason: str | None = None


PeerBody = (
    Hello | Heartbeat | Bye | ElicitationResult | CallTool | StatusRequest | Shutdown | ServerControl | Reload
    | ServerPolicy | McpRequest | AuthRequest | SignInRedirect | RulesRequest | RevokeRules | Ask | Withdraw
    | CancelCall | McpRelay | McpClose | RotateHttpToken | AuditRequest
)
MainBody = (
    Welcome
    | Heartbeat
    | Bye
    | ElicitationInvoke
    | ElicitationDismiss
    | ElicitationComplete
    | ServersUpdate
    | ErrorNotice
    | PeersUpdate
    | Notice
    | ChannelReply
    | RulesUpdate
    | Progress
    | ListChanged
    | McpRelay
    | McpClose
)
