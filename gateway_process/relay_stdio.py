"""`elicitron serve [--server NAME]`: the host's stdio, relayed to its own session with that server
(or, without --server, with every server at once: main merges them, names `<server>__<name>`).

No MCP SDK here (serve starts in the time Python and pyzmq take): lines from fd 0 go to main as
they are (`msgMcpRelay`), main's come back out on fd 1, one per line. main starts this host's own
connection to the server, so the host negotiates protocol, capabilities and features with the
server itself, exactly as with its direct entry; main decides only consent on the way
(main_process/relay/relay.py). What serve itself adds is in `RelayPump`: nothing is lost or left
waiting when main is not running yet (it is started, as `elicitron launch` would), goes away, or the
server's process ends.

With a local main, serve first hands main the host's pipes (handover.py) and waits:
main reads and writes them itself until it gives them back (it stops, or went away), and serve
goes on from what main told it.

SIGTERM/SIGINT/SIGHUP, the host closing our stdin, or the host closing its end of our stdout (it
stopped reading) end the session, and serve exits 0: main stops the server's process.

Each descriptor has one owner that closes it once: serve its copy of the host's stdout (`out_fd`;
its stdin stays open until it exits), each pipe transport a copy of its own (shared/lines.py), main
the copies it was sent.
"""

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

from gateway_process.attachment import MainAttachment
from gateway_process.handover import Returned, hand_over, returned
from gateway_process.relayed import RelayedSession
from shared.errors import ConfigError, MainUnreachableError
from shared.event_loop import loop_factory
from shared.lines import MAX_LINE_BYTES, LineSplitter, LineWriter, as_line, each_line, feed_chunks
from shared.messages import EVERY_SERVER

logger = logging.getLogger(__name__)

EXIT_USAGE = 2
# A host ends serve with any of them (SIGHUP: its terminal or session went away); each ends the
# session as the host closing our stdin would, main told at once rather than after our silence.
ENDING_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
MAIN_EXIT_WAIT_S: Final = 5.0  # a killed process's sockets close a moment before its pid is gone


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
    for signum in ENDING_SIGNALS:
        loop.add_signal_handler(signum, me.cancel)
    # serve's own copy of the host's stdout, closed once, below: the writer writes a copy of its own
    # and main gets another, so neither closing theirs can close this number under the other.
    out_fd = os.dup(1)
    os.dup2(2, 1)  # from here on fd 1 is stderr: a stray print never reaches the host's stream
    out = await LineWriter.open(out_fd)

    def to_host(raw: bytes) -> None:
        out.write(as_line(raw))

    attachment = MainAttachment(connection, "elicitron serve", config=config)
    relayed = RelayedSession(attachment, server if server is not None else EVERY_SERVER, to_host)
    try:
        try:
            await relayed.attachment.ready()  # its welcome (on_pushed) lets what waits go
        except ConfigError as exc:
            print(f"elicitron serve: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except MainUnreachableError as exc:
            logger.warning("no main yet (%s); trying again on the host's first message", exc)
        splitter = LineSplitter(MAX_LINE_BYTES)
        if relayed.link.attached:
            back = await _through_main(relayed, out_fd)
            if back is not None and back.over:
                logger.info("the session is over: %s", back.why)
                await out.flush()
                return 0
            if back is not None:  # main stopped or went away: go on relaying, the handshake replayed
                relayed.pump.restore(back.handshake, back.outstanding)
                relayed.pump.detached(back.why)
                if back.said_why:
                    relayed.link.check_main()
                else:  # killed: the host's next request waits (unread) until the link knows it too
                    await relayed.link.main_ended(MAIN_EXIT_WAIT_S)
                each_line(splitter, back.leftover, relayed.from_host, to_host)
        await _relay_until_the_host_ends(out, lambda chunk: each_line(splitter, chunk, relayed.from_host, to_host))
        await out.flush()  # what the host is owed goes out before we leave
    except asyncio.CancelledError:
        pass
    finally:
        relayed.close()
        out.close()
        os.close(out_fd)
        for signum in ENDING_SIGNALS:
            loop.remove_signal_handler(signum)
    return 0


async def _relay_until_the_host_ends(out: LineWriter, feed: Callable[[bytes], None]) -> None:
    """The host's lines until it closes our stdin or stops reading our stdout, which ends a
    session as surely (a host shutting down often closes that end first)."""
    reading = asyncio.ensure_future(feed_chunks(0, feed))  # (no frame of its own)
    try:
        await asyncio.wait({reading, out.gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        reading.cancel()
    if out.gone.done():
        logger.info("the session is over: the host stopped reading")
    elif not reading.cancelled():
        reading.result()  # (what went wrong reading, if anything)


async def _through_main(relayed: RelayedSession, out_fd: int) -> Returned | None:
    """A local main holds the host's pipes (no hop through serve) until it gives them back; None
    when it does not take them. main watches both ends meanwhile: a host that stops reading is its
    to notice (serve's writer sees it too, and waits for main's `over`)."""
    handed = await hand_over(relayed.link.connection_path, relayed.link.window, relayed.pump.session,
                             relayed.pump.server, 0, out_fd)
    return None if handed is None else await returned(handed)
