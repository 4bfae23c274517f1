"""SupervisedChild: a peer process main runs beside itself (`--mcp-http`'s gateway, `--web`'s web window).

main starts `argv`, waits for the child's first stdout line (`ready_url` reads the URL it listens on
from it), restarts it with backoff if it dies (RESTART_LIMIT failures without a STABLE_S run end
that), and stops it with main. The child attaches to main like any other peer. Its stderr goes to
a capped log file; why it last stopped (its last stderr line) is `error`, for main's log and
`elicitron status`. Lines it prints after the first go to `on_line`.
"""

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

from main_process.capped_log import CappedLog
from shared.messages import HttpGatewayState

logger = logging.getLogger(__name__)

LISTEN_TIMEOUT_S = 60.0  # the child imports its libraries and binds before it prints its URL
STOP_TIMEOUT_S = 5.0
RESTART_LIMIT = 5
STABLE_S = 60.0


class SupervisedChild:
    """Runs and supervises one child; `on_url(url)` once it listens (again)."""

    what = "child"  # for the log: "the <what> on <listen> stopped"

    def __init__(self, listen: str, log_path: Path, on_url: Callable[[str], None], *,
                 error_prefix: str = "") -> None:
        self.listen = listen
        self.log_path = log_path
        self.url: str | None = None
        self.state: HttpGatewayState = "starting"
        self.error: str | None = None  # why the child last stopped
        self._error_prefix = error_prefix  # what the child starts its stderr lines with
        self._on_url = on_url
        self._stopping = asyncio.Event()
        self._process: asyncio.subprocess.Process | None = None
        self._restarting = False  # restart(): the child's exit is asked for, not a failure
        self._listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- what a kind of child says ------------------------------------------------------------

    def argv(self) -> list[str]:
        raise NotImplementedError

    def ready_url(self, line: str) -> str | None:
        """The URL in the child's first line, or None when the line says it did not start."""
        raise NotImplementedError

    def on_line(self, line: str) -> None:
        """A line the child printed after its first."""

    def on_start(self) -> None:
        """Called before each run of the child."""

    # ---- supervision ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=self.what)

    async def stop(self) -> None:
        self._stopping.set()
        process = self._process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._task is not None:
            await asyncio.wait([self._task], timeout=STOP_TIMEOUT_S)

    async def restart(self) -> None:
        """Stop the child and start it again now; returns once it listens (or a timeout passed:
        `state` says how it went)."""
        process = self._process
        self._listening.clear()
        self.state = "restarting"
        if self._task is None or self._task.done():  # it had failed for good: a new start, failures forgotten
            self.start()
        elif process is not None and process.returncode is None:
            self._restarting = True
            process.terminate()
        try:
            await asyncio.wait_for(self._listening.wait(), LISTEN_TIMEOUT_S)
        except TimeoutError:
            pass

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            error = await self._run_once()
            if self._stopping.is_set():
                self.state = "stopped"
                return
            if self._restarting:
                self._restarting = False
                continue
            self.error = error
            failures = 1 if time.monotonic() - started > STABLE_S else failures + 1
            logger.warning("the %s on %s stopped (%s); failure %d of %d", self.what, self.listen, error,
                           failures, RESTART_LIMIT)
            if failures >= RESTART_LIMIT:
                self.state = "failed"
                logger.error("not restarting the %s on %s (%s); see %s", self.what, self.listen, error,
                             self.log_path)
                return
            self.state = "restarting"
            try:
                await asyncio.wait_for(self._stopping.wait(), min(0.5 * 2 ** (failures - 1), 8.0))
            except TimeoutError:
                pass

    async def _run_once(self) -> str:
        self.on_start()
        log = CappedLog(self.log_path)  # its stderr, bounded: a child flooding it cannot fill the disk
        process = self._process = await asyncio.create_subprocess_exec(
            sys.executable, *self.argv(),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        copying = asyncio.create_task(log.copy(process.stderr))
        try:
            line = await asyncio.wait_for(process.stdout.readline(), LISTEN_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            await copying
            return f"no first line within {LISTEN_TIMEOUT_S:.0f} s"
        text = line.decode(errors="replace").strip()
        url = self.ready_url(text)
        if url is not None:
            self.url = url
            self.state = "listening"
            self._on_url(url)
            self._listening.set()
            logger.info("the %s listens at %s", self.what, url)
            await self._read_lines(process.stdout)
        code = await process.wait()
        await copying
        said = log.last_line.removeprefix(self._error_prefix) or (text if url is None else "")
        return f"exit code {code}" + (f": {said[:300]}" if said else "")

    async def _read_lines(self, stdout: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # a line over the reader's limit: not ours
                continue
            if not line:
                return
            self.on_line(line.decode(errors="replace"))
