"""An agent that owns its MCP clients and hands their elicitations to Elicitron (run as a process).

    python tests/ask_agent.py DEMO_SERVER CONNECTION

Calls the demo server's `book_table` twice: through `mcp.Client` (protocol 2026-07-28, an
InputRequiredResult) and through a bare `ClientSession` (the legacy `elicitation/create`), both
with `elicitation_callback(name="agent")`. Prints one JSON line per call: what the server got.
"""

import asyncio
import json
import sys

from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import CallToolResult, TextContent

from asker_process import elicitation_callback


def text_of(result: CallToolResult) -> str:
    first = result.content[0]
    if not isinstance(first, TextContent):
        raise TypeError(f"the server answered {first.type} content, not text")
    return first.text


async def main(demo_server: str, connection: str) -> None:
    callback = elicitation_callback(name="agent", connection=connection)
    server = StdioServerParameters(command=sys.executable, args=[demo_server])
    async with Client(server, elicitation_callback=callback) as client:
        result = await client.call_tool("book_table", {"restaurant": "the Client's pick"})
        print(json.dumps({"via": "Client", "server_got": json.loads(text_of(result))}), flush=True)
    async with stdio_client(server) as (read, write), \
            ClientSession(read, write, elicitation_callback=callback) as session:
        await session.initialize()
        result = await session.call_tool("book_table", {"restaurant": "the session's pick"})
        got = json.loads(text_of(result))
        print(json.dumps({"via": "ClientSession", "server_got": got}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
