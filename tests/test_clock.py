"""main's timers on a settable clock (main_process/clock.py): the clock itself, and a crash-looping
server's restart backoff and stable-start window moved through in microseconds. (Expiry:
test_pending.py; peer liveness: test_broker_inproc.py.)"""

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from main_process.clock import SettableClock, wait_event
from main_process.config import StdioServerConfig
from main_process.servers.servers import RESTART_LIMIT, STABLE_START_S, ManagedServer


def test_timers_run_in_deadline_order_each_at_its_own_time_and_cancelled_ones_never() -> None:
    clock = SettableClock(start=0.0)
    ran: list[tuple[str, float]] = []

    def note(name: str) -> None:
        ran.append((name, clock.now()))
        if name == "b":
            clock.call_later(0.5, note, "set by b")  # falls due within the same advance

    clock.call_later(2.0, note, "b")
    clock.call_later(1.0, note, "a")
    clock.call_later(1.0, note, "a2")  # same deadline: in the order set
    clock.call_later(3.0, note, "never").cancel()
    clock.advance(1.5)
    assert ran == [("a", 1.0), ("a2", 1.0)] and clock.now() == 1.5
    clock.advance(10)
    assert ran[2:] == [("b", 2.0), ("set by b", 2.5)] and clock.now() == 11.5 and clock.waiting() == 0
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_wait_event_ends_at_the_timeout_or_when_the_event_is_set() -> None:
    async def body() -> None:
        clock = SettableClock()
        event = asyncio.Event()
        waited = asyncio.ensure_future(wait_event(clock, event, 8.0))
        await _until(lambda: clock.waiting() == 1)
        clock.advance(7.9)
        await asyncio.sleep(0)
        assert not waited.done()
        clock.advance(0.1)
        assert await asyncio.wait_for(waited, 5) is False
        again = asyncio.ensure_future(wait_event(clock, event, 8.0))
        await _until(lambda: clock.waiting() == 1)
        event.set()
        assert await asyncio.wait_for(again, 5) is True and clock.waiting() == 0

    asyncio.run(body())


class _Ports:
    """What a ManagedServer tells main: only the statuses matter here."""

    def __init__(self) -> None:
        self.server: ManagedServer | None = None
        self.statuses: list[str] = []

    def publish_servers(self) -> None:
        assert self.server is not None
        self.statuses.append(self.server.status)

    def withdraw_server(self, server: str) -> None:
        pass

    def publish_list_changed(self, server: str, lists: Any) -> None:
        pass

    def publish_notice(self, level: str, message: str, server: str | None) -> None:
        pass


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not condition():
            await asyncio.sleep(0)


def test_a_crash_looping_server_backs_off_doubling_then_fails_and_a_stable_run_resets_the_count(
        tmp_path: Path) -> None:
    async def body() -> None:
        clock = SettableClock(start=0.0)
        ports = _Ports()
        config = StdioServerConfig(name="crasher", command="never-run")
        server = ManagedServer(config, ports, tmp_path, clock=clock)  # type: ignore[arg-type]
        ports.server = server
        starts: list[float] = []
        lives = iter([0.0, 0.0, STABLE_START_S + 1, 0.0, 0.0, 0.0, 0.0, 0.0])

        async def connection() -> None:  # the unit under test is the supervision loop, not a server
            starts.append(clock.now())
            clock.advance(next(lives))  # how long this connection lived
            raise ConnectionError("boom")

        server.session.run = connection  # type: ignore[method-assign]
        server.start()
        pauses: list[float] = []

        def status() -> str:  # (read afresh each time: the loop changes it)
            return server.status

        while True:
            await _until(lambda: clock.waiting() == 1 or status() == "failed")
            if status() == "failed":
                break
            count = len(starts)
            before = clock.now()
            clock.advance(0.25)  # shorter than any pause: nothing starts
            await asyncio.sleep(0)
            assert len(starts) == count
            while len(starts) == count:
                clock.advance(0.25)
                await _until(lambda count=count: len(starts) > count or clock.waiting() == 1)  # type: ignore[misc]
            pauses.append(starts[-1] - before)
        # 0.5 s, 1 s; then a run longer than the stable-start window resets the count: 0.5 s again
        # and doubling up to the limit of failures in a row.
        assert pauses == [0.5, 1.0, 0.5, 1.0, 2.0, 4.0]
        assert len(starts) == 2 + RESTART_LIMIT  # the stable run's own end is failure 1 of the new count
        assert "boom" in (server.error or "") and ports.statuses[-1] == "failed"
        await server.stop()
        assert status() == "stopped"

    asyncio.run(body())
