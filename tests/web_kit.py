"""The web window for tests: a real `elicitron web` process beside a real main, its pairing links
from a real `elicitron pair --web`, and Debian's chromium driven by Playwright (no browser
download: the system executable, or the tests that need it are skipped with the reason)."""

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kit import zygote
from kit.demo import demo_stdio_entry
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import PYTHON, ROOT
from kit.procs import terminate

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
START_TIMEOUT_S = 20.0
DEFAULT_WEB_DIR = "state/elicitron/web"  # the default web dir under child_env(home) (XDG_STATE_HOME)


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if shutil.which(CHROMIUM) is None:
        return f"no {CHROMIUM} on this machine (Debian: apt-get install chromium; CI installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (the test extra has it)"
    return None


class WebWindow:
    def __init__(self, proc: "subprocess.Popen[bytes]", url: str, web_dir: Path, main: RunningMain) -> None:
        self.proc, self.url, self.web_dir, self.main = proc, url, web_dir, main

    def pair_link(self, name: str = "test phone") -> str:
        done = subprocess.run([PYTHON, "-m", "cli_process", "pair", "--web", "--web-dir", str(self.web_dir),
                               "--name", name], capture_output=True, text=True, env=child_env(self.main.home),
                              cwd=ROOT, timeout=30, check=True)
        return done.stdout.strip()


@contextmanager
def web_window(main: RunningMain, web_dir: Path, *extra_args: str, open_files: tuple[int, int] | None = None,
               log: Path | None = None) -> Iterator[WebWindow]:
    """`elicitron web --listen 127.0.0.1:0 [extra_args]` on `main`; up once it printed its URL.
    `open_files`: its (soft, hard) descriptor limit, as `ulimit -n` sets it; `log`: a file for its
    stderr (a pipe nobody reads would stall a web window that logs much)."""
    argv = [PYTHON, "-m", "cli_process", "web", "--listen", "127.0.0.1:0", "--connection", str(main.connection),
            "--web-dir", str(web_dir), *extra_args]
    if open_files is not None:  # the shell's own ulimit, then exec: no preexec_fn beside the test's threads
        argv = ["/bin/sh", "-c", f'ulimit -S -n {open_files[0]} && ulimit -H -n {open_files[1]} && exec "$0" "$@"',
                *argv]
    with ExitStack() as stack:
        proc: Any
        if log is None and open_files is None and zygote.enabled():  # forked from a process that imported it
            proc = zygote.spawn_cli(argv[3:], child_env(main.home), stdout_pipe=True)
        else:
            stderr = stack.enter_context(log.open("wb")) if log is not None else subprocess.PIPE
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                                    env=child_env(main.home), cwd=ROOT)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()  # blocks until it listens (or exits: then "")
            if not line.startswith("elicitron web: http"):
                said = proc.stderr.read() if proc.stderr else log.read_bytes() if log else b""
                raise AssertionError(f"the web window did not start: {line!r} {said!r}")
            yield WebWindow(proc, line.split()[2], web_dir, main)
        finally:
            terminate(proc)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


@contextmanager
def demo_web_window(prefix: str, web_dir: str = "web", **demo: Any) -> Iterator[WebWindow]:
    """A main with the demo server (`demo`: more keys of its config entry, e.g. toolApproval),
    ready, and a web window on it; their dirs in one temp dir (`web_dir` under it: DEFAULT_WEB_DIR
    is where commands without --web-dir look). A test may restart main (`window.main` is then the
    new one, stopped at the end)."""
    home = short_tmp_dir(prefix)
    try:
        main = start_main(write_config(home / "mcp.json", {"demo": demo_stdio_entry(**demo)}), home, home=home)
        try:
            main.wait_server_ready("demo")
            with web_window(main, home / web_dir) as window:
                yield window
                main = window.main
        finally:
            main.stop()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def pair(page: "Page", web: WebWindow, name: str = "test phone", timeout_ms: int = 10_000) -> None:
    """Pair the page's browser by a fresh `elicitron pair --web` link, as a person does; back once
    the page says it is connected."""
    page.goto(web.pair_link(name))
    page.get_by_role("button", name="Pair this browser").click()
    page.wait_for_url(f"{web.url}/", timeout=timeout_ms)
    page.get_by_text("Connected to main.").wait_for(timeout=timeout_ms)


@contextmanager
def chromium(*extra_args: str) -> "Iterator[Browser]":
    """Debian's chromium under Playwright (`extra_args` after CHROMIUM_ARGS); skipped where missing."""
    missing = chromium_missing()
    if missing:
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *extra_args])
        try:
            yield browser
        finally:
            browser.close()
