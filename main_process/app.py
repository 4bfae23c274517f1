"""main: lock, bind, publish the connection file, run servers and broker until told to stop."""

import asyncio
import logging
import os
import secrets
import signal
from pathlib import Path

import platformdirs

from main_process.broker import Broker
from main_process.config import Config
from main_process.lock import InstanceLock
from main_process.servers import ManagedServer
from shared import PROTOCOL_VERSION, channels
from shared.connection_file import (
    ConnectionInfo,
    ensure_private_dir,
    ipc_endpoint_beside,
    remove_connection_file,
    write_connection_file,
)
from shared.messages import CallError, CallTool, ChannelReply, ServerInfo

logger = logging.getLogger(__name__)


def default_log_dir() -> Path:
    return Path(platformdirs.user_state_dir("elicitron")) / "log"


class MainApp:
    """The host the broker talks to: owns the servers and the shutdown switch."""

    def __init__(self, config: Config, connection_path: Path, log_dir: Path | None = None) -> None:
        self.config = config
        self.connection_path = connection_path
        self.log_dir = log_dir or default_log_dir()
        self._stop = asyncio.Event()
        self.servers: dict[str, ManagedServer] = {}
        self.broker: Broker | None = None

    # BrokerHost
    def server_infos(self) -> list[ServerInfo]:
        return [server.info() for server in self.servers.values()]

    async def call_tool(self, request: CallTool, origin: str) -> ChannelReply:
        server = self.servers.get(request.server)
        if server is None:
            known = ", ".join(sorted(self.servers)) or "none"
            return ChannelReply(error=CallError(code=-32602, message=f"unknown server {request.server!r} "
                                                                     f"(configured: {known})"))
        return await server.call_tool(request.tool, request.arguments, origin)

    def request_shutdown(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        ensure_private_dir(self.connection_path.parent)
        lock = InstanceLock(self.connection_path.with_name(self.connection_path.name + ".lock"))
        lock.acquire()
        try:
            await self._run_locked()
        finally:
            lock.release()

    async def _run_locked(self) -> None:
        token = secrets.token_hex(32)
        broker = Broker(
            endpoint=ipc_endpoint_beside(self.connection_path),
            token=token,
            session=channels.new_uuid7(),
            host=self,
        )
        self.broker = broker
        broker.bind()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(signum, self._stop.set)
        for name, server_config in self.config.servers.items():
            self.servers[name] = ManagedServer(server_config, broker, broker.publish_servers, self.log_dir)
        broker.start()
        write_connection_file(self.connection_path, ConnectionInfo(
            protocol=PROTOCOL_VERSION, endpoint=broker.endpoint, token=token, pid=os.getpid()))
        logger.info("main %s listening on %s (config %s, %d servers)", broker.session, broker.endpoint,
                    self.config.source, len(self.servers))
        server_tasks = [asyncio.create_task(s.run(), name=f"server {s.name}") for s in self.servers.values()]
        try:
            await self._stop.wait()
            logger.info("stopping: %d servers", len(self.servers))
        finally:
            remove_connection_file(self.connection_path, token)
            for server in self.servers.values():
                server.stop()
            if server_tasks:
                _, unfinished = await asyncio.wait(server_tasks, timeout=10)
                for task in unfinished:
                    task.cancel()
                if unfinished:
                    await asyncio.wait(unfinished, timeout=5)
            await broker.close()
            logger.info("main stopped")
