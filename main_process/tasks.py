"""Background work a part of main starts and must account for at its close: `Tasks` holds each task
until it ends (asyncio keeps only a weak reference to a running task), and `Rerun` runs one piece
of work at a time, once more if it was asked for again meanwhile (a read of "what changed" that a
wake-up during the read must not miss, and must not run twice at once)."""

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any


class Tasks:
    """The tasks one part started and has not seen end."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._running)

    def start(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    def start_now(self, coro: Coroutine[Any, Any, Any]) -> None:
        """As `start`, but run up to its first wait before this returns: what it does before that is
        done, in the order it was asked. A store call that never suspends (SQLite) is then done here,
        an error it raised raised here, as if the call were synchronous (store/interface.py)."""
        task = asyncio.Task(coro, loop=asyncio.get_running_loop(), eager_start=True)
        if task.done():
            task.result()
            return
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def cancel(self) -> None:
        for task in list(self._running):
            task.cancel()

    async def wait_running(self) -> None:
        """Until the tasks running now ended (not those started meanwhile)."""
        if self._running:
            await asyncio.gather(*list(self._running))

    async def wait(self) -> None:
        """Until every task ended, those they start meanwhile included (errors are theirs)."""
        while self._running:  # (a task's discard runs a turn after it ends: awaiting ended tasks never yields)
            ending = list(self._running)
            await asyncio.gather(*ending, return_exceptions=True)
            self._running.difference_update(ending)


class Rerun:
    """`work` run on `tasks` when asked, never twice at once: asked while it runs, it runs once more
    after (however often it was asked meanwhile)."""

    def __init__(self, tasks: Tasks, work: Callable[[], Awaitable[None]]) -> None:
        self._tasks = tasks
        self._work = work
        self.running = False
        self._again = False

    def ask(self) -> None:
        if self.running:
            self._again = True
            return
        self.running = True
        self._tasks.start(self._run())

    async def _run(self) -> None:
        try:
            while True:
                self._again = False
                await self._work()
                if not self._again:
                    return
        finally:
            self.running = False
