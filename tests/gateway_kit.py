"""Hosts for the gateway tests: mcp's own `Client` on a real `elicitron serve` process.

Each `Host` is a Client living in one task of a background asyncio loop (a Client must be entered
and left in the same task), so a test thread can drive it while pytest-qt runs the Qt loop on
the main thread. Every wait has a timeout.
"""

import asyncio
import concurrent.futures
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import mcp_types as types
from kit.env import child_env
from kit.main import RunningMain
from kit.paths import ROOT
from kit.zygote import launched, launched_cli
from mcp import Client, StdioServerParameters
from mcp.client.session import ElicitationFnT

PROBE_SERVER = ROOT / "tests" / "gateway_probe_server.py"
T = TypeVar("T")


def probe_entry(**extra: Any) -> dict[str, Any]:
    return {**launched(PROBE_SERVER), **extra}  # forked by the test zygote (kit/zygote.py)


def serve_params(connection: Path, *args: str, exec_serve: bool = False) -> StdioServerParameters:
    """`elicitron serve --connection FILE ARGS` as a host's config would start it: forked from the
    test zygote (kit/zygote.py `launched_cli`; 0.27 s of CPU each when exec'd, and the suite starts
    about 200), or `exec_serve`: exec'd, for a test that looks at serve's own process (its pipes)."""
    serve = ["serve", "--connection", str(connection), *args]
    command, *argv = [sys.executable, "-m", "cli_process", *serve] if exec_serve else launched_cli(*serve)
    return StdioServerParameters(command=command, args=argv, env=child_env(), cwd=str(ROOT))


class HostLoop:
    """One asyncio loop on a daemon thread for every host of a test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="hosts", daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> "concurrent.futures.Future[T]":
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


class Host:
    """An MCP host: `mcp.Client` on the gateway, with a name and maybe an elicitation callback."""

    def __init__(self, loop: HostLoop, server: Any, name: str, *, mode: str = "auto",
                 elicitation: ElicitationFnT | None = None, message_handler: Any = None) -> None:
        """`server`: what `Client` takes (StdioServerParameters for `elicitron serve`, or a transport)."""
        self._loop = loop
        self.client = Client(server, mode=mode, elicitation_callback=elicitation, message_handler=message_handler,
                             client_info=types.Implementation(name=name, version="1.0"), cache=None)
        self._stop: asyncio.Event | None = None
        self._life: concurrent.futures.Future[None] | None = None

    def open(self, timeout: float = 60) -> "Host":
        self.opening().result(timeout)
        return self

    def opening(self) -> "concurrent.futures.Future[None]":
        """Start the host; the future is done once its Client is connected (for opening many at once)."""
        entered: concurrent.futures.Future[None] = concurrent.futures.Future()

        async def live() -> None:
            self._stop = asyncio.Event()
            try:
                async with self.client:
                    entered.set_result(None)
                    await self._stop.wait()
            except BaseException as exc:
                if not entered.done():
                    entered.set_exception(exc)
                raise

        self._life = self._loop.submit(live())
        return entered

    def close(self, timeout: float = 30) -> None:
        if self._stop is not None and self._life is not None and not self._life.done():
            self._loop.loop.call_soon_threadsafe(self._stop.set)
            self._life.result(timeout)

    def run(self, make: Callable[[Client], Coroutine[Any, Any, T]], timeout: float = 30) -> T:
        return self._loop.run(make(self.client), timeout)

    def start(self, make: Callable[[Client], Coroutine[Any, Any, T]]) -> "concurrent.futures.Future[T]":
        return self._loop.submit(make(self.client))

    def call(self, tool: str, arguments: dict[str, Any] | None = None, timeout: float = 30) -> types.CallToolResult:
        return self.run(lambda c: c.call_tool(tool, arguments or {}), timeout)

    def tool_names(self, timeout: float = 30) -> list[str]:
        return [tool.name for tool in self.run(lambda c: c.list_tools(), timeout).tools]


def open_beside(host: Host, main: RunningMain, timeout: float = 60) -> Host:
    """Open `host` while `main`'s contract-only peers (a test's window) keep heartbeating: they
    heartbeat only while the test reads them, and opening a host takes its servers' start-up (each
    host has its own session, and process, per server), longer than main's 3 s of patience."""
    opened = host.opening()
    deadline = time.monotonic() + timeout
    while True:
        try:
            opened.result(0.2)
            return host
        except TimeoutError:
            if time.monotonic() > deadline:
                raise
            for peer in main.peers:
                peer.heartbeat_if_due()


def text_of(result: types.CallToolResult) -> str:
    return "".join(item.text for item in result.content if isinstance(item, types.TextContent))


def status_json(main: RunningMain) -> dict[str, Any]:
    import json

    done = main.cli("status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
