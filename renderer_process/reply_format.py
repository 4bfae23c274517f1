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
    """A server control or reload reply: "ok", "ok (added: a; removed: none)", or the error."""
    if reply.error is not None:
        return f"error {reply.error.code}: {reply.error.message}"
    if reply.result is None:
        return "(empty reply)"
    result = dict(reply.result)
    ok = result.pop("ok", None)
    details = "; ".join(f"{key}: {_detail(value)}" for key, value in result.items())
    head = "failed" if ok is False else "ok"
    return f"{head} ({details})" if details else head


def _detail(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) if value else "none"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
