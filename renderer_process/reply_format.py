"""How a tool call's reply reads in the results log. No Qt."""

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
