"""Every request a peer sends main that main answers on a fresh response channel, built once.

Each builder takes the request's typed arguments and returns a `Request`: its topic, its body and
the channel the answer comes on (a fresh one unless the caller names it). The adapters send it and
deliver the answer their own way (a Qt signal, a blocking wait); `Answer` is the core's waiter that
hands the answer to a callback. `result` is a window's answer to one elicitation (no reply comes).
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from shared import channels
from shared.denial_reason import clean_reason
from shared.messages import (
    Action,
    AuditRequest,
    AuthAction,
    AuthRequest,
    Body,
    CallTool,
    ChannelReply,
    ElicitationResult,
    ErrorNotice,
    GrantChoice,
    McpMethod,
    McpRequest,
    Progress,
    Reload,
    Remember,
    RevokeRules,
    RotateHttpToken,
    RulesRequest,
    ServerControl,
    SignInRedirect,
    StatusRequest,
)

ServerAction = Literal["start", "stop", "restart"]

TOPICS = channels.REQUESTS
"""The topics of these requests: a refusal of one is the refusal of the request waited on."""


@dataclass(frozen=True)
class Request:
    body: Body
    channel: str  # the answer comes on it
    what: str  # names it in "... was not sent"

    @property
    def topic(self) -> str:
        """The topic its body goes on (each topic peers send has a body type of its own)."""
        return channels.SENT_AS[type(self.body)]


def _fresh(prefix: str, channel: str | None) -> str:
    return channel or f"{prefix}-{channels.new_uuid7()}"


def call_tool(server: str, tool: str, arguments: dict[str, Any], channel: str | None = None) -> Request:
    """main calls the tool; answered with its result (or an error)."""
    channel = _fresh("call", channel)
    body = CallTool(server=server, tool=tool, response_channel=channel, arguments=arguments)
    return Request(body, channel, "the call")


def control_server(server: str, action: ServerAction, channel: str | None = None) -> Request:
    """Extension `msgServerControl`: start, stop or restart one server."""
    channel = _fresh("control", channel)
    body = ServerControl(server=server, action=action, response_channel=channel)
    return Request(body, channel, f"{action} {server}")


def reload(channel: str | None = None, config: str | None = None) -> Request:
    """Extension `msgReload`: main re-reads its config (`config`: an absolute path on main's
    machine to read instead, which becomes main's)."""
    channel = _fresh("reload", channel)
    return Request(Reload(response_channel=channel, config=config), channel, "the reload")


def sign_in_redirect(server: str, elicitation_id: str, url: str, channel: str | None = None) -> Request:
    """Extension `msgSignInRedirect`: the address a browser here ended on after signing in."""
    channel = _fresh("sign-in", channel)
    body = SignInRedirect(server=server, elicitation_id=elicitation_id, url=url, response_channel=channel)
    return Request(body, channel, "the sign-in address")


def mcp_request(server: str, method: McpMethod, params: dict[str, Any],
                channel: str | None = None) -> Request:
    """Extension `msgMcpRequest`: one read-only MCP request (e.g. tools/list); a main without the
    extension refuses the topic."""
    channel = _fresh("mcp", channel)
    body = McpRequest(server=server, method=method, response_channel=channel, params=params)
    return Request(body, channel, f"{method} of {server}")


def rules(channel: str | None = None) -> Request:
    """Extension `msgRules`: answered with the current rules."""
    channel = _fresh("rules", channel)
    return Request(RulesRequest(response_channel=channel), channel, "the rules request")


def revoke_rules(ids: list[str], revoke_all: bool = False, channel: str | None = None,
                 server: str | None = None, asker: str | None = None) -> Request:
    """Extension `msgRevokeRules`: by id, or every one (only `server`'s, only `asker`'s); answered
    with a report (and, to windows, the new list)."""
    channel = _fresh("revoke", channel)
    body = RevokeRules(response_channel=channel, ids=ids, revoke_all=revoke_all, server=server, asker=asker)
    return Request(body, channel, "the revoke")


def audit(limit: int, server: str | None = None, channel: str | None = None) -> Request:
    """Extension `msgAudit` (controllers): answered with the newest `limit` rows of main's audit log."""
    channel = _fresh("audit", channel)
    return Request(AuditRequest(response_channel=channel, limit=limit, server=server), channel, "the audit request")


def status(channel: str | None = None) -> Request:
    """Extension `msgStatus`: answered with main's status report."""
    channel = _fresh("status", channel)
    return Request(StatusRequest(response_channel=channel), channel, "the status request")


def rotate_http_token(channel: str | None = None) -> Request:
    """Extension `msgRotateHttpToken`: a new `--mcp-http` token; answered once the HTTP gateway
    restarted on it."""
    channel = _fresh("rotate", channel)
    return Request(RotateHttpToken(response_channel=channel), channel,
                   "the token rotation")


def auth(server: str, action: AuthAction, channel: str | None = None) -> Request:
    """Extension `msgAuth`: a server's sign-in status, login or logout."""
    channel = _fresh("auth", channel)
    body = AuthRequest(server=server, action=action, response_channel=channel)
    return Request(body, channel, f"{action} of {server}")


def result(action: Action, content: dict[str, Any] | None, remember: Remember | None = None,
           reason: str | None = None, grant: GrantChoice | None = None) -> ElicitationResult:
    """The answer to one elicitation, sent on its one-time channel: content goes only with accept;
    `reason`, why the person denied an approval, cleaned and capped (shared/denial_reason.py);
    `grant`, what an approval's allow covers (only with accept)."""
    kept = content if action == "accept" else None
    return ElicitationResult(action=action, content=kept, remember=remember, reason=clean_reason(reason),
                             grant=grant if action == "accept" else None)


class Answer:
    """The core's waiter for one request: its answer goes to `on_answer`, a loss to `on_lost` (by
    default nothing: a request main lost gets no answer); progress and refusals are not its."""

    def __init__(self, on_answer: Callable[[ChannelReply], object],
                 on_lost: Callable[[str], object] | None = None) -> None:
        self._on_answer = on_answer
        self._on_lost = on_lost

    def reply(self, answer: ChannelReply) -> None:
        self._on_answer(answer)

    def progress(self, update: Progress) -> None:
        pass

    def refused(self, notice: ErrorNotice) -> None:
        pass  # a request channel is no result channel: its refusals are main's answers

    def lost(self, why: str) -> None:
        if self._on_lost is not None:
            self._on_lost(why)
