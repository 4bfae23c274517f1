"""An MCP server whose `flood` tool writes 48 MiB to stdout with no line break: one message far
over main's line cap. Stdio; run as a script with a directory: its first start marks it, and a
restart waits for a writer to open the FIFO `gate` there before it answers, so the test can read
main's status while the server is restarting."""

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

FLOOD_BYTES = 48 << 20
WIRE = os.dup(1)  # the SDK's stdio transport points fd 1 at stderr while it serves

app = MCPServer("long-line")


@app.tool()
def flood() -> str:
    """Writes the start of a message and 48 MiB more, without a line break."""
    data = memoryview(b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "'
                      + b"x" * FLOOD_BYTES)
    try:
        while data:
            data = data[os.write(WIRE, data):]
    except BrokenPipeError:
        pass  # main stopped reading
    return "flooded"


@app.tool()
def echo(text: str) -> str:
    """Returns its text."""
    return text


if __name__ == "__main__":
    state = Path(sys.argv[1])
    started = state / "started"
    if started.exists():
        os.close(os.open(state / "gate", os.O_RDONLY))  # blocks until the test opens it to write
    started.touch()
    app.run()
