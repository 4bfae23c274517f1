"""`elicitron ask` as a script runs it, answered in a real window (pytest-qt) against a real main."""

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ask_kit import ask, audit_entries, deploy_script, ended, finished, module_main, window
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain
from kit.paths import ROOT
from kit.peer import WirePeer
from kit.procs import descendants
from PySide6.QtWidgets import QCheckBox, QLabel, QLineEdit
from pytestqt.qtbot import QtBot
from test_remote_windows import free_tcp_port, pair

pytestmark = pytest.mark.slow  # real mains, real processes

TAG_SCHEMA = json.dumps({"type": "object", "properties": {
    "tag": {"type": "string", "title": "Release tag", "minLength": 1},
    "replicas": {"type": "integer", "minimum": 1, "default": 2}}, "required": ["tag", "replicas"]})


@pytest.fixture(scope="module")
def main() -> Iterator[RunningMain]:
    with module_main("--listen", f"tcp://127.0.0.1:{free_tcp_port()}") as running:
        yield running


@pytest.fixture
def peer(main: RunningMain) -> Iterator[WirePeer]:
    """A second window, written from the contract alone."""
    peer = main.peer(name="second-window")
    yield peer
    peer.close()


def invoke_for(peer: WirePeer, message: str) -> dict:
    return peer.expect(lambda t, b: t == "msgElicitationTransferInvoke"
                       and b["request"]["params"]["message"] == message)[1]


def dismissal(peer: WirePeer, invoke: dict, timeout_s: float = 15.0) -> dict:
    return peer.expect(lambda t, b: t == "msgElicitationTransferDismiss"
                       and b["responseChannel"] == invoke["responseChannel"], timeout_s)[1]


def test_a_script_asks_the_window_names_it_and_the_accepted_content_is_printed(
    qtbot: QtBot, main: RunningMain, tmp_path: Path
) -> None:
    script = deploy_script(tmp_path)
    proc = ask(main.connection, "Which release goes to prod?", "--schema", TAG_SCHEMA, program=[str(script)])
    try:
        with window(qtbot, main.connection, "laptop") as win:
            card = win.card()
            header = card.findChild(QLabel, "header")
            assert header is not None
            assert f"deploy.sh (pid {proc.pid} on {socket.gethostname()})" in header.text()
            tag = card.findChild(QLineEdit, "field:tag")
            assert tag is not None
            qtbot.keyClicks(tag, "v1.4")
            win.click(card, "accept")
            code, out, err = finished(qtbot, proc)
            assert (code, json.loads(out)) == (0, {"tag": "v1.4", "replicas": 2}), err
            win.no_card()
            window_id = win.bridge.window_id
    finally:
        ended(proc)
    [row] = audit_entries(main, "Which release goes to prod?")
    assert (row["kind"], row["server"], row["outcome"], row["window"]) == ("question", "deploy.sh", "accept",
                                                                          window_id)


def test_decline_exits_1_and_cancel_exits_4(qtbot: QtBot, main: RunningMain) -> None:
    with window(qtbot, main.connection, "laptop") as win:
        for button, expected in (("decline", 1), ("cancel", 4)):
            proc = ask(main.connection, "--message", f"Go on ({button})?", "--name", "nightly")
            try:
                win.click(win.card(), button)
                code, out, err = finished(qtbot, proc)
            finally:
                ended(proc)
            assert (code, out) == (expected, ""), err
            assert err.count("\n") == 1


def test_a_link_question_shows_the_url_card(qtbot: QtBot, main: RunningMain) -> None:
    with window(qtbot, main.connection, "laptop") as win:
        proc = ask(main.connection, "Approve the release in the portal?", "--url", "https://portal.example/r/14")
        try:
            card = win.card()
            assert card.kind == "url" and card.invoke.request.params["url"] == "https://portal.example/r/14"
            assert card.accept_button.text() == "Accept and open"
            win.click(card, "decline")
            code, out, err = finished(qtbot, proc)
        finally:
            ended(proc)
        assert (code, out) == (1, ""), err


