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
from gateway_process.relay_pump import RelayPump
from shared import channels, jsonrpc
from shared.errors import ConfigError, MainUnreachableError, RpcCode, UndeliverableRequestError
from shared.messages import (
    ElicitationDismiss,
    ElicitationInvoke,
    ErrorNotice,
    ListChanged,
    McpClose,
    McpRelay,
    ServerInfo,
)

logger = logging.getLogger(__name__)

EXIT_USAGE = 2


def run_relayed(connection: Path, server: str, config: Path | None) -> int:
    try:
        return asyncio.run(_serve(connection, server, config))
    except KeyboardInterrupt:  # a signal before the loop could take it
        return 0


class _Relayed:
    """The adapter: stdin/stdout and the link to main around one RelayPump."""

    def __init__(self, attachment: MainAttachment, server: str, out: "asyncio.Queue[bytes]") -> None:
        self.attachment = attachment
        self.link = attachment.link
        self.pump = RelayPump(server=server, session="serve-" + channels.new_uuid7(), to_main=self._to_main,
                              to_host=out.put_nowait)
        self._connecting: asyncio.Task[None] | None = None
        attachment.adopt(self)

    def from_host(self, raw: bytes) -> None:
        self.pump.from_host(raw)
        if not self.pump.online:
            self.connect()

    def connect(self) -> None:
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        try:
            await self.attachment.ready()
        except (MainUnreachableError, ConfigError) as exc:
            logger.warning("main is not reachable: %s", exc)
            self.pump.unreachable(f"Elicitron's main is not reachable: {exc}")
            return
        if not self.pump.online:
            self.pump.attached()

    def _to_main(self, raw: bytes) -> str | None:
        try:
            self.link.send(channels.MCP_RELAY, McpRelay(session=self.pump.session, message=raw,
                                                         server=self.pump.server))
        except MainUnreachableError as exc:
            return f"Elicitron's main went away: {exc}"
        except UndeliverableRequestError as exc:
            return f"Elicitron cannot pass this message on: {exc}"
        return None

    def close(self) -> None:
        if self.link.attached:
            try:
                self.link.send(channels.MCP_CLOSE, McpClose(session=self.pump.session))
            except MainUnreachableError:
                pass
        self.link.close()

    # ---- LinkEvents ------------------------------------------------------------------------

    def on_relay(self, message: McpRelay) -> None:
        if message.session == self.pump.session:
            self.pump.from_main(message.message)

    def on_relay_closed(self, close: McpClose) -> None:
        if close.session == self.pump.session:
            logger.warning("the session with %s ended: %s", self.pump.server, close.reason)
            self.pump.lost(close.reason or "the server's session ended")

    def on_detached(self, why: str) -> None:
        self.pump.detached(f"Elicitron's main went away ({why})")

    def on_attached(self, servers: list[ServerInfo], again: bool) -> None:
        if not self.pump.online:
            self.pump.attached()

    def on_servers(self, servers: list[ServerInfo]) -> None:
        pass

    def on_invoke(self, invoke: ElicitationInvoke) -> None:
        pass  # a relayed session's requests come as the server's own messages

    def on_dismiss(self, dismiss: ElicitationDismiss) -> None:
        pass

    def on_refused(self, notice: ErrorNotice) -> None:
        pass

    def on_list_changed(self, change: ListChanged) -> None:
        pass  # the server tells its host itself


async def _serve(connection: Path, server: str, config: Path | None) -> int:
    me = asyncio.current_task()
    assert me is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, me.cancel)
    out_fd = os.dup(1)
    os.dup2(2, 1)  # from here on fd 1 is stderr: a stray print never reaches the host's stream
    out: asyncio.Queue[bytes] = asyncio.Queue()
    relayed = _Relayed(MainAttachment(connection, "elicitron serve", config=config), server, out)
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


async def _read_lines(relayed: _Relayed, out: "asyncio.Queue[bytes]") -> None:
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
