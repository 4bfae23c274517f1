"""`elicitron serve --server NAME`: the host's stdio, relayed to its own session with that server.

No MCP SDK here (serve starts in the time Python and pyzmq take): lines from fd 0 go to main as
they are (`msgMcpRelay`), main's come back out on fd 1, one per line. main starts this host's own
connection to the server, so the host negotiates protocol, capabilities and features with the
server itself, exactly as with its direct entry; main decides only consent on the way
(main_process/relay.py). What serve itself adds is in `RelayPump`: nothing is lost or left
waiting when main is not running yet (it is started, as `elicitron launch` would), goes away, or the
server's process ends.

SIGTERM/SIGINT, or the host closing our stdin, end the session: main stops the server's process.
"""

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from gateway_process.attachment import MainAttachment
from gateway_process.lines import MAX_LINE_BYTES, LineSplitter, Oversized, fd_writer, read_chunks
from gateway_process.relayed import RelayedSession
from shared import jsonrpc
from shared.errors import ConfigError, MainUnreachableError, RpcCode

logger = logging.getLogger(__name__)

EXIT_USAGE = 2


def run_relayed(connection: Path, server: str, config: Path | None) -> int:
    try:
        return asyncio.run(_serve(connection, server, config))
    except KeyboardInterrupt:  # a signal before the loop could take it
        return 0


async def _serve(connection: Path, server: str, config: Path | None) -> int:
    me = asyncio.current_task()
    assert me is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, me.cancel)
    out_fd = os.dup(1)
    os.dup2(2, 1)  # from here on fd 1 is stderr: a stray print never reaches the host's stream
    out: asyncio.Queue[bytes] = asyncio.Queue()
    relayed = RelayedSession(MainAttachment(connection, "elicitron serve", config=config), server, out.put_nowait)
    writer = asyncio.ensure_future(_write_lines(out_fd, out))
    try:
        try:
            await relayed.attachment.ready()
            relayed.pump.attached()
        except ConfigError as exc:
            print(f"elicitron serve: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except MainUnreachableError as exc:
            logger.warning("no main yet (%s); trying again on the host's first message", exc)
        await _read_lines(relayed, out)
        await out.join()  # what the host is owed goes out before we leave
    except asyncio.CancelledError:
        pass
    finally:
        relayed.close()
        writer.cancel()
        os.close(out_fd)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    return 0


async def _read_lines(relayed: RelayedSession, out: "asyncio.Queue[bytes]") -> None:
    splitter = LineSplitter(MAX_LINE_BYTES)
    async for chunk in read_chunks(0, b""):
        for line in splitter.feed(chunk):
            if isinstance(line, Oversized):
                logger.warning("refused a %d-byte message from the host (limit %d)", line.size, MAX_LINE_BYTES)
                out.put_nowait(jsonrpc.error_response(
                    line.request_id(), RpcCode.INVALID_REQUEST,
                    f"message is over {MAX_LINE_BYTES:,} bytes (at least {line.size:,}); not read"))
                continue
            if line.strip():
                relayed.from_host(line.strip())


async def _write_lines(fd: int, out: "asyncio.Queue[bytes]") -> None:
    write = await fd_writer(fd)
    while True:
        batch = [await out.get()]
        while not out.empty():  # everything already waiting goes out in one write
            batch.append(out.get_nowait())
        try:
            await write(b"".join(jsonrpc.one_line(raw) + b"\n" for raw in batch))
        except (OSError, ConnectionError) as exc:  # the host closed its end: nothing more to say
            logger.info("the host stopped reading: %s", exc)
            for _ in batch:
                out.task_done()
            while not out.empty():
                out.get_nowait()
                out.task_done()
            return
        for _ in batch:
            out.task_done()
