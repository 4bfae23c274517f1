"""How replies read in the results log (tool calls, server control, reload). No Qt."""

import json
from typing import Any

from shared import messages


def format_reply(reply: messages.ChannelReply) -> str:
    if reply.error is not None:
        return f"error {reply.error.code}: {reply.error.message}"
    if reply.result is None:
        return "(empty reply)"
    text = _result_text(reply.result)
    return f"tool error: {text}" if reply.result.get("isError") else text


def _result_text(result: dict[str, Any]) -> str:
    parts: list[str] = []
    for item in result.get("content") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "text":
            parts.append(str(item.get("text", "")))
        else:
            parts.append(f"[{item.get('type', 'content')}]")
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(parts) if parts else "(no content)"


def format_admin_reply(reply: messages.ChannelReply) -> str:
    """A server control or reload reply: "ok (demo: ready)", "ok (added: a; removed: none; …)", or the error."""
    if reply.error is not None:
        return f"error {reply.error.code}: {reply.error.message}"
    if reply.control is not None:
        return f"ok ({reply.control.server}: {reply.control.status})"
    if reply.reload is not None:
        done = reply.reload
        parts = {"added": done.added, "removed": done.removed, "changed": done.changed, "unchanged": done.unchanged}
        return "ok (" + "; ".join(f"{key}: {', '.join(names) or 'none'}" for key, names in parts.items()) + ")"
    if reply.auth is not None:  # extension: sign-in
        state = "signed in" if reply.auth.signed_in else "not signed in"
        return f"ok ({reply.auth.server}: {state}{'; ' + reply.auth.message if reply.auth.message else ''})"
    return "(empty reply)"