def test_yes_no_is_a_confirm_printing_true_or_false(qtbot: QtBot, main: RunningMain) -> None:
    with window(qtbot, main.connection, "laptop") as win:
        for button, expected in (("accept", (0, "true\n")), ("decline", (1, "false\n"))):
            proc = ask(main.connection, "--yes-no", "Deploy 1.4 to prod?")
            try:
                card = win.card()
                checkbox = card.findChild(QCheckBox, "field:answer")
                assert checkbox is not None and not checkbox.isVisible()
                assert [card.accept_button.text(), card.decline_button.text()] == ["Yes", "No"]
                win.click(card, button)
                code, out, err = finished(qtbot, proc)
            finally:
                ended(proc)
            assert (code, out) == expected, err
    rows = audit_entries(main, "Deploy 1.4 to prod?")
    assert sorted(row["outcome"] for row in rows) == ["accept", "decline"]  # the record tells yes from no


def test_nobody_answers_within_the_timeout_exit_5_and_every_window_drops_the_card(
    qtbot: QtBot, main: RunningMain, peer: WirePeer
) -> None:
    with window(qtbot, main.connection, "laptop", keep_alive=[peer]) as win:
        proc = ask(main.connection, "Anyone there?", "--timeout", "2")
        try:
            win.card()
            invoke = invoke_for(peer, "Anyone there?")
            assert invoke["expiresAt"] - invoke["createdAt"] == 2000
            code, out, err = finished(qtbot, proc, keep_alive=[peer])
        finally:
            ended(proc)
        assert (code, out) == (5, "") and "expired" in err
        assert dismissal(peer, invoke)["reason"] == "expired"
        win.no_card()
        assert "expired" in win.window.statusBar().currentMessage()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_withdraws_the_question_from_every_window(
    qtbot: QtBot, main: RunningMain, peer: WirePeer, signum: int
) -> None:
    message = f"Interrupted by {signal.Signals(signum).name}?"
    with window(qtbot, main.connection, "laptop", keep_alive=[peer]) as win:
        proc = ask(main.connection, message)
        try:
            win.card()
            invoke = invoke_for(peer, message)
            proc.send_signal(signum)
            code, _out, err = finished(qtbot, proc, keep_alive=[peer])
        finally:
            ended(proc)
        assert code == 128 + signum and "withdrawn" in err
        assert dismissal(peer, invoke)["reason"] == "cancelled"
        win.no_card()
    [row] = audit_entries(main, message)
    assert row["outcome"] == "cancelled"


def test_an_asker_killed_with_sigkill_is_withdrawn_within_the_liveness_timeout(
    qtbot: QtBot, main: RunningMain, peer: WirePeer
) -> None:
    with window(qtbot, main.connection, "laptop", keep_alive=[peer]) as win:
        proc = ask(main.connection, "Will I survive kill -9?")
        try:
            win.card()
            invoke = invoke_for(peer, "Will I survive kill -9?")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            # main detaches a peer silent for 5 s and checks once a second (the window waits in
            # Qt's loop, the contract peer heartbeating meanwhile).
            win.no_card(timeout_ms=8_000)
            assert dismissal(peer, invoke, timeout_s=8)["reason"] == "cancelled"
        finally:
            ended(proc)


def test_a_bad_schema_exits_2_naming_the_property_and_no_window_sees_it(
    main: RunningMain, peer: WirePeer
) -> None:
    schema = json.dumps({"type": "object", "properties": {"nested": {"type": "object"}}})
    result = main.cli("ask", "Bad?", "--schema", schema)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1 and "'nested'" in result.stderr and "object" in result.stderr
    # The next question is the first thing any window is shown.
    proc = ask(main.connection, "Good after bad?", "--timeout", "30")
    try:
        invoke = peer.expect_topic("msgElicitationTransferInvoke")
        assert invoke["request"]["params"]["message"] == "Good after bad?"
        peer.answer(invoke, "decline")
        assert proc.wait(timeout=15) == 1
    finally:
        ended(proc)


def test_no_main_running_exits_3_at_once(tmp_path: Path) -> None:
    missing = tmp_path / "connection.json"
    stale = tmp_path / "stale.json"
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale.write_text(json.dumps({"protocol": 1, "endpoint": f"ipc://{tmp_path}/main.sock", "token": "t",
                                 "pid": gone.pid}))
    stale.chmod(0o600)
    for connection, why in ((missing, "no connection file"), (stale, f"pid {gone.pid} is gone")):
        result = subprocess.run([sys.executable, "-m", "cli_process", "ask", "Anyone?",
                                 "--connection", str(connection)],
                                capture_output=True, text=True, timeout=30, env=child_env(), cwd=ROOT, check=False)
        assert result.returncode == 3 and why in result.stderr, result.stderr


