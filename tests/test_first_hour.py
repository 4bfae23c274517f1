"""The first hour: every mistake a newcomer makes gets one line that says what to do (the CLI and
main; the window's side is tests/test_first_hour_window.py).

A server whose command is missing says which command, where it looked and what fixes it; a busy
`--mcp-http` port is one line and exit 2, and the HTTP gateway's state and last error are in
`status`; Ctrl-C / SIGTERM on `elicitron call` withdraws its cards; `--log-file` leaves the user's
directory alone; a closed pipe ends any command quietly; a paired tcp connection file works for
every command; exit codes are the documented ones; `audit` names the answering window; `server
restart` says what happened; `serve` without a host on stdin says so in one line; the CLI page's
table of commands (docs/cli.md), and getting started's demo server and install notes
(docs/getting-started.md), match what there is."""

import json
import os
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.demo import demo_stdio_entry
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import PYTHON, ROOT
from kit.procs import descendants, end_process
from test_remote_windows import free_tcp_port, pair

README = (ROOT / "README.md").read_text(encoding="utf-8")
GETTING_STARTED = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")  # where the first hour moved
CLI_PAGE = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
MISSING_COMMAND = "elicitron-first-hour-no-such-command"
BOOKING = {"name": "Ada", "party_size": 2}


def elicitron(*args: str, home: Path | None = None, timeout: float = 60) -> "subprocess.CompletedProcess[str]":
    """`elicitron ARGS` as a user runs it, in the dirs of `home` (default: the kit's)."""
    return subprocess.run([PYTHON, "-m", "cli_process", *args], capture_output=True, text=True, timeout=timeout,
                          env=child_env(home), cwd=ROOT, check=False)


