"""MainRequests: the window's own requests to main and their replies in the results log.

A tool call (its result also in the result view), Start/Stop/Restart, Reload config, a sign-in's
pasted address, and the pages of a server's tools/list for the call panel's argument form. Each
goes out as a signal with a fresh response channel; `on_replied` matches main's reply to it.
"""

import json
import logging
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QPlainTextEdit

from renderer_process.call_panel import CallPanel
from renderer_process.reply_format import format_admin_reply, format_reply
from renderer_process.result_view import ResultView
from shared import channels, messages

logger = logging.getLogger(__name__)

_MAX_TOOLS = 10_000  # a server paging forever stops here


@dataclass(frozen=True)
class _Request:
    """What one of our own requests to main was, to log its reply."""

    label: str
    admin: bool  # server control or reload (else a tool call)
    tools_of: str = ""  # a tools/list of this server (pages gathered in `pages`)
    pages: tuple[dict[str, Any], ...] = ()


class MainRequests(QObject):
    call_requested = Signal(str, str, str, object)  # response channel, server, tool, arguments
    control_requested = Signal(str, str, str)  # response channel, server, "start" | "stop" | "restart"
    reload_requested = Signal(str)  # response channel
    sign_in_redirect_requested = Signal(str, str, str, str)  # response channel, server, elicitationId, url
    mcp_requested = Signal(str, str, str, object)  # response channel, server, method, params

    def __init__(self, log: QPlainTextEdit, result_view: ResultView, call_panel: CallPanel) -> None:
        super().__init__(log)
        self._log = log
        self._result_view = result_view
        self._call_panel = call_panel
        self._requests: dict[str, _Request] = {}  # response channel -> what we asked

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> None:
        channel = "call-" + channels.new_uuid7()
        self._requests[channel] = _Request(f"{server}/{tool}", admin=False)
        self._log.appendPlainText(f"→ {server}/{tool} {json.dumps(arguments, ensure_ascii=False)}")
        self.call_requested.emit(channel, server, tool, arguments)

    def control(self, server: str, action: str) -> None:
        channel = "control-" + channels.new_uuid7()
        self._requests[channel] = _Request(f"{action} {server}", admin=True)
        self._log.appendPlainText(f"→ {action} {server}")
        self.control_requested.emit(channel, server, action)

    def reload(self) -> None:
        channel = "reload-" + channels.new_uuid7()
        self._requests[channel] = _Request("reload config", admin=True)
        self._log.appendPlainText("→ reload config")
        self.reload_requested.emit(channel)

    def sign_in_redirect(self, channel: str, server: str, elicitation_id: str, url: str) -> None:
        self._requests[channel] = _Request(f"sign-in to {server}", admin=True)
        self.sign_in_redirect_requested.emit(channel, server, elicitation_id, url)

    def request_tools(
        self, server: str, cursor: str | None = None, pages: tuple[dict[str, Any], ...] = ()
    ) -> None:
        channel = "tools-" + channels.new_uuid7()
        self._requests[channel] = _Request(f"tools of {server}", admin=True, tools_of=server, pages=pages)
        self.mcp_requested.emit(channel, server, "tools/list", {"cursor": cursor} if cursor else {})

    def on_replied(self, channel: str, reply: messages.ChannelReply) -> None:
        request = self._requests.pop(channel, None)
        if request is None:
            logger.debug("reply on %s is not for a request of this window", channel)
            return
        if request.tools_of:
            self._on_tools_page(request, reply)
            return
        text = format_admin_reply(reply) if request.admin else format_reply(reply)
        self._log.appendPlainText(f"{request.label}: {text}")
        if not request.admin:
            self._result_view.show_reply(request.label, reply)

    def tools_unavailable(self, message: str) -> None:
        """main cannot list tools (e.g. a main without the extension): the form stays JSON."""
        for channel, request in list(self._requests.items()):
            if request.tools_of:
                del self._requests[channel]
                self._call_panel.set_tools_failed(request.tools_of, message)

    def _on_tools_page(self, request: _Request, reply: messages.ChannelReply) -> None:
        server = request.tools_of
        if reply.error is not None or not isinstance(reply.result, dict):
            message = reply.error.message if reply.error is not None else "empty reply"
            self._call_panel.set_tools_failed(server, message)
            return
        tools = reply.result.get("tools")
        page = tuple(t for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ()
        pages = request.pages + page
        cursor = reply.result.get("nextCursor")
        if isinstance(cursor, str) and cursor and len(pages) < _MAX_TOOLS:
            self.request_tools(server, cursor, pages)
            return
        self._call_panel.set_tools(server, list(pages))
