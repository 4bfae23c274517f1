"""`elicitron serve [--server NAME]`: the host's stdio, relayed to its own session with that server
(or, without --server, with every server at once: `MergedRelay`, names `<server>__<name>`).

No MCP SDK here (serve starts in the time Python and pyzmq take): lines from fd 0 go to main as
they are (`msgMcpRelay`), main's come back out on fd 1, one per line. main starts this host's own
connection to the server, so the host negotiates protocol, capabilities and features with the
server itself, exactly as with its direct entry; main decides only consent on the way
(main_process/relay.py). What serve itself adds is in `RelayPump`: nothing is lost or left
waiting when main is not running yet (it is started, as `elicitron launch` would), goes away, or the
server's process ends.

With `--server` and a local main, serve first hands main the host's pipes (handover.py) and waits:
main reads and writes them itself until it gives them back (it stops, or went away), and serve
goes on from what main told it.

SIGTERM/SIGINT, or the host closing our stdin, end the session: main stops the server's process.
"""

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from gateway_process.attachment import MainAttachment
from gateway_process.handover import Returned, hand_over, returned
from gateway_process.merged_relay import MergedRelay
from gateway_process.relayed import RelayedSession
from shared.errors import ConfigError, MainUnreachableError
from shared.event_loop import loop_factory
from shared.lines import MAX_LINE_BYTES, LineSplitter, LineWriter, as_line, each_line, feed_chunks

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
        out.write(as_line(raw))

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
        if isinstance(relayed, RelayedSession) and relayed.link.attached:
            back = await _through_main(relayed, out_fd)
            if back is not None and back.over:
                await out.flush()
                return 0
            if back is not None:  # main stopped or went away: go on relaying, the handshake replayed
                relayed.pump.restore(back.handshake, back.outstanding)
                relayed.pump.detached(back.why)
                relayed.link.check_main()  # a killed main's link is let go now, not at its next tick
                each_line(splitter, back.leftover, relayed.from_host, to_host)
        await feed_chunks(0, lambda chunk: each_line(splitter, chunk, relayed.from_host, to_host))  # (no frame of its own)
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


async def _through_main(relayed: RelayedSession, out_fd: int) -> Returned | None:
    """A local main holds the host's pipes (no hop through serve) until it gives them back; None
    when it does not take them."""
    handed = await hand_over(relayed.link.connection_path, relayed.link.window, relayed.pump.session,
                             relayed.pump.server, 0, out_fd)
    return None if handed is None else await returned(handed)
