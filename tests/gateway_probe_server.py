"""An MCP server for the gateway tests: it shows what reached it (a cancellation, its pid) and
returns every kind of result a gateway must pass through unchanged. Stdio; run as a script."""

import base64
import os
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, EmbeddedResource, ImageContent, TextContent, TextResourceContents

app = MCPServer("gateway-probe", instructions="The probe: block waits until cancelled; was_cancelled tells.")
_cancelled: dict[str, anyio.Event] = {}
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100a5f645400000000049454e44ae426082")).decode()


def _event(tag: str) -> anyio.Event:
    return _cancelled.setdefault(tag, anyio.Event())


@app.tool()
async def block(ctx: Context, tag: str, steps: int = 0) -> str:
    """Report `steps` progress notifications, then wait until the call is cancelled."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1} of {steps}")
    try:
        await anyio.sleep_forever()
    finally:
        _event(tag).set()  # runs when the call is cancelled
    return "unreachable"


@app.tool()
async def was_cancelled(tag: str) -> str:
    """Answers once the `block` call with this tag has been cancelled (waits until then)."""
    await _event(tag).wait()
    return f"{tag} was cancelled"


@app.tool()
async def count(ctx: Context, steps: int = 3) -> str:
    """Report `steps` progress notifications, then return."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1} of {steps}")
    return f"counted to {steps}"


@app.tool()
def pid() -> int:
    """This server process's pid (a restart changes it)."""
    return os.getpid()


@app.tool(title="Mixed content", structured_output=False)
def mixed() -> CallToolResult:
    """Text, an image, an embedded resource and structured content in one result."""
    return CallToolResult(
        content=[
            TextContent(type="text", text="three kinds"),
            ImageContent(type="image", data=PIXEL, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=TextResourceContents(uri="probe://note", text="a note")),
        ],
        structured_content={"kinds": 3, "ok": True},
    )


@app.tool(structured_output=False)
def fails() -> CallToolResult:
    """A tool that fails inside (isError)."""
    return CallToolResult(content=[TextContent(type="text", text="it broke")], is_error=True)


@app.tool()
def add(a: int, b: int) -> dict[str, Any]:
    """Structured output with a schema."""
    return {"sum": a + b}


@app.tool()
async def grow(ctx: Context, name: str) -> str:
    """Add a tool named `name` and announce the change (as a server whose tools change does)."""

    def grown() -> str:
        return f"{name} answers"

    app.add_tool(grown, name=name, description="added at run time")
    await ctx.notify_tools_changed()  # 2026-07-28: to subscriptions/listen streams
    if ctx.request_context.session.protocol_version < "2026":
        await ctx.request_context.session.send_tool_list_changed()  # handshake era: a notification
    return f"added {name}"


@app.resource("probe://greeting", name="greeting", mime_type="text/plain")
def greeting() -> str:
    return "hello from the probe"


@app.resource("probe://items/{item}", name="item")
def item(item: str) -> str:
    return f"item {item}"


@app.prompt()
def greet(who: str) -> str:
    """Greet someone."""
    return f"Say hello to {who}."


if __name__ == "__main__":
    app.run()
