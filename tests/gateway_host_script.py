"""A host in its own process, for tests that kill it: mcp.Client on `elicitron serve`.

    python tests/gateway_host_script.py CONNECTION NAME '[["tool", {args}], ...]'

Starts every call at once and prints `progress <tool>` when a call reports progress, so the test
knows the call reached its server; then waits (the test kills it)."""

import json
import os
import sys

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters


async def main(connection: str, name: str, calls: list[tuple[str, dict[str, object]]]) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "cli_process", "serve", "--connection",
                                                                 connection], env=dict(os.environ))
    client = Client(params, client_info=types.Implementation(name=name, version="1"), cache=None)

    async def call(tool: str, arguments: dict[str, object]) -> None:
        async def note(progress: float, total: float | None, message: str | None) -> None:
            print(f"progress {tool}", flush=True)

        await client.call_tool(tool, arguments, progress_callback=note)

    async with client, anyio.create_task_group() as group:
        for tool, arguments in calls:
            group.start_soon(call, tool, arguments)
        print("calling", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
