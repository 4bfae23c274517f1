"""main's own stdio connection to a server (main_process/servers/stdio_transport.py) against a real
child process: the session's messages reach the server's stdin in the order they were sent, its
lines come back; a server that closes its stdin and lives on ends the session's reading at the next
write (a request would otherwise wait forever), and later sends fail."""

import asyncio
import sys
import tempfile
from typing import Any

import anyio
import mcp_types
import pytest
from mcp.shared.message import SessionMessage

from main_process.config import StdioServerConfig
from main_process.servers.stdio_transport import capped_stdio_client

# Echoes each line back until told to close its stdin; then says so and lives on.
ECHO_THEN_CLOSE = """
import os, signal, sys
for line in sys.stdin:
    if '"close-stdin"' in line:
        os.close(0)
        print('{"jsonrpc": "2.0", "method": "stdin-closed"}', flush=True)
        signal.pause()  # lives on until the transport's shutdown ends it
    sys.stdout.write(line)
    sys.stdout.flush()
"""


def _notice(method: str) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCNotification(jsonrpc="2.0", method=method))


def _method(item: Any) -> str:
    assert isinstance(item, SessionMessage), item
    return str(item.message.method)  # type: ignore[union-attr]


async def _session() -> None:
    config = StdioServerConfig(name="echo", command=sys.executable, args=["-c", ECHO_THEN_CLOSE])
    with tempfile.TemporaryFile("w+") as errlog:
        async with capped_stdio_client(config, errlog) as (read, write):
            async with anyio.create_task_group() as group:  # many senders at once keep their order
                for i in range(20):
                    group.start_soon(write.send, _notice(f"n{i}"))
                    await asyncio.sleep(0)
            assert [_method(await read.receive()) for _ in range(20)] == [f"n{i}" for i in range(20)]
            await write.send(_notice("close-stdin"))
            assert _method(await read.receive()) == "stdin-closed"
            with anyio.fail_after(10):
                await write.send(_notice("after"))  # the pipe is broken: reading ends
                with pytest.raises(anyio.EndOfStream):
                    await read.receive()
            with pytest.raises(anyio.BrokenResourceError):
                await write.send(_notice("again"))


@pytest.mark.slow
def test_messages_go_in_order_and_a_closed_stdin_ends_the_session() -> None:
    asyncio.run(_session())
