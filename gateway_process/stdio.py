"""`elicitron serve`: one host over stdio, one peer of main, until the host closes our stdin.

main is attached (started first when none runs) before the host's first message is read, and the
servers get a few seconds to finish starting, so the handshake already carries their instructions
and the first listing is not a wait. SIGTERM/SIGINT (a host stopping us) end the session cleanly:
main hears `bye` and cancels what this host still has running, as it does when stdin closes.
"""

import logging
import signal
import sys
from pathlib import Path

import anyio
from mcp.server.runner import serve_dual_era_loop

from gateway_process.names import Exposure
from gateway_process.proxy import GatewayServer
from gateway_process.session import HostSession
from gateway_process.stdio_wire import stdio_streams
from shared.errors import ConfigError, MainUnreachableError

logger = logging.getLogger(__name__)

SETTLE_S = 5.0  # how long servers still starting may delay the host's handshake
EXIT_USAGE = 2


def run_stdio(connection: Path, exposure: Exposure, config: Path | None) -> int:
    return anyio.run(_serve, connection, exposure, config)


async def _serve(connection: Path, exposure: Exposure, config: Path | None) -> int:
    session = HostSession(connection, exposure, config=config)
    gateway = GatewayServer(exposure, lambda _ctx: session)
    session.on_instructions = lambda: gateway.refresh_instructions(session.link.servers)
    try:
        await session.ready()
        await session.settle(SETTLE_S)
    except ConfigError as exc:
        print(f"elicitron serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MainUnreachableError as exc:
        logger.warning("no main yet (%s); trying again on the host's first request", exc)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_stop_on_signal, group.cancel_scope)
            async with stdio_streams() as (read_stream, write_stream), gateway.server.lifespan(gateway.server) as state:
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
