"""WebServer: uvicorn's server, stopping the way a window should.

An open page's stream never ends by itself, so on SIGTERM or Ctrl-C the streams are ended at once
(each page peer says bye to main) instead of after uvicorn's grace period; and after its shutdown
it returns instead of raising the signal again, so `elicitron web` withdraws its web.json.
"""

import signal
from collections.abc import Callable
from types import FrameType

import uvicorn


class WebServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: now
        self.should_exit = True
        self._on_exit()
