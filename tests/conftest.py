"""Fixtures that start real main processes, real windows and real MCP servers (all from the kit),
the `slow` marker they imply, and where tests save screenshots."""

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

# A suite started in the background (`scripts/test &`, a runner without job control) inherits SIGINT
# and SIGQUIT ignored, and so would every child it starts (an ignored signal survives exec): a Ctrl-C
# test of `elicitron call` then waited for an interrupt that never came. Children start as they would
# from a terminal.
for _ignored, _default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL)):
    if signal.getsignal(_ignored) == signal.SIG_IGN:
        signal.signal(_ignored, _default)

# Qt widgets are tested offscreen (scripts/test sets this too; a bare pytest run must not need a display).
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from kit.demo import demo_stdio_entry, start_http_demo
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.procs import end_process
from kit.window import WindowProcess, start_window

if TYPE_CHECKING:
    from gateway_kit import HostLoop
    from kit.postgres import PostgresServer
    from playwright.sync_api import Browser

# Fixtures that start processes: every test using one (directly or through another) is `slow`.
PROCESS_FIXTURES = frozenset({"main_factory", "windows", "http_demo_server", "shared_main", "consent_mains",
                              "postgres", "pg_url"})

WindowFactory = Callable[[Path, str], WindowProcess]

# The longest files (every file over ~5 s, measured with --durations=0 on a full run; 2026-12-06),
# longest first, run first: pytest-xdist hands each
# worker a file at a time in collection order, and a long file started last leaves the other
# worker idle until it ends. A file missing here only runs in its usual place.
LONGEST_FILES = (
    "test_conformance.py", "test_transparent_gateway.py", "test_host_pipes.py", "test_host_gone.py",
    "test_http_child.py", "test_long_waits_tasks_e2e.py", "test_web_cards.py", "test_round_trip.py",
    "test_http_session_ends.py", "test_oauth.py", "test_upstream_http.py", "test_first_hour_window.py",
    "test_web_devices.py", "test_session_ends.py", "test_team_spool.py", "test_quorum_team.py", "test_ask_cli.py",
    "test_policy_fast.py", "test_fuzz.py", "test_renderer_live.py", "test_sign_in_race.py",
    "test_audit_via_main_postgres.py", "test_first_hour.py", "test_web_window.py", "test_backpressure.py",
    "test_windows.py", "test_stripped_env.py", "test_pair_web_wait.py", "test_gateway_lifecycle.py",
    "test_web_guard.py", "test_gateway.py", "test_relay_fuzz.py", "test_supervision.py", "test_lockout.py",
    "test_team_devices.py", "test_consent_binding.py", "test_web_grants.py", "test_renderer_web_devices.py",
    "test_first_hour_cli.py", "test_long_waits_e2e.py", "test_renderer_window.py", "test_server_line_cap.py",
    "test_rules_e2e.py", "test_bad_servers.py", "test_conformance_client.py", "test_cli.py",
    "test_web_and_qt_window.py", "test_first_hour_launch.py", "test_renderer_tools.py",
)


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    rank = {name: place for place, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's own order stays


@pytest.fixture(autouse=True)
def _processes_only_in_slow_tests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keeps the `slow` marker true: a test not marked slow that starts a process fails, so
    `scripts/test --fast` stays fast."""
    if request.node.get_closest_marker("slow") is not None:
        return

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise AssertionError(f"{request.node.nodeid} starts a process: mark it @pytest.mark.slow")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where tests save pictures: a temp folder, or (scripts/screenshots) the README's folder."""
    chosen = os.environ.get("ELICITRON_SCREENSHOTS")
    return Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def windows() -> Iterator[WindowFactory]:
    """Starts real window processes (offscreen); each is killed after the test."""
    started: list[WindowProcess] = []

    def factory(connection: Path, name: str) -> WindowProcess:
        window = start_window(connection, name)
        started.append(window)
        return window

    yield factory
    for window in started:
        window.end()


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    path = short_tmp_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def main_factory(runtime_dir: Path, tmp_path: Path) -> Iterator[Callable[..., RunningMain]]:
    """Starts mains (up: connection file written, a hello welcomed); each is stopped after the test."""
    started: list[RunningMain] = []

    def factory(servers: dict[str, Any] | None = None, *extra_args: str) -> RunningMain:
        config = write_config(tmp_path / f"mcp-{len(started)}.json", servers) if servers is not None else None
        return with_config(config, *extra_args)

    def with_config(config: Path | None, *extra_args: str) -> RunningMain:
        running = start_main(config, runtime_dir, *extra_args)
        started.append(running)
        return running

    factory.with_config = with_config  # type: ignore[attr-defined]
    yield factory
    for running in started:
        running.stop()


@pytest.fixture
def demo_main(main_factory: Callable[..., RunningMain]) -> RunningMain:
    """main with the demo server over stdio, ready to serve."""
    running = main_factory({"demo": demo_stdio_entry()})
    running.wait_server_ready("demo")
    return running


@pytest.fixture
def http_demo_server() -> Iterator[str]:
    """The demo server over streamable HTTP on loopback; yields its URL."""
    proc, url = start_http_demo()
    yield url
    end_process(proc)
    assert proc.stdout is not None
    proc.stdout.close()


@pytest.fixture(scope="module")
def browser() -> "Iterator[Browser]":
    """Debian's chromium under Playwright for a module's browser tests (skipped where missing)."""
    from web_kit import chromium

    with chromium() as running:
        yield running


@pytest.fixture
def hosts() -> Iterator["HostLoop"]:
    """One asyncio loop on a thread for every MCP host of a test (gateway_kit.Host)."""
    from gateway_kit import HostLoop  # (mcp loads only for the tests that use it)

    loop = HostLoop()
    yield loop
    loop.close()


@pytest.fixture(scope="session")
def postgres() -> "Iterator[PostgresServer]":
    """A private PostgreSQL server for the session (tests/kit/postgres.py), stopped and removed at
    its end; the tests that use it are skipped, saying why, where PostgreSQL is not installed."""
    from kit.postgres import NoPostgres, start

    try:
        server = start()
    except NoPostgres as exc:
        pytest.skip(f"PostgreSQL store tests need a PostgreSQL server: {exc}")
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres: "PostgresServer") -> Iterator[str]:
    """A fresh database of the session's server for this test: its URL (password included)."""
    name = postgres.new_database()
    yield postgres.url(name)
    postgres.drop_database(name)


def _inherited_signal_state() -> tuple[frozenset[int], tuple[bool, ...]]:
    """What a child inherits of this process's signals through exec: the blocked mask, and which
    ending signals are ignored (handlers are reset by exec; a block or an ignore is not)."""
    ignored = tuple(signal.getsignal(sig) == signal.SIG_IGN for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    return frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, [])), ignored


@pytest.fixture(autouse=True)
def _signal_state_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test leaves this process's signals as it found them, for the children of the tests after it."""
    before = _inherited_signal_state()
    yield
    after = _inherited_signal_state()
    assert after == before, (f"{request.node.nodeid} left signals blocked or ignored that every later child "
                             f"would inherit: {before} -> {after}")
