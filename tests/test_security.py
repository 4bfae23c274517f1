"""Private runtime files, configurable size limits, and windows that quit without answering."""

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import WindowFactory
from kit.demo import demo_stdio_entry
from kit.env import child_env
from kit.main import RunningMain
from kit.paths import ROOT

from shared.connection_file import ensure_private_dir
from shared.errors import ConnectionFileError


def test_a_loose_runtime_dir_is_made_private_before_anything_is_written(
    main_factory: Callable[..., RunningMain], runtime_dir: Path
) -> None:
    runtime_dir.chmod(0o755)
    main = main_factory({"demo": demo_stdio_entry()})
    assert stat.S_IMODE(runtime_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(main.connection.stat().st_mode) == 0o600
    assert "tightened" in main.stderr.text()


def test_a_runtime_dir_that_cannot_be_made_private_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    loose = tmp_path / "shared-dir"
    loose.mkdir(mode=0o777)
    loose.chmod(0o777)

    def refuse(self: Path, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(Path, "chmod", refuse)
    with pytest.raises(ConnectionFileError, match="cannot be made 0700"):
        ensure_private_dir(loose)


@pytest.mark.slow
def test_main_refuses_to_start_where_it_cannot_make_its_dir(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "cli_process", "main", "--connection",
                             "/proc/elicitron-test/connection.json"], capture_output=True, text=True,
                            timeout=60, env=child_env(), cwd=ROOT, check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot create the private directory /proc/elicitron-test" in lines[0]


def test_the_message_size_limit_is_configurable(main_factory: Callable[..., RunningMain]) -> None:
    main = main_factory({"demo": demo_stdio_entry()}, "--max-message-bytes", "4096")
    peer = main.peer()
    peer.call_tool("demo", "echo", {"text": "x" * 5000})
    error = peer.expect_error("msgMcpCallTool")
    assert error["code"] == "too-large" and "4096" in error["message"]
    reply = peer.expect_topic(peer.call_tool("demo", "echo", {"text": "small"}))
    assert reply["result"]["content"][0]["text"] == "small"


def test_quitting_a_window_with_a_card_open_leaves_the_request_pending(
    demo_main: RunningMain, windows: WindowFactory
) -> None:
    window = windows(demo_main.connection, "quitter")
    demo_main.wait_peer("quitter", role="renderer")
    controller = demo_main.peer(name="ctl", role="controller")
    controller.call_tool("demo", "book_table", {})
    window.wait_card()
    window.proc.send_signal(signal.SIGINT)
    assert window.proc.wait(timeout=15) == 0
    demo_main.wait_peer("quitter", attached=False, timeout_s=15)
    status = json.loads(demo_main.cli("status", "--json").stdout)
    assert len(status["pending"]) == 1, "quitting a window is not an answer"
    assert os.path.exists(demo_main.connection)
