"""`elicitron serve [--server NAME]`: the host's stdio, relayed to its own session with that server
(or, without --server, with every server at once: `MergedRelay`, names `<server>__<name>`).

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
import functools
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from gateway_process.attachment import MainAttachment
from gateway_process.lines import MAX_LINE_BYTES, LineSplitter, LineWriter, Oversized, feed_chunks
from gateway_process.merged_relay import MergedRelay
from gateway_process.relayed import RelayedSession
from shared import jsonrpc
from shared.errors import ConfigError, MainUnreachableError, RpcCode
from shared.event_loop import loop_factory

logger = logging.getLogger(__name__)

EXIT_USAGE = 2


def run_relayed(connection: Path, server: str | None, config: Path | None) -> int:
    """`server` None: every server at once."""
    try:
        factory = loop_factory()
    except ConfigError as exc:
        print(f"elicitron serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_serve(connection, server, config), loop_factory=factory)
    except KeyboardInterrupt:  # a signal before the loop could take it
        return 0


async def _serve(connection: Path, server: str | None, config: Path | None) -> int:
    me = asyncio.current_task()
    assert me is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, me.cancel)
    out_fd = os.dup(1)
    os.dup2(2, 1)  # from here on fd 1 is stderr: a stray print never reaches the host's stream
    out = await LineWriter.open(out_fd)

    def to_host(raw: bytes) -> None:
        out.write((jsonrpc.one_line(raw) if b"\n" in raw or b"\r" in raw else raw) + b"\n")

    attachment = MainAttachment(connection, "elicitron serve", config=config)
    relayed = RelayedSession(attachment, server, to_host) if server is not None else MergedRelay(attachment, to_host)
    try:
        try:
            await relayed.attachment.ready()  # its on_attached lets what waits go
        except ConfigError as exc:
            print(f"elicitron serve: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except MainUnreachableError as exc:
            logger.warning("no main yet (%s); trying again on the host's first message", exc)
        splitter = LineSplitter(MAX_LINE_BYTES)
        await feed_chunks(0, functools.partial(_lines, splitter, relayed, to_host))  # (no frame of its own)
        await out.flush()  # what the host is owed goes out before we leave
    except asyncio.CancelledError:
        pass
    finally:
        relayed.close()
        out.close()
        os.close(out_fd)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    return 0


def _lines(splitter: LineSplitter, relayed: RelayedSession | MergedRelay, to_host: Callable[[bytes], None],
           chunk: bytes) -> None:
    for line in splitter.feed(chunk):
        if isinstance(line, Oversized):
            logger.warning("refused a %d-byte message from the host (limit %d)", line.size, MAX_LINE_BYTES)
            to_host(jsonrpc.error_response(line.request_id(), RpcCode.INVALID_REQUEST,
                                           f"message is over {MAX_LINE_BYTES:,} bytes (at least {line.size:,}); not read"))
            continue
        line = line.strip()
        if line:
            relayed.from_host(line)