def test_start_starts_main_in_the_background_first(qtbot: QtBot) -> None:
    runtime = short_tmp_dir()
    connection = runtime / "connection.json"
    proc = ask(connection, "Started for me?", "--start", "--timeout", "60")
    peer: WirePeer | None = None
    try:
        qtbot.waitUntil(connection.exists, timeout=60_000)  # main publishes it once it listens
        info = json.loads(connection.read_text())
        peer = WirePeer(info["endpoint"], info["token"], name="answering")
        pending = peer.hello()["pending"]
        invoke = pending[0] if pending else peer.expect_topic("msgElicitationTransferInvoke", timeout_s=60)
        assert invoke["request"]["params"]["message"] == "Started for me?"
        peer.answer(invoke, "accept", {})
        code, _out, err = finished(qtbot, proc, keep_alive=[peer])
        assert code == 0 and "starting main in the background" in err, err
    finally:
        ended(proc)
        if peer is not None:
            peer.close()
        if connection.exists():
            main_pid = json.loads(connection.read_text())["pid"]
            for pid, cmdline in descendants(main_pid).items():
                if "renderer_process" in cmdline:  # main's auto-open, as after `elicitron launch`
                    os.kill(pid, signal.SIGKILL)
            subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                           capture_output=True, timeout=60, env=child_env(), cwd=ROOT, check=False)
        subprocess.run(["rm", "-rf", str(runtime)], check=False)


def test_asking_loads_neither_mcp_nor_qt_nor_mains_internals(main: RunningMain, peer: WirePeer) -> None:
    proc = ask(main.connection, "What do you import?", "--timeout", "30",
               program=[sys.executable, "-X", "importtime", "-m", "cli_process"])
    try:
        peer.answer(invoke_for(peer, "What do you import?"), "decline")
        _out, err = proc.communicate(timeout=30)
    finally:
        ended(proc)
    assert proc.returncode == 1
    imported = {line.rsplit("|", 1)[1].strip() for line in err.splitlines()
                if line.startswith("import time:")}
    assert {"asker_process.cli", "asker_process.client", "zmq"} <= imported
    assert not {m for m in imported if m.split(".")[0] in ("mcp", "mcp_types", "PySide6", "pydantic")}
    # the CLI only dispatches (its exit codes and connection file in command.py, the arguments of
    # --store and `policy` in store_cli.py and policy_cli.py): nothing of main is loaded but where
    # its log goes by default.
    assert {m for m in imported if m.startswith("cli_process")} <= {
        "cli_process", "cli_process.__main__", "cli_process.cli", "cli_process.command", "cli_process.store_cli",
        "cli_process.policy_cli"}
    assert {m for m in imported if m.startswith("main_process")} <= {"main_process", "main_process.paths"}


def test_a_paired_remote_window_over_tcp_and_curve_answers_and_a_remote_script_can_ask(
    qtbot: QtBot, main: RunningMain, tmp_path: Path
) -> None:
    remote_file = tmp_path / "remote.json"
    remote_file.write_text(json.dumps(pair(main, "laptop")))
    remote_file.chmod(0o600)
    with window(qtbot, remote_file, "laptop over tcp") as win:  # MainBridge with the paired CURVE keys
        for connection in (main.connection, remote_file):  # asked on main's machine, then from afar
            proc = ask(connection, "--yes-no", f"Deploy, asked via {connection.name}?")
            try:
                win.click(win.card(), "accept")
                code, out, err = finished(qtbot, proc)
            finally:
                ended(proc)
            assert (code, out) == (0, "true\n"), err
        window_id = win.bridge.window_id
    rows = audit_entries(main, "Deploy, asked via remote.json?") + audit_entries(main, "Deploy, asked via "
                                                                                         "connection.json?")
    assert [(row["outcome"], row["window"]) for row in rows] == [("accept", window_id)] * 2


def test_the_global_log_level_may_come_first(main: RunningMain) -> None:
    result = main.cli_plain("--log-level", "info", "ask", "--yes-no", "Anyone?",
                            "--connection", "/nonexistent/c.json")
    assert result.returncode == 3 and "no connection file" in result.stderr
