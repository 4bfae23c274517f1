"""WebServer: uvicorn's server, stopping the way a window should.

An open page's stream never ends by itself, so on SIGTERM or Ctrl-C the streams are ended at once
(each page peer says bye to main) instead of after uvicorn's grace period; and after its shutdown
it returns instead of raising the signal again, so `elicitron web` withdraws its web.json. At rest
it wakes once a second (uvicorn's own loop looks ten times a second whether to stop: half of an
idle web window's CPU), and at once when told to stop. `beside` (the connection guard's sweep)
runs while it serves.
"""

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn


class WebServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None],
                 beside: Callable[[], Awaitable[None]] | None = None) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._beside = beside
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._stop, self._loop = asyncio.Event(), asyncio.get_running_loop()
        if self.should_exit:
            self._stop.set()
        beside = asyncio.ensure_future(self._beside()) if self._beside is not None else None
        try:
            counter = 0
            while not await self.on_tick(counter):
                counter = (counter + 10) % 864000  # on_tick's once-a-second work (the Date header) every time
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 1.0)
        finally:
            if beside is not None:
                beside.cancel()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: now
        self.should_exit = True
        self._on_exit()
        if self._loop is not None and self._stop is not None:
            # from a signal handler: between any two bytecodes of the loop, so through its wake-up
            self._loop.call_soon_threadsafe(self._stop.set)
