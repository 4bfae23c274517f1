"""`elicitron serve` started as MCP hosts start servers: with only HOME, LOGNAME, PATH, SHELL, TERM
and USER (mcp's own `get_default_environment`). It must find the main the desktop started (whose
default connection path came from XDG_RUNTIME_DIR), never start a second, windowless one; when it
has to start main without a display it says so in one line. The printed entries and the Hosts
page's Python agent (docs/hosts.md) work pasted as they are, and one server is also at a URL path ending in /mcp.

The locator (shared/locator.py) is tested here too, in-process: where it is, what it refuses.
"""

import json
import os
import re
import select
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_kit import Host, HostLoop, status_json, text_of
from kit.demo import demo_stdio_entry
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, write_config
from kit.output import ChildOutput
from kit.paths import PYTHON, ROOT
from kit.procs import end_process
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from gateway_process.print_config import DESKTOP_ENV, python_agent, stdio_entry
from gateway_process.starter import NO_DISPLAY, can_open_windows
from shared import PROTOCOL_VERSION, locator
from shared.connection_file import (
    ENV_VAR,
    ConnectionInfo,
    default_connection_path,
    resolve_connection_path,
    write_connection_file,
)
from shared.merged_names import Exposure

HOST_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")  # what hosts pass on (mcp, Claude Desktop)
ELICITRON = Path(PYTHON).with_name("elicitron")  # the console script, as --print-config names it
HOSTS_PAGE = (ROOT / "docs" / "hosts.md").read_text(encoding="utf-8")  # the site's Hosts page
GONE_PID = 2**31 - 1  # no process has it


def host_env(home: Path, **extra: str) -> dict[str, str]:
    """Exactly what a host gives a server it starts (with this test's HOME), plus `extra`."""
    env = {name: os.environ[name] for name in HOST_ENV if name in os.environ}
    return {**env, "HOME": str(home), **extra}


# ---- the locator, in-process ---------------------------------------------------------------------


