"""Windows come and go, main stays: real renderer processes killed, frozen, reconnecting."""

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from conftest import WindowFactory
from kit.demo import demo_stdio_entry
from kit.env import child_env
from kit.main import RunningMain
from kit.output import ChildOutput
from kit.paths import ROOT
from kit.procs import descendants, end_process


def result_of(reply: dict[str, Any]) -> Any:
    assert "result" in reply, reply
    return json.loads(reply["result"]["content"][0]["text"])


def test_a_killed_window_loses_nothing_and_the_next_window_answers_once(
    demo_main: RunningMain, windows: WindowFactory
) -> None:
    window = windows(demo_main.connection, "doomed")
    demo_main.wait_peer("doomed", role="renderer")
    controller = demo_main.peer(name="ctl", role="controller")
    call = controller.call_tool("demo", "book_table", {"restaurant": "Kill -9"})
    window.wait_card()
    window.proc.send_signal(signal.SIGKILL)
    window.proc.wait(timeout=10)

    survivor = demo_main.peer(name="next-window", hello=False)
    pending = survivor.hello()["pending"]
    assert [p["request"]["params"]["message"] for p in pending] == ["Book a table at Kill -9?"]
    survivor.answer(pending[0], "accept", {"name": "Survivor", "party_size": 3})
    assert result_of(controller.expect_topic(call)) == {"action": "accept",
                                                        "content": {"name": "Survivor", "party_size": 3}}
    survivor.answer(pending[0], "accept", {"name": "Twice", "party_size": 3})
    assert survivor.expect_error(pending[0]["responseChannel"])["code"] == "already-answered"


def test_two_windows_answering_at_once_reach_the_server_exactly_once(demo_main: RunningMain) -> None:
    left, right = demo_main.peer(name="left"), demo_main.peer(name="right")
    for round_number in range(10):
        call = left.call_tool("demo", "book_table", {"restaurant": f"race {round_number}"})
        invoke = left.expect_topic("msgElicitationTransferInvoke")
        assert right.expect_topic("msgElicitationTransferInvoke") == invoke
        left.answer(invoke, "accept", {"name": "Left", "party_size": 1})
        right.answer(invoke, "accept", {"name": "Right", "party_size": 2})
        result = result_of(left.expect_topic(call))
        winner = left if result["content"]["name"] == "Left" else right
        loser = right if winner is left else left
        for peer in (left, right):
            dismiss = peer.expect_topic("msgElicitationTransferDismiss")
            assert dismiss["reason"] == "answered" and dismiss["by"] == winner.window
        assert loser.expect_error(invoke["responseChannel"])["code"] == "already-answered"


def test_a_frozen_window_is_detached_and_reattaches_when_resumed(
    demo_main: RunningMain, windows: WindowFactory
) -> None:
    window = windows(demo_main.connection, "frozen")
    demo_main.wait_peer("frozen", role="renderer")
    window.proc.send_signal(signal.SIGSTOP)
    try:
        demo_main.wait_peer("frozen", attached=False, timeout_s=15)
    finally:
        window.proc.send_signal(signal.SIGCONT)
    demo_main.wait_peer("frozen", role="renderer", timeout_s=15)
    status = json.loads(demo_main.cli("status", "--json").stdout)
    assert [p["name"] for p in status["peers"] if p["role"] == "renderer"] == ["frozen"]


def test_windows_reconnect_by_themselves_when_main_restarts(
    main_factory: Callable[..., RunningMain], windows: WindowFactory
) -> None:
    first = main_factory({"demo": demo_stdio_entry()})
    window = windows(first.connection, "survivor")
    first.wait_peer("survivor", role="renderer")
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    window.wait_state("disconnected - reconnecting")
    second = main_factory({"demo": demo_stdio_entry()})
    second.wait_peer("survivor", role="renderer")
    assert window.proc.poll() is None


def test_main_opens_a_window_when_a_request_finds_none(main_factory: Callable[..., RunningMain]) -> None:
    main = main_factory({"demo": demo_stdio_entry()}, "--auto-open-window")
    main.wait_server_ready("demo")
    controller = main.peer(name="ctl", role="controller")
    controller.call_tool("demo", "book_table", {})
    try:
        main.wait_peer("auto-opened", role="renderer")
    finally:
        for pid, cmdline in descendants(main.proc.pid).items():
            if "renderer_process" in cmdline:
                subprocess.run(["kill", "-9", str(pid)], check=False)


def test_launch_with_main_running_only_opens_a_window(demo_main: RunningMain) -> None:
    launcher = subprocess.Popen([sys.executable, "-m", "cli_process", "launch", "--connection",
                                 str(demo_main.connection), "--name", "launched"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=child_env(QT_QPA_PLATFORM="offscreen"), cwd=ROOT)
    assert launcher.stderr is not None
    launcher_log = ChildOutput(launcher.stderr)
    try:
        try:
            demo_main.wait_peer("launched", role="renderer")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nthe window's log:\n{launcher_log.tail()}") from None
        assert json.loads(demo_main.cli("status", "--json").stdout)["pid"] == demo_main.proc.pid
    finally:
        end_process(launcher)
        launcher_log.close()
    # Closing (here: killing) the only window leaves main and its servers running.
    assert demo_main.proc.poll() is None
    reply = demo_main.cli("call", "demo", "echo", '{"text": "still up"}')
    assert reply.stdout.strip() == "still up"
