"""Every exception Elicitron raises on purpose, and every error code it puts on the wire.

    ElicitronError
    ├── ProtocolError            a frame or message broke the wire contract (carries a WireCode)
    ├── ConfigError              the mcpServers config file is unreadable or has a bad entry
    ├── ConnectionFileError      the connection file is missing, unreadable or too permissive
    ├── AlreadyRunningError      another main already owns the endpoint
    ├── MainUnreachableError     no main answered a controller in time
    │   └── MainNotRunningError  an asker found no main to ask (no connection file, its pid gone, no answer)
    ├── QuestionRefusedError     main refused a program's question (bad schema, bad timeout); carries the RpcCode
    ├── UnsupportedSchemaError   a requestedSchema uses something outside MCP's restricted subset
    ├── UndeliverableRequestError a request main cannot carry to the windows (too large, not encodable)
    ├── InvalidContentError      an accepted answer does not validate against its requestedSchema
    ├── AuditLogError            the audit log cannot be opened or read (readers only; writers log)
    ├── SignInError              signing in to a server did not complete (OAuth)
    │   └── SignInDeclinedError  the user declined the sign-in card (or the authorization server's page)
    ├── TokenStoreError          the OAuth token store cannot be read or written
    ├── RuleStoreError           the rule store cannot be opened or read (readers only; main logs)
    ├── StoreUnavailableError    the store a URL names cannot be opened (unreachable, refused, newer schema)
    └── OversizedLineError       a configured server wrote a line over the cap: its connection ended

Codes: `WireCode` names the string `code` of the wire's `error` topic (shared/PROTOCOL.md lists
when each is sent); `RpcCode` names the JSON-RPC codes of `{error: {code, message}}` replies.
"""

from enum import IntEnum, StrEnum


class WireCode(StrEnum):
    """The `code` of an `error` message: why main refused what a peer sent."""

    BAD_PROTOCOL = "bad-protocol"  # hello with another protocol version
    BAD_TOKEN = "bad-token"  # hello with a token other than the connection file's
    NOT_ATTACHED = "not-attached"  # anything but hello before a welcome (or after a detach)
    UNKNOWN_TOPIC = "unknown-topic"  # no such peer -> main topic
    BAD_BODY = "bad-body"  # the body does not match its topic's shape
    TOO_LARGE = "too-large"  # the body is over main's size limit
    UNKNOWN_CHANNEL = "unknown-channel"  # a result on a channel main never opened
    ALREADY_ANSWERED = "already-answered"  # a result on a channel that is closed
    NOT_RECIPIENT = "not-recipient"  # a result from a peer the request was not sent to
    INVALID_CONTENT = "invalid-content"  # accepted content that breaks requestedSchema
    RATE_LIMITED = "rate-limited"  # extension: the peer sent too fast; messages were dropped
    TOO_MANY_PEERS = "too-many-peers"  # extension: hello refused, main has its limit of peers
    NOT_APPROVER = "not-approver"  # extension: an answer to a quorum approval from someone not among its approvers
    STORE_UNREACHABLE = "store-unreachable"  # extension: an answer to another main's request, and no shared store to decide it


class RpcCode(IntEnum):
    """JSON-RPC error codes used in `{error: {code, message}}` replies on response channels."""

    SERVER_ERROR = -32000  # the server is not running, failed, or closed the connection
    TIMEOUT = -32001  # no result within the configured time
    URL_ELICITATION_REQUIRED = -32042  # MCP: the server needs URL-mode consent first
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602  # unknown server or tool name, bad arguments, unsupported request
    INTERNAL_ERROR = -32603  # a fault in main or the transport
    PARSE_ERROR = -32700  # JSON-RPC: a host sent something that is not JSON
    INVALID_REQUEST = -32600  # JSON-RPC: not a JSON-RPC message, or over the size limit
    REQUEST_CANCELLED = -32800  # the caller cancelled its call (msgCancelCall); the LSP code


class ElicitronError(Exception):
    """Base of every error Elicitron raises deliberately."""


class ProtocolError(ElicitronError):
    """A message that cannot be acted on; `code` says why, in the contract's terms."""

    def __init__(self, code: WireCode, message: str, topic: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.topic = topic


class ConfigError(ElicitronError):
    """The config file cannot be used; the message names the file and the bad entry."""


class ConnectionFileError(ElicitronError):
    """The connection file cannot be read, written or trusted."""


class AlreadyRunningError(ElicitronError):
    """A second main tried to start while one holds the lock."""


class MainUnreachableError(ElicitronError):
    """A controller could not reach a running main."""


class MainNotRunningError(MainUnreachableError):
    """A program asked (`elicitron ask`, `asker_process.ask`, an `elicitation_callback`) and no main
    runs to show the question: raised at once rather than waiting for one."""


class QuestionRefusedError(ElicitronError):
    """main refused a program's question before any window saw it; `code` is its JSON-RPC code
    (-32602 for a schema outside MCP's subset, naming the property, or a timeout out of range)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class UnsupportedSchemaError(ElicitronError):
    """A requestedSchema uses features outside MCP's restricted elicitation schema."""


class UndeliverableRequestError(ElicitronError):
    """A request main will not put in front of the windows: over `maxRequestBytes`, or holding
    values the wire cannot carry (e.g. an integer beyond 64 bits)."""


class InvalidContentError(ElicitronError):
    """Accepted content does not match the requestedSchema; `problems` lists each reason."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class AuditLogError(ElicitronError):
    """The audit log cannot be opened or read (raised by the readers only, never by `record_*`)."""


class SignInError(ElicitronError):
    """Signing in to a server did not complete: the card expired or was cancelled, the redirect
    never came, the authorization server refused, or it does not offer PKCE S256."""


class SignInDeclinedError(SignInError):
    """The user declined the sign-in (on the card, or on the authorization server's own page)."""


class SignInRefusedError(SignInDeclinedError):
    """Elicitron refused the sign-in itself: the metadata sends the code, a token or the client
    secret to another origin than the issuer, and the card did not allow it. Held like a decline
    (asking again would meet the same metadata) until `elicitron auth login`."""


class TokenStoreError(ElicitronError):
    """The OAuth token store (keyring or the 0600 file) cannot be read or written."""


class RuleStoreError(ElicitronError):
    """The rule store (remembered answers and approvals) cannot be opened, read or changed by the
    CLI; main itself never raises it (a rule it cannot save still applies until main stops)."""


class StoreUnavailableError(ElicitronError):
    """The store the config, `--store` or ELICITRON_STORE names cannot be opened: unreachable, the
    password refused, or a schema newer than this elicitron. One line that says what to do, with
    the URL redacted (main_process/store/url.py); main does not start without its store."""


class PairingError(ElicitronError):
    """The web window: a pairing code that is unknown, used already or expired (all alike to a browser)."""


class PageMessageError(ElicitronError):
    """The web window: what a browser page sent is not a message it may send."""


class WebWindowNotRunningError(ElicitronError):
    """`elicitron pair --web` found no running web window (`elicitron web`) to pair with."""


class DeviceError(ElicitronError):
    """`elicitron devices revoke`: no paired web device has that name or id, or several share the name."""


class OversizedLineError(ElicitronError):
    """A server main runs wrote a line over the cap: its connection ended (the message is for
    `status`, and says what to do)."""
