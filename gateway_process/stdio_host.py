"""The SDK side of `elicitron serve` (`stdio.py` loads it on a thread while it answers `initialize`).

The host's session runs on the SDK's dual-era loop from the host's first line on: what `stdio.py`
already read is served first, and when it answered the `initialize` itself, the SDK's own reply to
that request is dropped (after a check that it says the same).
"""

import logging
import signal

import anyio
from mcp.server.runner import serve_dual_era_loop

from gateway_process.attachment import MainAttachment
from gateway_process.names import Exposure
from gateway_process.proxy import GatewayServer
from gateway_process.session import HostSession
from gateway_process.stdio_wire import EarlyAnswer, stdio_streams

logger = logging.getLogger(__name__)


async def serve_host(attachment: MainAttachment, exposure: Exposure, opening: bytes,
                     early: tuple[int | str, bytes] | None) -> int:
    """Serve the host until it closes our stdin (or a signal); `opening`: the bytes already read
    from stdin; `early`: the id and reply line of an `initialize` already answered."""
    session = HostSession(attachment.connection, exposure, attachment=attachment)
    gateway = GatewayServer(exposure, lambda _ctx: session)
    session.on_instructions = lambda: gateway.refresh_instructions(session.link.servers)
    gateway.refresh_instructions(session.link.servers)
    answered = EarlyAnswer(*early) if early is not None else None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_stop_on_signal, group.cancel_scope)
            async with stdio_streams(opening=opening, answered=answered) as (read_stream, write_stream), \
                    gateway.server.lifespan(gateway.server) as state:
                await serve_dual_era_loop(gateway.server, read_stream, write_stream, lifespan_state=state)
            group.cancel_scope.cancel()  # the host closed our stdin
    finally:
        session.close()
    return 0


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("stopping on signal %d", signum)
            scope.cancel()
            return
