"""Elicitron's demo MCP server: tools that elicit, for trying the app and for the test suite.

Run over stdio (the default) or `--http` (streamable HTTP on 127.0.0.1; the first stdout line
is `LISTENING <url>`). Works with clients of both protocol eras: on 2026-07-28 an elicitation
is returned as an InputRequiredResult and answered on the retry; earlier eras get a standalone
`elicitation/create` request mid-call.
"""

import argparse
import json
import socket
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)

MODERN_ERA = "2026-07-28"

BOOKING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name on the booking", "default": "Ada", "minLength": 1},
        "party_size": {"type": "integer", "title": "Guests", "minimum": 1, "maximum": 12, "default": 2},
        "outdoor": {"type": "boolean", "title": "Sit outside", "default": False},
        "budget": {"type": "number", "title": "Budget per person (EUR)", "minimum": 0},
        "cuisine": {"type": "string", "title": "Cuisine", "enum": ["french", "japanese", "mexican"],
                    "default": "french"},
    },
    "required": ["name", "party_size"],
}

app = MCPServer("elicitron-demo", instructions="Elicitron's demo server: book_table, ask and open_link ask "
                                               "the user (form and URL elicitation); echo does not.")


def _reply(result: ElicitResult) -> CallToolResult:
    """The tool result is the answer itself, so users and tests can see exactly what arrived."""
    payload = {"action": result.action, "content": result.content}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(payload, sort_keys=True))])


async def _elicit(
    ctx: Context, params: ElicitRequestFormParams | ElicitRequestURLParams
) -> CallToolResult | InputRequiredResult:
    if (ctx.protocol_version or "") >= MODERN_ERA:
        answers = ctx.input_responses or {}
        answer = answers.get("ask")
        if answer is None:
            return InputRequiredResult(input_requests={"ask": ElicitRequest(params=params)})
        return _reply(ElicitResult.model_validate(answer.model_dump(by_alias=True)))
    session = ctx.session
    if isinstance(params, ElicitRequestURLParams):
        result = await session.elicit_url(params.message, params.url, params.elicitation_id,
                                          related_request_id=ctx.request_id)
    else:
        result = await session.elicit_form(params.message, params.requested_schema,
                                           related_request_id=ctx.request_id)
    return _reply(result)


@app.tool()
async def book_table(ctx: Context, restaurant: str = "Chez MCP") -> CallToolResult | InputRequiredResult:
    """Book a table; asks for the booking details (string, integer, boolean, number, enum)."""
    params = ElicitRequestFormParams(message=f"Book a table at {restaurant}?", requested_schema=BOOKING_SCHEMA)
    return await _elicit(ctx, params)


@app.tool()
async def ask(ctx: Context, message: str, schema: dict[str, Any] | None = None, schema_json: str = "",
              repeat: int = 1) -> CallToolResult | InputRequiredResult:
    """Ask the user with any requestedSchema (passed through as given). `schema_json` gives it as JSON
    text instead, for values a caller cannot send as arguments (e.g. integers beyond 64 bits);
    `repeat` repeats the message, to try requests bigger than a call may be."""
    requested = json.loads(schema_json) if schema_json else schema or {"type": "object", "properties": {}}
    params = ElicitRequestFormParams.model_validate({"message": message * repeat, "requestedSchema": requested})
    return await _elicit(ctx, params)


@app.tool()
async def open_link(ctx: Context, url: str = "https://example.com/authorize",
                    elicitation_id: str = "demo-1") -> CallToolResult | InputRequiredResult:
    """Ask the user to open a URL (URL-mode elicitation)."""
    params = ElicitRequestURLParams(message="Please authorize the demo app in your browser.", url=url,
                                    elicitation_id=elicitation_id)
    return await _elicit(ctx, params)


@app.tool()
async def ask_briefly(ctx: Context, seconds: float = 1.0) -> str:
    """Ask, but give up after `seconds` (the server cancels its own request; pre-2026 protocol only)."""
    import anyio

    params = ElicitRequestFormParams(message=f"Answer within {seconds} s", requested_schema=BOOKING_SCHEMA)
    with anyio.move_on_after(seconds):
        result = await ctx.session.elicit_form(params.message, params.requested_schema,
                                               related_request_id=ctx.request_id)
        return json.dumps({"action": result.action, "content": result.content}, sort_keys=True)
    return "server gave up waiting"


_authorized: set[str] = set()


@app.tool()
async def needs_auth(ctx: Context, account: str = "demo") -> str:
    """Fails with -32042 (URL elicitation required) until `complete_auth` is called for the account."""
    from mcp.shared.exceptions import UrlElicitationRequiredError

    if account not in _authorized:
        raise UrlElicitationRequiredError([ElicitRequestURLParams(
            message=f"Sign in to {account} to continue", url=f"https://auth.example.com/login?account={account}",
            elicitation_id=f"auth-{account}")])
    return f"authorized as {account}"


@app.tool()
async def complete_auth(ctx: Context, account: str = "demo") -> str:
    """Simulate the browser flow finishing: mark the account and notify the client."""
    _authorized.add(account)
    await ctx.session.send_elicit_complete(f"auth-{account}")
    return "ok"


@app.tool()
async def hang() -> str:
    """Never answers (for testing a host's tool timeout)."""
    import anyio

    await anyio.sleep_forever()
    return "unreachable"


@app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def echo(text: str) -> str:
    """Return the text unchanged (no elicitation)."""
    return text


@app.tool(title="Cancel a booking", annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
def cancel_booking(restaurant: str = "Chez MCP") -> str:
    """Cancel a booking (pretend; annotated destructive, for tool approval's ask-destructive)."""
    return f"cancelled the booking at {restaurant}"


def _serve_http(port: int) -> None:
    import anyio
    import uvicorn

    # Bind first so the port is known before uvicorn starts, and no two tests race for one.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    port = listener.getsockname()[1]
    listener.listen(socket.SOMAXCONN)  # before it is announced: a client told the URL may connect at once
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
    print(f"LISTENING http://127.0.0.1:{port}/mcp", flush=True)
    anyio.run(uvicorn.Server(config).serve, [listener])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=0, help="HTTP port (default: any free one)")
    args = parser.parse_args()
    if args.http:
        _serve_http(args.port)
    else:
        app.run()


if __name__ == "__main__":
    main()
