"""ConnectionStatus: what a window shows of its link to main, kept apart from the socket and Qt.

Three things, each told once when it changes: the `state` (CONNECTING, CONNECTED, RECONNECTING);
whether main is missing: True when the connection file is gone (main stopped, or never started) or
main said `bye` (its file counts as gone until it names another main), False once it is back; and
why a file that is there cannot be used (not 0600, malformed, another protocol: the fix in the
reason), "" once it can. The bridge says what happened and hands it the callbacks its signals emit.
"""

import logging
from collections.abc import Callable
from pathlib import Path

from shared.errors import ConnectionFileError

logger = logging.getLogger(__name__)

CONNECTING = "connecting"
CONNECTED = "connected"
RECONNECTING = "disconnected - reconnecting"


class ConnectionStatus:
    def __init__(self, connection_path: Path, *, on_state: Callable[[str], object],
                 on_missing: Callable[[bool], object], on_problem: Callable[[str], object]) -> None:
        self.state = ""
        self._connection_path = connection_path
        self._on_state, self._on_missing, self._on_problem = on_state, on_missing, on_problem
        self._file_problem = ""
        self._missing: bool | None = None

    def set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            logger.info("connection state: %s", state)
            self._on_state(state)

    def reconnecting(self, problem: ConnectionFileError | None, stopping: bool) -> None:
        """An attach failed or main was lost; `problem`: why its file could not be used."""
        if problem is not None:
            self._show_file_problem(problem)
        self.set_state(RECONNECTING)
        if stopping:  # main said bye: it is gone now, not after the silence limit
            self._set_missing(True)

    def found_main(self) -> None:
        """The file names a main that is not stopping (a hello goes to it)."""
        self._set_missing(False)
        if self._file_problem:
            self._file_problem = ""
            self._on_problem("")

    def _show_file_problem(self, problem: ConnectionFileError) -> None:
        exists = self._connection_path.exists()
        if str(problem) != self._file_problem:  # log each new problem once, not every second
            logger.warning("cannot reach main yet: %s", problem)
            self._file_problem = str(problem)
            # A file that is there but unusable is ours to fix, and the window says how.
            self._on_problem(str(problem) if exists else "")
        self._set_missing(not exists)

    def _set_missing(self, missing: bool) -> None:
        if missing != self._missing:
            self._missing = missing
            self._on_missing(missing)
