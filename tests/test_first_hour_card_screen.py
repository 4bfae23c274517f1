"""Issue 37, item 8: a card keeps its actions on the screen. server-everything's 13-field form on a
900×640 screen: Accept and "Decline all" are on screen without scrolling; the form scrolls instead.

The card runs in a process of its own whose offscreen screen is 900×640 (Qt's offscreen platform
takes a screen layout from a config file); the request is the real one, from the npm server
through a real main."""

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from kit.env import child_env
from kit.main import RunningMain
from kit.paths import PYTHON, ROOT
from test_everything_server import everything_binary

SCREEN = {"synchronousWindowSystemEvents": False, "windowFrameMargins": False,
          "screens": [{"name": "small", "x": 0, "y": 0, "width": 900, "height": 640,
                       "logicalDpiX": 96, "logicalDpiY": 96, "dpr": 1}]}


@pytest.fixture
def everything_main(main_factory: Callable[..., RunningMain]) -> RunningMain:
    running = main_factory({"everything": {"command": everything_binary(), "args": ["stdio"]}})
    running.wait_server_ready("everything", timeout_s=60)
    return running


@pytest.mark.slow
def test_the_13_field_card_on_a_900x640_screen_shows_accept_and_decline_all_without_scrolling(
        everything_main: RunningMain, tmp_path: Path) -> None:
    window = everything_main.peer("screen-probe")
    host = everything_main.peer("screen-host", role="controller")
    host.call_tool("everything", "trigger-elicitation-request", {})
    invoke = window.expect_topic("msgElicitationTransferInvoke", timeout_s=30)
    assert len(invoke["request"]["params"]["requestedSchema"]["properties"]) == 13
    invoke_file = tmp_path / "invoke.msgpack"
    invoke_file.write_bytes(msgspec.msgpack.encode(invoke))
    screen = tmp_path / "screen.json"
    screen.write_text(json.dumps(SCREEN))
    env = child_env(everything_main.home, QT_QPA_PLATFORM=f"offscreen:configfile={screen}")
    done = subprocess.run([PYTHON, str(ROOT / "tests" / "card_on_screen.py"), str(invoke_file)],
                          capture_output=True, text=True, timeout=60, env=env, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    top, bottom = shown["screen"]
    assert bottom - top + 1 == 640
    for part in ("accept", "declineAll"):
        start, end, visible = shown[part]
        assert visible and top <= start and end <= bottom + 1, (part, shown)
    assert shown["card"][1] - shown["card"][0] <= 640 - 40, shown  # room left for a title bar
    assert shown["formScrolls"], shown  # the form scrolls, the buttons do not
    window.answer(invoke, "cancel")
