"""What a notice says, and its body in each receiver's format. No I/O in here.

A notice names who asks and what kind of request waits, in words main makes itself: never the
request's message, schema, URL, tool arguments or any value, which may all hold secrets (a server
may put anything in its message). Names that came from a server, host or program are cut short and
their control and format characters shown as escapes (shared/terminal_text.py), so a name cannot
hide text, reorder it, or break a header.

One POST stands for one request, or for several when they arrived faster than the rate limit lets
notices go (`count` > 1: "3 requests wait").

Formats (`format` in the config):
    json     {source, count, server, kind, mode, title, message, link, expiresAt}: `title` and
             `message` are what Gotify's own API reads, so its /message endpoint takes it as is
    ntfy     a text/plain body (the message) with `Title` and `Click` (the link) headers,
             RFC 2047 encoded when not ASCII (ntfy decodes them)
    gotify   {title, message, priority, extras: {client::notification: {click: {url}}}}
    slack    {text}: the link as <url|Open Elicitron>, &, < and > escaped as Slack wants
    discord  {content, allowed_mentions: {parse: []}}: no name can ping @everyone
"""

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from main_process.notify.config import NotifyFormat
from shared.messages import ElicitationInvoke
from shared.terminal_text import for_terminal

_NAME_CHARS: Final = 60
_NAMED_SERVERS: Final = 3
GOTIFY_PRIORITY: Final = 8  # Gotify's Android app alerts (sound, pop-up) from priority 8


@dataclass(frozen=True, slots=True)
class Notice:
    """One opened request, as much of it as a notice may tell."""

    channel: str  # its response channel: still open when the notice goes?
    server: str
    kind: str  # "elicitation" | "approval" | "question" | "sign-in"
    mode: str  # "form" | "url"
    title: str
    expires_at: int | None  # ms since the epoch


@dataclass(frozen=True, slots=True)
class Outgoing:
    body: bytes
    headers: dict[str, str]


def name(text: str) -> str:
    safe = for_terminal(" ".join(text.split()))
    return safe if len(safe) <= _NAME_CHARS else safe[: _NAME_CHARS - 1] + "…"


def notice_for(invoke: ElicitationInvoke, mode: str) -> Notice:
    server = name(invoke.request.server)
    via = f" (via {name(invoke.via)})" if invoke.via else ""
    kind = invoke.kind or "elicitation"
    if invoke.approval is not None:
        title = f"{name(invoke.approval.server)}: allow the tool {name(invoke.approval.tool)}?{via}"
    elif invoke.asker is not None:
        title = f"{name(invoke.asker.name)} asks you a question"
    elif kind == "sign-in":
        title = f"{server} needs you to sign in"
    elif mode == "url":
        title = f"{server}{via} asks you to open a link"
    else:
        title = f"{server}{via} asks for your input"
    return Notice(channel=invoke.response_channel, server=invoke.request.server, kind=kind, mode=mode, title=title,
                  expires_at=invoke.expires_at)


def render(notices: Sequence[Notice], count: int, link: str | None, fmt: NotifyFormat) -> Outgoing:
    """The POST for `notices` (at least one), standing for `count` requests in all."""
    fields = _fields(notices, count, link)
    title, message = fields["title"], fields["message"]
    if fmt == "ntfy":
        headers = {"Content-Type": "text/plain; charset=utf-8", "Title": header_text(title)}
        if link:
            headers["Click"] = link
        return Outgoing(message.encode(), headers)
    body: dict[str, Any]
    if fmt == "gotify":
        body = {"title": title, "message": message, "priority": GOTIFY_PRIORITY}
        if link:
            body["extras"] = {"client::notification": {"click": {"url": link}}}
    elif fmt == "slack":
        text = _slack_escape(f"{title}.")
        body = {"text": f"{text} <{_slack_escape(link)}|Open Elicitron>" if link else f"{text} {_answer_where(None)}"}
    elif fmt == "discord":
        body = {"content": message, "allowed_mentions": {"parse": []}}
    else:
        body = fields
    return Outgoing(json.dumps(body, ensure_ascii=False).encode(), {"Content-Type": "application/json"})


def _fields(notices: Sequence[Notice], count: int, link: str | None) -> dict[str, Any]:
    servers = list(dict.fromkeys(n.server for n in notices))
    kinds = {n.kind for n in notices}
    modes = {n.mode for n in notices}
    if count == 1:
        title = notices[0].title
    else:
        named = ", ".join(name(s) for s in servers[:_NAMED_SERVERS]) + (", …" if len(servers) > _NAMED_SERVERS else "")
        title = f"{count} requests wait ({named})"
    return {
        "source": "elicitron",
        "count": count,
        "server": servers[0] if len(servers) == 1 else None,
        "kind": kinds.pop() if len(kinds) == 1 else None,
        "mode": modes.pop() if len(modes) == 1 else None,
        "title": title,
        "message": f"{title}. {_answer_where(link)}",
        "link": link,
        "expiresAt": min((n.expires_at for n in notices if n.expires_at is not None), default=None),
    }


def _answer_where(link: str | None) -> str:
    return f"Answer at {link}" if link else "Open an Elicitron window to answer."


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def header_text(text: str) -> str:
    """`text` as a header value: as is when ASCII, else an RFC 2047 encoded word (UTF-8, base64)."""
    if text.isascii():
        return text
    return f"=?UTF-8?B?{base64.b64encode(text.encode()).decode()}?="