@pytest.fixture
def desk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A private HOME and runtime dir for this process; returns HOME."""
    home = tmp_path / "home"
    home.mkdir()
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv(ENV_VAR, raising=False)
    return home


def fake_main(connection: Path, pid: int | None = None) -> Path:
    """A connection file as a main running as `pid` (default: this process, which runs) writes it."""
    write_connection_file(connection, ConnectionInfo(protocol=PROTOCOL_VERSION, endpoint=f"ipc://{connection}.sock",
                                                     token="t" * 64, pid=os.getpid() if pid is None else pid))
    return connection


def test_no_main_on_the_default_path_means_the_one_the_locator_names(desk: Path, tmp_path: Path) -> None:
    elsewhere = fake_main(tmp_path / "desktop-run" / "elicitron" / "connection.json")
    assert resolve_connection_path() == default_connection_path()  # no locator yet
    locator.write_locator(elsewhere)
    path = desk / ".local" / "state" / "elicitron" / "locator" / "main.json"
    assert locator.locator_path() == path
    assert json.loads(path.read_text()) == {"connection": str(elsewhere), "pid": os.getpid()}
    assert os.stat(path).st_mode & 0o777 == 0o600 and os.stat(path.parent).st_mode & 0o777 == 0o700
    assert resolve_connection_path() == elsewhere
    assert resolve_connection_path(tmp_path / "x.json") == tmp_path / "x.json"  # --connection still wins
    fake_main(default_connection_path())
    assert resolve_connection_path() == default_connection_path()  # a live main on the default path wins


def test_a_stale_or_mismatched_locator_is_not_followed(desk: Path, tmp_path: Path) -> None:
    gone = fake_main(tmp_path / "gone" / "connection.json", pid=GONE_PID)
    locator.write_locator(gone)
    assert resolve_connection_path() == default_connection_path()  # its main is gone
    fake_main(gone)  # a main runs there now, but not the one the locator names
    locator.write_locator(gone)
    locator.locator_path().write_text(json.dumps({"connection": str(gone), "pid": GONE_PID}))
    assert resolve_connection_path() == default_connection_path()
    fake_main(default_connection_path(), pid=GONE_PID)  # a stale default file: the locator is asked
    locator.write_locator(gone)
    assert resolve_connection_path() == gone


def test_a_locator_someone_could_have_planted_is_ignored(desk: Path, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    elsewhere = fake_main(tmp_path / "desktop-run" / "connection.json")
    locator.write_locator(elsewhere)
    path = locator.locator_path()
    path.chmod(0o644)
    assert locator.read_locator() is None and resolve_connection_path() == default_connection_path()
    assert "not a 0600 file" in caplog.text
    real = tmp_path / "real-locator.json"
    real.write_text(json.dumps({"connection": str(elsewhere), "pid": os.getpid()}))
    real.chmod(0o600)
    path.unlink()
    path.symlink_to(real)
    assert locator.read_locator() is None  # never through a symlink
    path.unlink()
    path.write_text(json.dumps({"connection": "relative/connection.json", "pid": os.getpid()}))
    path.chmod(0o600)
    assert locator.read_locator() is None
    path.parent.chmod(0o777)
    assert locator.read_locator() is None  # a directory others may write
    path.parent.chmod(0o700)


def test_writing_replaces_a_planted_symlink_and_never_writes_through_it(desk: Path, tmp_path: Path) -> None:
    elsewhere = fake_main(tmp_path / "desktop-run" / "connection.json")
    path = locator.locator_path()
    path.parent.mkdir(parents=True, mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    path.symlink_to(victim)
    locator.write_locator(elsewhere)
    assert victim.read_text() == "untouched"
    assert not path.is_symlink() and locator.read_locator() == locator.Locator(str(elsewhere), os.getpid())


def test_main_writes_it_only_on_the_default_path_and_removes_only_its_own(desk: Path, tmp_path: Path) -> None:
    private = fake_main(tmp_path / "explicit" / "connection.json")
    locator.main_started(private)
    assert locator.read_locator() is None  # an explicit --connection is no one's default
    default = fake_main(default_connection_path())
    locator.main_started(default)
    assert locator.read_locator() == locator.Locator(str(default), os.getpid())
    locator.main_stopped(private)
    assert locator.read_locator() is not None  # names another file: kept
    locator.locator_path().write_text(json.dumps({"connection": str(default), "pid": GONE_PID}))
    locator.main_started(default)  # a main started again where the locator points takes it over
    assert locator.read_locator() == locator.Locator(str(default), os.getpid())
    locator.main_stopped(default)
    assert not locator.locator_path().exists()


def test_windows_need_a_display_on_x11_and_wayland() -> None:
    if sys.platform in ("darwin", "win32"):
        pytest.skip("no DISPLAY needed here")
    assert not can_open_windows({"HOME": "/home/u"})
    assert can_open_windows({"DISPLAY": ":0"}) and can_open_windows({"WAYLAND_DISPLAY": "wayland-0"})
    assert len(NO_DISPLAY.splitlines()) == 1 and "elicitron launch" in NO_DISPLAY


def test_print_config_carries_the_desktop_env_and_a_python_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in DESKTOP_ENV:
        monkeypatch.delenv(name, raising=False)
    assert "env" not in stdio_entry(Exposure(only=None), None, None)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-1")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    entry = stdio_entry(Exposure(only="demo"), None, None)
    assert entry["env"] == {"WAYLAND_DISPLAY": "wayland-1", "XDG_RUNTIME_DIR": "/run/user/1000"}
    assert Path(entry["command"]).is_absolute()
    script = python_agent(entry)
    compile(script, "agent.py", "exec")
    assert f'command="{entry["command"]}"' in script and 'env={"WAYLAND_DISPLAY": "wayland-1"' in script


# ---- real processes: a desktop's main, serve as a host starts it ---------------------------------


class Desktop:
    """A main started as from a desktop shell: its own HOME, XDG_RUNTIME_DIR set, default
    connection path, default config/data/state dirs (under HOME)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.runtime = home / "xdg-run"
        self.runtime.mkdir(mode=0o700)
        self.env = host_env(home, XDG_RUNTIME_DIR=str(self.runtime), PYTHONUNBUFFERED="1")
        self.config = write_config(home / "mcp.json", {"demo": demo_stdio_entry()},
                                   elicitron={"autoOpenWindow": False})
        proc = subprocess.Popen([str(ELICITRON), "--log-level", "info", "main", "--config", str(self.config)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=self.env, cwd=home)
        assert proc.stderr is not None
        self.main = RunningMain(proc, self.runtime / "elicitron" / "connection.json", home, ChildOutput(proc.stderr))

    def run(self, *args: str, env: dict[str, str] | None = None) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([str(ELICITRON), *args], capture_output=True, text=True, timeout=60,
                              env=self.env if env is None else env, cwd=self.home, check=False)


def mains_of(home: Path) -> list[int]:
    """Every running `elicitron main` whose HOME is `home` (Linux /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = proc.joinpath("cmdline").read_bytes().decode(errors="replace").split("\0")
            environ = proc.joinpath("environ").read_bytes().split(b"\0")
            state = proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        is_main = "main" in args and ("cli_process" in args or any(a.endswith("/elicitron") for a in args))
        if is_main and state != "Z" and f"HOME={home}".encode() in environ:
            found.append(int(proc.name))
    return found



@pytest.fixture
def desktop() -> Iterator[Desktop]:
    if not ELICITRON.exists() or not sys.platform.startswith("linux"):
        pytest.skip(f"needs the console script {ELICITRON} and Linux /proc")
    home = short_tmp_dir("eli-desk-")
    started = Desktop(home)
    try:
        started.main.wait_up()
        started.main.wait_server_ready("demo")
        where = "from shared.connection_file import default_connection_path as d; print(d())"
        stripped = subprocess.run([PYTHON, "-c", where], capture_output=True, text=True, env=host_env(home), cwd=ROOT,
                                  timeout=60, check=True).stdout.strip()
        assert stripped != str(started.main.connection)
        if locator.main_runs_at(Path(stripped)):
            pytest.skip(f"a main runs at {stripped}, where serve without XDG_RUNTIME_DIR looks first")
        yield started
    finally:
        started.main.stop()
        for pid in mains_of(home):  # a second main a failing test made serve start
            os.kill(pid, 15)
        shutil.rmtree(home, ignore_errors=True)


def wait_for_invoke(window: Any, message: str) -> dict[str, Any]:
    _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                              and b["request"]["params"]["message"] == message, 30)
    return dict(invoke)


@pytest.mark.slow
def test_serve_with_only_the_hosts_environment_finds_the_desktops_main(desktop: Desktop, hosts: HostLoop) -> None:
    main = desktop.main
    found = locator.Locator(str(main.connection), main.pid)
    assert json.loads((desktop.home / ".local/state/elicitron/locator/main.json").read_text()) == {
        "connection": found.connection, "pid": found.pid}
    params = StdioServerParameters(command=str(ELICITRON), args=["serve", "--server", "demo"],
                                   env={"HOME": str(desktop.home)})
    assert set(get_default_environment() | (params.env or {})) <= set(HOST_ENV)  # what mcp's Client passes
    host = Host(hosts, params, "stripped-host").open()
    try:
        assert text_of(host.call("echo", {"text": "found"})) == "found"
        window = main.peer("wire-window")
        pending = host.start(lambda client: client.call_tool("book_table", {"restaurant": "Found"}))
        invoke = wait_for_invoke(window, "Book a table at Found?")
        window.answer(invoke, "accept", {"name": "Ada", "party_size": 2})
        assert json.loads(text_of(pending.result(30)))["content"] == {"name": "Ada", "party_size": 2}
        assert "stripped-host" in [p["name"] for p in status_json(main)["peers"] if p["role"] == "host"]
        assert mains_of(desktop.home) == [main.pid]  # no second main
        done = desktop.run("status", "--json", env=host_env(desktop.home))  # every command finds it
        assert done.returncode == 0 and json.loads(done.stdout)["pid"] == main.pid, done.stderr
    finally:
        host.close()


@pytest.mark.slow
def test_the_printed_python_agent_and_the_readmes_run_as_pasted(desktop: Desktop) -> None:
    main = desktop.main
    done = desktop.run("serve", "--print-config", "--server", "demo")
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout[done.stdout.index("{"):done.stdout.index("\n}") + 2])["mcpServers"]["demo"]
    assert entry == {"command": str(ELICITRON), "args": ["serve", "--server", "demo"],
                     "env": {"XDG_RUNTIME_DIR": str(desktop.runtime)}}
    printed = done.stdout.split("run it with a Python that has mcp):\n", 1)[1]
    agent = desktop.home / "agent.py"
    agent.write_text(printed)
    ran = subprocess.run([PYTHON, str(agent)], capture_output=True, text=True, timeout=120,
                         env=host_env(desktop.home), cwd=desktop.home, check=False)
    assert ran.returncode == 0, ran.stderr
    assert {"book_table", "echo"} <= set(ran.stdout.strip().split(", "))

    readme_agent = re.search(r"\*\*A Python agent\*\*.*?```python\n(.*?)```", HOSTS_PAGE, re.DOTALL)
    assert readme_agent is not None
    agent.write_text(readme_agent.group(1))
    window = main.peer("wire-window")
    proc = subprocess.Popen([PYTHON, str(agent)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=host_env(desktop.home), cwd=desktop.home)
    try:
        invoke = wait_for_invoke(window, "Book a table at Chez MCP?")
        window.answer(invoke, "accept", {"name": "Readme", "party_size": 3})
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        assert "demo__book_table" in out.decode() and "Readme" in out.decode()
    finally:
        end_process(proc)
    assert mains_of(desktop.home) == [main.pid]


@pytest.mark.slow
def test_the_hosts_pages_typescript_agent_runs_as_pasted(desktop: Desktop) -> None:
    """The Hosts page's TypeScript agent, pasted into agent.mjs beside the official SDK (the version
    the other TypeScript host tests pin), run by Node with a host's environment: it lists the tools,
    its call's card reaches a window, and it prints the answer."""
    import npm_kit

    if not npm_kit.npm_available():
        pytest.skip("npm is not installed (CI installs it): the TypeScript SDK cannot be installed")
    package, version, name = npm_kit.TS_SDK
    node, modules = npm_kit.ensure_packages(f"{name}-{version}", {package: version})
    script = re.search(r"\*\*A TypeScript agent\*\*.*?```js\n(.*?)```", HOSTS_PAGE, re.DOTALL)
    assert script is not None
    (desktop.home / "node_modules").symlink_to(modules)  # where Node looks for the SDK
    agent = desktop.home / "agent.mjs"
    agent.write_text(script.group(1))
    window = desktop.main.peer("wire-window")
    proc = subprocess.Popen([str(node), str(agent)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=host_env(desktop.home, ELICITRON=str(ELICITRON)),
                            cwd=desktop.home)
    try:
        invoke = wait_for_invoke(window, "Book a table at Chez MCP?")
        window.answer(invoke, "accept", {"name": "Typed", "party_size": 4})
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        assert "demo__book_table" in out.decode() and "Typed" in out.decode()
    finally:
        end_process(proc)
    assert mains_of(desktop.home) == [desktop.main.pid]


@pytest.mark.slow
def test_serve_that_must_start_main_without_a_display_says_why_windows_cannot_open(tmp_path: Path) -> None:
    home = short_tmp_dir("eli-nodisp-")
    connection = home / "run" / "connection.json"
    config = write_config(tmp_path / "mcp.json", {"demo": demo_stdio_entry()}, elicitron={"autoOpenWindow": False})
    serve = subprocess.Popen([str(ELICITRON), "serve", "--connection", str(connection), "--config", str(config)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=host_env(home), cwd=home)
    assert serve.stdin is not None and serve.stdout is not None and serve.stderr is not None
    stderr = ChildOutput(serve.stderr)
    try:
        serve.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
                          b'"2025-06-18", "capabilities": {}, "clientInfo": {"name": "no-display", "version": "1"}}}\n')
        serve.stdin.flush()
        ready, _, _ = select.select([serve.stdout], [], [], 120)
        answer = json.loads(serve.stdout.readline()) if ready else None
        assert answer is not None and answer["id"] == 1, stderr.text()  # main started, serve attached
        assert [line for line in stderr.lines() if "windows cannot open" in line] == [NO_DISPLAY], stderr.text()
        status = subprocess.run([PYTHON, "-m", "cli_process", "status", "--json", "--connection", str(connection)],
                                capture_output=True, text=True, timeout=60, env=child_env(), cwd=ROOT, check=False)
        assert status.returncode == 0, status.stderr
        assert [p["role"] for p in json.loads(status.stdout)["peers"]].count("host") == 1  # the serve
    finally:
        subprocess.run([PYTHON, "-m", "cli_process", "stop", "--connection", str(connection)], capture_output=True,
                       timeout=60, env=child_env(), cwd=ROOT, check=False)
        end_process(serve)
        stderr.close()
        for pid in mains_of(home):  # one that came up after the stop
            os.kill(pid, 15)
        shutil.rmtree(home, ignore_errors=True)


# ---- one server at a path ending in /mcp ----------------------------------------------------------


@pytest.fixture
def http_main(main_factory: Callable[..., RunningMain]) -> RunningMain:
    main = main_factory({"demo": demo_stdio_entry()}, "--mcp-http", "0")
    main.wait_server_ready("demo")
    main.wait_status(lambda status: (status.get("mcpHttp") or {}).get("state") == "listening",
                     "its MCP HTTP endpoint listening")
    assert "MCP hosts over HTTP: http://127.0.0.1:" in main.cli("status").stdout  # as a user sees it
    return main


def test_one_server_is_also_at_a_path_ending_in_mcp(http_main: RunningMain, hosts: HostLoop) -> None:
    url, token = http_main.info["mcpHttpUrl"], http_main.info["mcpHttpToken"]
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    alone = Host(hosts, streamable_http_client(f"{url}/demo/mcp", http_client=client), "fast-agent").open()
    try:
        assert "book_table" in alone.tool_names()
        assert text_of(alone.call("echo", {"text": "at /mcp/demo/mcp"})) == "at /mcp/demo/mcp"
    finally:
        alone.close()
    for path, status in ((f"{url}/nope/mcp", 404), (f"{url}/demo/mcp/mcp", 404)):
        request = urllib.request.Request(path, data=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
                                         method="POST", headers={"Authorization": f"Bearer {token}",
                                                                 "Content-Type": "application/json",
                                                                 "Accept": "application/json, text/event-stream"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == status, path