def one_line(text: str) -> str:
    """`text` is exactly one line (no traceback, nothing else); that line."""
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_tmp_dir("eli-1h-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def mains(home: Path) -> Iterator[Callable[..., RunningMain]]:
    """Starts mains with their config, connection file and dirs in `home`; stopped after the test."""
    started: list[RunningMain] = []

    def start(servers: dict[str, Any], *extra_args: str, wait: bool = True) -> RunningMain:
        config = write_config(home / f"mcp-{len(started)}.json", servers)
        running = start_main(config, home, *extra_args, home=home, wait=wait)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


def wait_for_log(main: RunningMain, holds: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Until `holds()`, looked at again each time main logs something (no fixed sleeps)."""
    deadline = time.monotonic() + timeout_s
    while not holds():
        left = deadline - time.monotonic()
        assert left > 0 and main.proc.poll() is None, f"{what}: not within {timeout_s} s; log:\n{main.stderr.tail()}"
        main.stderr.wait_change(main.stderr.size, min(left, 1.0))


# ---- 1. a missing command ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_missing_command_says_which_command_where_it_looked_and_what_fixes_it(
        mains: Callable[..., RunningMain]) -> None:
    main = mains({"files": {"command": MISSING_COMMAND, "args": ["-y", "@modelcontextprotocol/server-filesystem"]}})
    with main.watch() as watcher:
        watcher.wait(lambda: bool((watcher.server("files") or {}).get("error")), "files has an error", 30)
        pushed = watcher.server("files")
    assert pushed is not None
    sentence = (f"command {MISSING_COMMAND!r} of server 'files' was not found (looked in PATH="
                f"{child_env(main.home)['PATH']}); install it or give its absolute path in the config")
    assert pushed["error"].splitlines()[0] == sentence  # the `servers` push carries all of it
    text = main.cli("status").stdout
    assert sentence in text  # and so does `elicitron status`, uncut
    report = json.loads(main.cli("status", "--json").stdout)
    assert report["servers"][0]["error"].startswith(sentence)
    assert "FileNotFoundError" not in text


# ---- 4. --mcp-http on a busy port ----------------------------------------------------------


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@pytest.mark.slow
def test_mcp_http_on_a_busy_port_is_one_line_and_exit_2(home: Path, busy_port: int) -> None:
    write_config(home / "mcp.json", {"demo": demo_stdio_entry()})
    done = elicitron("main", "--config", str(home / "mcp.json"), "--connection", str(home / "connection.json"),
                     "--mcp-http", str(busy_port), home=home, timeout=60)
    assert done.returncode == 2, done.stderr
    line = one_line(done.stderr)
    assert f"127.0.0.1:{busy_port}" in line and "Address already in use" in line and "another port" in line
    assert not (home / "connection.json").exists()  # nothing started


@pytest.mark.slow
def test_the_http_gateways_reason_to_stop_is_in_mains_log_and_in_status(mains: Callable[..., RunningMain]) -> None:
    port = free_tcp_port()
    main = mains({"demo": demo_stdio_entry()}, "--mcp-http", str(port))

    def gateway() -> dict[str, Any]:
        return main.status().get("mcpHttp") or {}

    wait_for_log(main, lambda: gateway().get("state") == "listening", "the HTTP gateway listens")
    assert gateway()["address"] == f"127.0.0.1:{port}" and gateway()["url"] == f"http://127.0.0.1:{port}/mcp"
    child = next(pid for pid, cmd in descendants(main.pid).items() if "--listen-http" in cmd)
    with socket.socket() as squatter:  # the child dies and something else takes its port
        os.kill(child, signal.SIGKILL)
        wait_for_log(main, lambda: child not in descendants(main.pid), "the gateway child gone")
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        wait_for_log(main, lambda: "Address already in use" in (gateway().get("error") or ""), "status says why")
        assert gateway()["state"] in ("restarting", "failed")
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in gateway()["error"]
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in main.stderr.text()  # main's log
        assert "said ''" not in main.stderr.text()
        text = main.cli("status").stdout
        assert f"MCP hosts over HTTP (127.0.0.1:{port}): " in text and "Address already in use" in text


# ---- 5. Ctrl-C / SIGTERM on `elicitron call` -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_on_call_withdraws_its_card_from_every_window(demo_main: RunningMain, signum: int) -> None:
    window = demo_main.peer(name="first-hour-window")
    call = subprocess.Popen([PYTHON, "-m", "cli_process", "call", "demo", "book_table", "--connection",
                             str(demo_main.connection)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(), cwd=ROOT)
    try:
        invoke = window.expect_topic("msgElicitationTransferInvoke", timeout_s=30)
        call.send_signal(signum)
        dismiss = window.expect(lambda t, b: t == "msgElicitationTransferDismiss"
                                and b["responseChannel"] == invoke["responseChannel"], timeout_s=15)[1]
        assert dismiss["reason"] == "cancelled"
        out, err = call.communicate(timeout=15)
    finally:
        if call.poll() is None:
            call.kill()
            call.communicate()
    assert call.returncode == 128 + signum
    assert (out, err) == ("", "")  # quietly
    assert demo_main.status()["pending"] == []


# ---- 6. --log-file leaves the directory alone --------------------------------------------------


@pytest.mark.slow
def test_log_file_is_0600_and_its_directory_stays_as_it_was(mains: Callable[..., RunningMain], home: Path) -> None:
    logs = home / "my-project"
    logs.mkdir(mode=0o755)
    logs.chmod(0o755)
    main = mains({"demo": demo_stdio_entry()}, "--log-file", str(logs / "main.log"))
    main.wait_server_ready("demo")
    assert stat.S_IMODE((logs / "main.log").stat().st_mode) == 0o600
    assert stat.S_IMODE(logs.stat().st_mode) == 0o755
    assert "ready" in (logs / "main.log").read_text()


# ---- 7. a closed pipe --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["audit"], ["rules"], ["--help"],
                                  ["--version"], ["server", "--help"]])
def test_every_command_ends_quietly_on_a_closed_pipe(demo_main: RunningMain, args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head` that has already gone: every write fails
    try:
        needs_main = args[0] in ("status", "rules")
        done = subprocess.run([PYTHON, "-m", "cli_process", *args,
                               *(["--connection", str(demo_main.connection)] if needs_main else [])],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60, env=child_env(),
                              cwd=ROOT, check=False)
    finally:
        os.close(write_end)
    assert done.stderr == "", done.stderr
    assert done.returncode in (0, 141)


# ---- 8. a paired tcp connection file, for every command ----------------------------------------


@pytest.mark.slow
def test_a_paired_connection_file_reaches_main_for_every_command(
        main_factory: Callable[..., RunningMain], tmp_path: Path) -> None:
    main = main_factory({"demo": demo_stdio_entry()}, "--listen", f"tcp://127.0.0.1:{free_tcp_port()}")
    main.wait_server_ready("demo")
    laptop = tmp_path / "laptop.json"
    laptop.write_text(json.dumps(pair(main, "laptop")))
    laptop.chmod(0o600)

    def run(*args: str) -> "subprocess.CompletedProcess[str]":
        done = main.cli_plain(*args, "--connection", str(laptop))
        assert "no answer from main" not in done.stderr
        return done

    status = run("status")
    assert status.returncode == 0 and "demo" in status.stdout and "ready" in status.stdout, status.stderr
    assert json.loads(run("status", "--json").stdout)["pid"] == main.pid
    call = run("call", "demo", "echo", '{"text": "from the laptop"}')
    assert (call.returncode, call.stdout.strip()) == (0, "from the laptop"), call.stderr
    assert run("rules").returncode == 0
    restart = run("server", "restart", "demo")
    assert restart.returncode == 0 and "demo: restarted, ready" in restart.stdout, restart.stderr
    reload = run("reload")
    assert reload.returncode == 0 and "unchanged  demo" in reload.stdout, reload.stderr
    auth = run("auth", "status", "demo")
    assert auth.returncode in (0, 1) and "no answer" not in auth.stderr

    serve = subprocess.Popen([PYTHON, "-m", "cli_process", "serve", "--server", "demo", "--connection", str(laptop)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=child_env(), cwd=ROOT)
    try:
        assert serve.stdin is not None and serve.stdout is not None
        serve.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "first-hour", "version": "1"}}}).encode() + b"\n")
        serve.stdin.flush()
        ready, _, _ = select.select([serve.stdout], [], [], 60)
        assert ready, "serve over the paired file gave no answer"
        answer = json.loads(serve.stdout.readline())
        assert answer["id"] == 1 and "serverInfo" in answer["result"], answer
    finally:
        end_process(serve)
        for stream in (serve.stdin, serve.stdout, serve.stderr):
            if stream is not None:
                stream.close()

    stop = run("stop")
    assert stop.returncode == 0 and f"pid {main.pid}" in stop.stdout, stop.stderr
    try:
        code = main.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"main did not exit within 30 s of `stop`; its log:\n{main.stderr.tail()}") from None
    assert code == 0, main.stderr.tail()


# ---- 9. exit codes ------------------------------------------------------------------------------


@pytest.mark.slow
def test_reload_with_bad_json_exits_2_and_reload_config_reads_another_file(
        mains: Callable[..., RunningMain], home: Path) -> None:
    main = mains({"demo": demo_stdio_entry()})
    main.wait_server_ready("demo")
    config = home / "mcp-0.json"
    config.write_text('{"mcpServers": {"demo": ')
    bad = main.cli("reload")
    assert bad.returncode == 2
    assert str(config) in one_line(bad.stderr) and "not valid JSON" in bad.stderr

    other = write_config(home / "other.json", {"demo": demo_stdio_entry(), "second": demo_stdio_entry()})
    done = main.cli("reload", "--config", str(other))
    assert done.returncode == 0, done.stderr
    assert "added      second" in done.stdout and "unchanged  demo" in done.stdout
    main.wait_server_ready("second")
    again = main.cli("reload")  # main keeps the file it was given
    assert again.returncode == 0 and "unchanged  demo, second" in again.stdout, again.stderr


@pytest.mark.slow
def test_print_config_http_without_main_exits_3_and_says_mcp_http(home: Path) -> None:
    done = elicitron("serve", "--print-config", "--http", "--connection", str(home / "none.json"), home=home)
    assert done.returncode == 3
    assert "--mcp-http" in one_line(done.stderr) and "no main is running" in done.stderr


@pytest.mark.slow
def test_print_config_for_an_unknown_server_names_the_configured_ones(demo_main: RunningMain, home: Path) -> None:
    running = demo_main.cli("serve", "--print-config", "--server", "nope")
    assert running.returncode == 2
    assert "unknown server 'nope' (configured: demo)" in one_line(running.stderr)
    config = write_config(home / "mcp.json", {"files": demo_stdio_entry(), "shell": demo_stdio_entry()})
    no_main = elicitron("serve", "--print-config", "--server", "nope", "--config", str(config), "--connection",
                        str(home / "none.json"), home=home)
    assert no_main.returncode == 2
    assert "unknown server 'nope' (configured: files, shell)" in one_line(no_main.stderr)
    good = elicitron("serve", "--print-config", "--server", "files", "--config", str(config), "--connection",
                     str(home / "none.json"), home=home)
    assert good.returncode == 0 and '"--server",' in good.stdout, good.stderr


@pytest.mark.slow
def test_version() -> None:
    from importlib.metadata import version

    done = elicitron("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"elicitron {version('elicitron')}")


# ---- 10. audit names the window ------------------------------------------------------------------


@pytest.mark.slow
def test_audit_names_the_window_that_answered(demo_main: RunningMain) -> None:
    window = demo_main.peer(name="laptop-window")
    call = window.call_tool("demo", "book_table", {})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    window.answer(invoke, "accept", BOOKING)
    window.expect_topic(call)
    entries = json.loads(demo_main.cli_plain("audit", "--json").stdout)
    entry = next(e for e in entries if e["channel"] == invoke["responseChannel"])
    assert (entry["window"], entry["windowName"]) == (window.window, "laptop-window")
    table = demo_main.cli_plain("audit").stdout.splitlines()
    row = next(line for line in table if "Book a table" in line and "accept" in line)
    assert "laptop-window" in row and window.window[-8:] not in row


# ---- 11. server restart says what happened --------------------------------------------------------


@pytest.mark.slow
def test_server_start_and_restart_say_what_happened(mains: Callable[..., RunningMain]) -> None:
    main = mains({"demo": demo_stdio_entry(), "files": {"command": MISSING_COMMAND}})
    main.wait_server_ready("demo")
    restart = main.cli("server", "restart", "demo")
    assert (restart.returncode, restart.stdout.strip()) == (0, "demo: restarted, ready (9 tools)"), restart.stderr
    running = main.cli("server", "start", "demo")
    assert (running.returncode, running.stdout.strip()) == (0, "demo: already running, ready (9 tools)")
    stop = main.cli("server", "stop", "demo")
    assert (stop.returncode, stop.stdout.strip()) == (0, "demo: stopped")
    start = main.cli("server", "start", "demo")
    assert (start.returncode, start.stdout.strip()) == (0, "demo: started, ready (9 tools)"), start.stderr
    broken = main.cli("server", "restart", "files")
    assert broken.returncode == 1
    assert f"files: restarted, but it is restarting: command {MISSING_COMMAND!r}" in broken.stderr


# ---- 14. serve without a host on stdin -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("server", [None, "demo"])
@pytest.mark.parametrize("stdin", ["/dev/null", "closed"])
def test_serve_without_a_host_on_stdin_says_so_in_one_line(demo_main: RunningMain, server: str | None,
                                                            stdin: str) -> None:
    args = ["serve", "--connection", str(demo_main.connection), *(["--server", server] if server else [])]
    redirect = "< /dev/null" if stdin == "/dev/null" else "<&-"
    command = " ".join([PYTHON, "-m", "cli_process", *args])
    done = subprocess.run(["sh", "-c", f"exec {command} {redirect}"], capture_output=True, text=True, timeout=30,
                          env=child_env(), cwd=ROOT, check=False)
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert line.startswith(f"elicitron serve: stdin is {'/dev/null' if stdin == '/dev/null' else 'closed'}")
    assert "MCP host" in line and "--print-config" in line


# ---- 15, 17. the README and the getting-started page -----------------------------------------------


def test_getting_started_says_how_to_pick_the_python_for_uv_and_pipx() -> None:
    text = GETTING_STARTED
    assert "uv tool install --python 3.12 ." in text or re.search(r"uv tool install[^\n`]*--python", text)
    assert re.search(r"pipx install[^\n`]*--python", text)


@pytest.mark.slow
def test_getting_started_names_every_tool_of_the_demo_server(demo_main: RunningMain) -> None:
    tools = json.loads(demo_main.cli("status", "--json").stdout)["servers"][0]["tools"]
    intro = GETTING_STARTED[GETTING_STARTED.index("`scripts/launch` with no config uses the embedded default"):]
    intro = intro[:intro.index("\n\n")]
    assert f"{len(tools)} tools" in intro
    assert [tool for tool in tools if f"`{tool}`" not in intro] == []


def test_readme_points_at_nothing_outside_the_repository() -> None:
    text = README
    assert "../" not in text and "handbook" not in text
    for target in re.findall(r"\]\(([^)#]+)\)|src=\"([^\"]+)\"", text):
        path = next(part for part in target if part)
        if not path.startswith(("http://", "https://")):
            assert (ROOT / path).exists(), path
    for path in re.findall(r"`((?:scripts|tests|main_process|cli_process|shared|gateway_process|renderer_process|asker_process)"
                           r"/[\w./-]+)`", text):
        assert (ROOT / path.rstrip("/")).exists(), path


# ---- the CLI page's table of commands ---------------------------------------------------------


def _cli_table() -> list[str]:
    """The first cells of the CLI page's "Commands at a glance" table (`elicitron ...`), unescaped."""
    section = CLI_PAGE[CLI_PAGE.index("## Commands at a glance"):]
    section = section[:section.index("\n## ")]
    cells = []
    for line in section.splitlines():
        if not line.startswith("| `elicitron"):
            continue
        first = re.split(r"(?<!\\)\|", line)[1].strip()
        cells.append(first.strip("`").replace("\\|", "|"))
    return cells


def _subcommands() -> list[str]:
    from cli_process.cli import _parser

    parser = _parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return list(action.choices)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_cli_pages_table_lists_what_exists_and_every_subcommand() -> None:
    rows = _cli_table()
    assert rows, "no table of commands on docs/cli.md"
    listed: dict[str, set[str]] = {}
    for row in rows:
        words = row.split()
        assert words[0] == "elicitron", row
        command = words[1] if not words[1].startswith("--") else ""
        if command in ("config", "policy"):  # their actions have their own options: `config import --help`
            command = f"{command} {words[2]}"
        listed.setdefault(command, set()).update(re.findall(r"--[a-z][a-z-]*", row))
    named = {command.split()[0] for command in listed if command}
    assert sorted(set(_subcommands()) - named) == [], "subcommands the CLI page's table leaves out"
    section = CLI_PAGE
    other_main = re.search(r"Other `main` options: (.*?)\n\n", section, re.DOTALL)
    assert other_main is not None
    listed["main"].update(re.findall(r"`(--[a-z][a-z-]*)", other_main.group(1)))  # `--option ...`
    takes_connection = ("Every command but `devices`, `config import` and `policy test` (they need no "
                        "main) takes `--connection FILE`") in section.replace("\n", " ")
    assert takes_connection
    for command, options in sorted(listed.items()):
        done = elicitron(*command.split(), "--help")
        assert done.returncode == 0, (command, done.stderr)
        missing = sorted(option for option in options if option not in done.stdout)
        assert missing == [], f"`elicitron {command} --help` has no {missing}"
        if command and command not in ("ask", "devices", "config import", "policy test"):
            assert "--connection" in done.stdout, command
    ask = elicitron("ask", "--help")
    assert "--connection" in ask.stdout
