"""An MCP server (Python SDK, stdio; run as a script) that counts the calls of its `tally` tool, so a
test can ask it afterwards whether a call it was never to get ran anyway."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("tally")
_ran: list[str] = []


@app.tool()
def tally(text: str = "") -> str:
    """Counts one call."""
    _ran.append(text)
    return f"tally ran: {text}"


@app.tool()
def tallied() -> int:
    """How many times `tally` ran in this process."""
    return len(_ran)


if __name__ == "__main__":
    app.run()
