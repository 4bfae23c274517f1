"""The `elicitron` command as a user runs it: single main, clean stop, config errors, status."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kit.demo import demo_stdio_entry
from kit.env import child_env
from kit.main import RunningMain, running_main
from kit.paths import ROOT
from kit.procs import descendants


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def run_elicitron(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli_process", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), cwd=ROOT, check=False)


def test_a_second_main_refuses_to_start_and_the_first_keeps_serving(demo_main: RunningMain) -> None:
    second = demo_main.cli("main")
    assert second.returncode == 1
    assert "another elicitron main" in second.stderr and str(demo_main.proc.pid) in second.stderr
    status = json.loads(demo_main.cli("status", "--json").stdout)
    assert status["pid"] == demo_main.proc.pid


def test_stop_shuts_main_and_every_server_process_down(demo_main: RunningMain) -> None:
    children = descendants(demo_main.proc.pid)
    assert children, "the demo server should run as a child of main"
    stopped = demo_main.cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped main (pid {demo_main.proc.pid})" in stopped.stdout
    assert demo_main.proc.wait(timeout=10) == 0
    assert not [pid for pid in children if alive(pid)]
    assert not demo_main.connection.exists(), "a clean exit removes the connection file"
    after = demo_main.cli("status")
    assert after.returncode == 3 and "no main is running" in after.stderr


def test_status_lists_servers_windows_and_pending(demo_main: RunningMain) -> None:
    window = demo_main.peer(name="status-window")
    window.call_tool("demo", "book_table", {})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    text = demo_main.cli("status").stdout
    assert "demo" in text and "ready" in text and "book_table" in text
    assert "status-window" in text and invoke["responseChannel"] in text
    report = json.loads(demo_main.cli("status", "--json").stdout)
    assert [s["status"] for s in report["servers"]] == ["ready"]
    assert [p["name"] for p in report["peers"] if p["role"] == "renderer"] == ["status-window"]
    assert [p["responseChannel"] for p in report["pending"]] == [invoke["responseChannel"]]
    # main runs on uvloop wherever it is installed (every platform but Windows), and says so
    assert report["eventLoop"].startswith("uvloop ")
    assert f"({report['eventLoop']} loop)" in text.splitlines()[0]


@pytest.mark.slow
def test_elicitron_loop_asyncio_runs_main_on_the_standard_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELICITRON_LOOP", "asyncio")
    with running_main({"demo": demo_stdio_entry()}) as main:
        main.wait_server_ready("demo")
        window = main.peer(name="asyncio-window")
        call = window.call_tool("demo", "book_table", {"restaurant": "Loop"})
        window.answer(window.expect_topic("msgElicitationTransferInvoke"), "accept", {"name": "Ada", "party_size": 2})
        text = window.expect_topic(call)["result"]["content"][0]["text"]
        assert '"accept"' in text and '"Ada"' in text
        report = json.loads(main.cli("status", "--json").stdout)
        assert report["eventLoop"] == "asyncio"


@pytest.mark.slow
def test_a_bad_elicitron_loop_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    env = {**child_env(), "ELICITRON_LOOP": "tokio"}
    # launch says it too, before it would start main in the background (where main's stderr goes nowhere)
    for command in (["main"], ["launch", "--no-window"]):
        result = subprocess.run([sys.executable, "-m", "cli_process", *command, "--connection", str(tmp_path / "c.json")],
                                capture_output=True, text=True, timeout=60, env=env, cwd=ROOT, check=False)
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr.strip().splitlines()[-1] == ("elicitron: config error: ELICITRON_LOOP must be one of "
                                                          "uvloop, asyncio, not 'tokio'"), command
        assert "starting main" not in result.stderr
        assert not (tmp_path / "c.json").exists(), "nothing started"


@pytest.mark.slow
def test_malformed_config_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    cases = {
        "not-json.json": "{ nope",
        "bad-entry.json": json.dumps({"mcpServers": {"broken": {"args": ["x"]}}}),
        "bad-args.json": json.dumps({"mcpServers": {"s": {"command": "x", "args": "not-a-list"}}}),
    }
    for filename, text in cases.items():
        path = tmp_path / filename
        path.write_text(text)
        for command in ("main", "launch"):
            result = run_elicitron(command, "--config", str(path), "--connection", str(tmp_path / "c.json"))
            lines = result.stderr.strip().splitlines()
            assert result.returncode == 2, (filename, command, result.stderr)
            assert len(lines) == 1 and str(path) in lines[0], lines
    assert "mcpServers.broken" in run_elicitron("main", "--config", str(tmp_path / "bad-entry.json")).stderr


def test_call_reports_errors_and_bad_arguments(demo_main: RunningMain) -> None:
    bad_json = demo_main.cli("call", "demo", "echo", "{not json")
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr
    unknown = demo_main.cli("call", "ghost", "echo", "{}")
    assert unknown.returncode == 1 and "unknown server 'ghost'" in unknown.stderr
    ok = demo_main.cli("call", "demo", "echo", '{"text": "hello"}')
    assert (ok.returncode, ok.stdout.strip()) == (0, "hello")


@pytest.mark.slow
def test_commands_without_a_running_main_say_so(tmp_path: Path) -> None:
    for args in (["status"], ["stop"], ["call", "demo", "echo", "{}"]):
        result = run_elicitron(*args, "--connection", str(tmp_path / "none" / "connection.json"))
        assert result.returncode == 3 and "no main is running" in result.stderr, result.stderr


def test_env_var_names_the_connection_file(demo_main: RunningMain) -> None:
    env = {**child_env(), "ELICITRON_CONNECTION": str(demo_main.connection)}
    result = subprocess.run([sys.executable, "-m", "cli_process", "status", "--json"], capture_output=True,
                            text=True, timeout=30, env=env, cwd=ROOT, check=False)
    assert json.loads(result.stdout)["pid"] == demo_main.proc.pid
    assert os.stat(demo_main.connection).st_mode & 0o777 == 0o600
