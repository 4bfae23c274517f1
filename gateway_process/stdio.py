"""`elicitron serve`: one host over stdio, one peer of main, until the host closes our stdin.

main is attached (started first when none runs) before the host's first message is read, and the
servers get a few seconds to finish starting, so the handshake already carries their instructions
and the first listing is not a wait.

Loading the SDK takes most of serve's start-up, so it loads on a thread (`_SdkLoader`) while this
module, which imports no `mcp`, attaches to main and reads the host's first line: an `initialize`
is answered right there (`handshake.py`). The SDK then serves everything from that first line on
(`stdio_host.py`); its own reply to the `initialize` is dropped.

SIGTERM/SIGINT (a host stopping us) end the session cleanly: main hears `bye` and cancels what this
host still has running, as it does when stdin closes.
"""

import asyncio
import concurrent.futures
import importlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from gateway_process.attachment import MainAttachment
from gateway_process.handshake import early_reply
from gateway_process.lines import write_all
from gateway_process.names import Exposure
from shared.errors import ConfigError, MainUnreachableError

logger = logging.getLogger(__name__)

SETTLE_S = 5.0  # how long servers still starting may delay the host's handshake
EXIT_USAGE = 2
MAX_OPENING_BYTES = 1 << 20  # a first line longer than this is left to the SDK's reader and its limit
_SDK_MODULE = "gateway_process.stdio_host"


def run_stdio(connection: Path, exposure: Exposure, config: Path | None) -> int:
    sdk = _SdkLoader()
    try:
        return asyncio.run(_serve(connection, exposure, config, sdk))
    except KeyboardInterrupt:  # a signal before the loop could take it
        return 0


class _SdkLoader:
    """Imports the SDK side on a daemon thread, from construction on."""

    def __init__(self) -> None:
        self.done: concurrent.futures.Future[None] = concurrent.futures.Future()
        threading.Thread(target=self._load, name="sdk-import", daemon=True).start()

    def _load(self) -> None:
        try:
            importlib.import_module(_SDK_MODULE)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting loop as it is
            self.done.set_exception(exc)
        else:
            self.done.set_result(None)


async def _serve(connection: Path, exposure: Exposure, config: Path | None, sdk: _SdkLoader) -> int:
    me = asyncio.current_task()
    assert me is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, me.cancel)
    attachment = MainAttachment(connection, "elicitron serve", config=config)
    try:
        try:
            await attachment.ready()
            await attachment.settle(SETTLE_S)
        except ConfigError as exc:
            print(f"elicitron serve: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except MainUnreachableError as exc:
            logger.warning("no main yet (%s); trying again on the host's first request", exc)
        opening = await _read_opening(0)
        first_line = _first_line(opening)
        early = early_reply(first_line, exposure, attachment.link.servers) if first_line else None
        if early is not None:
            write_all(1, early[1])
        await asyncio.wrap_future(sdk.done)
    except asyncio.CancelledError:
        attachment.link.close()
        return 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    serve_host = importlib.import_module(_SDK_MODULE).serve_host
    return await serve_host(attachment, exposure, opening, early)


def _first_line(opening: bytes) -> bytes | None:
    end = opening.find(b"\n")
    return None if end < 0 else opening[:end]


class _Opening(asyncio.Protocol):
    """Collects what arrives until the first line is complete (or EOF, or MAX_OPENING_BYTES)."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.data = bytearray()
        self._done = done

    def data_received(self, data: bytes) -> None:
        self.data += data
        if b"\n" in data or len(self.data) > MAX_OPENING_BYTES:
            self._finish()

    def eof_received(self) -> bool:
        self._finish()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self._done.done():
            self._done.set_result(None)


async def _read_opening(fd: int) -> bytes:
    """The host's first line and whatever came with it; b"" when `fd` is not a pipe (a file or a
    terminal: the SDK's reader handles those) or the host closed it at once."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    protocol = _Opening(done)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: protocol, os.fdopen(fd, "rb", closefd=False))
    except (ValueError, OSError):
        return b""
    try:
        await done
    finally:
        transport.close()  # stops reading now; fd 0 stays open for the SDK's reader
    return bytes(protocol.data)
