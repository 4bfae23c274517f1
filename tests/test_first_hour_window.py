"""The first hour: each mistake a newcomer makes gets one line that says what to do.

A server whose command is missing shows its whole error in the window; a paired connection file
that is not 0600 says so in the window with the fix, and `elicitron pair --output` writes one that
is; without a display, launching says so and starts nothing; `ask --start` while windows are
reconnecting opens no extra window; `elicitron stop` turns the window to "main is not running" at
once; a card grows with its error lines, and "Decline all" is a control that reads as one."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.output import follow, wait_line
from kit.paths import ROOT
from kit.procs import descendants, end_process
from kit.window import start_window
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QLineEdit, QPushButton, QScrollArea, QTreeWidget, QWidget
from pytestqt.qtbot import QtBot

from renderer_process.bridge import MainBridge
from renderer_process.card import ElicitationCard
from renderer_process.main_window import MainWindow
from shared import messages

MISSING_COMMAND = "elicitron-test-no-such-command"


def child[T: QWidget](widget: QWidget, kind: type[T], name: str) -> T:
    found = widget.findChild(kind, name)
    assert found is not None, f"no {kind.__name__} named {name!r}"
    return found


@pytest.fixture
def open_window(qtbot: QtBot) -> Iterator[Callable[..., tuple[MainWindow, MainBridge]]]:
    """A real window (MainBridge + MainWindow, offscreen) in this process; closed after the test."""
    bridges: list[MainBridge] = []

    def opener(connection: Path, name: str, **bridge_options: float) -> tuple[MainWindow, MainBridge]:
        bridge = MainBridge(connection, name, **bridge_options)  # type: ignore[arg-type]
        window = MainWindow(name=name, opener=lambda _url: None)
        qtbot.addWidget(window)
        window.attach(bridge)
        window.resize(900, 640)
        window.show()
        qtbot.waitExposed(window)
        bridge.start()
        bridges.append(bridge)
        return window, bridge

    yield opener
    for bridge in bridges:
        bridge.close()


# ---- 1b. a server whose command is missing: the window shows the whole reason ----------------------


@pytest.mark.slow
def test_a_missing_command_shows_its_whole_error_wrapped_and_selectable(
    qtbot: QtBot, main_factory: Callable[..., RunningMain], open_window: Callable[..., tuple[MainWindow, MainBridge]]
) -> None:
    main = main_factory({"broken": {"command": MISSING_COMMAND}})
    window, bridge = open_window(main.connection, "first-hour")
    errors: list[str] = []
    bridge.servers_changed.connect(lambda servers: errors.extend(s.error for s in servers if s.error))
    tree = child(window, QTreeWidget, "servers")
    qtbot.waitUntil(lambda: tree.topLevelItemCount() == 1 and bool(errors), timeout=30_000)
    label = child(window, QLabel, "server_error")
    qtbot.waitUntil(lambda: label.isVisible() and label.text() == errors[-1], timeout=30_000)
    error = label.text()
    assert "FileNotFoundError" in error or MISSING_COMMAND in error, error
    # All of it, wrapped to the panel, not cut to what the tree's column holds.
    assert label.wordWrap()
    flags = label.textInteractionFlags()
    assert flags & Qt.TextInteractionFlag.TextSelectableByMouse
    assert flags & Qt.TextInteractionFlag.TextSelectableByKeyboard
    box = child(window, QScrollArea, "server_error_box")
    # Once the layout settles (it runs on a later turn of the loop: the box's scroll bar can come and
    # go first): as wide as the panel, every line shown.
    qtbot.waitUntil(lambda: label.width() <= box.viewport().width()
                    and label.heightForWidth(box.viewport().width()) <= box.viewport().height(), timeout=5_000)
    row = tree.topLevelItem(0)
    assert row is not None and row.toolTip(0).endswith(error)  # the tooltip holds it whole too


def test_the_error_under_the_tree_follows_the_selection_and_holds_long_text(qtbot: QtBot) -> None:
    window = MainWindow(name="fed", opener=lambda _url: None)
    qtbot.addWidget(window)
    window.resize(900, 640)
    window.show()
    qtbot.waitExposed(window)
    long_error = ("FileNotFoundError: [Errno 2] No such file or directory: 'elicitron-test-no-such-command' "
                  "(the server's command is not on PATH=/usr/local/bin:/usr/bin:/bin)")
    window.on_state_changed("connected")
    window.on_servers_changed([
        messages.ServerInfo(name="broken", status="failed", tools=[], error=long_error),
        messages.ServerInfo(name="fine", status="ready", tools=["t"]),
    ])
    label = child(window, QLabel, "server_error")
    box = child(window, QScrollArea, "server_error_box")
    qtbot.waitUntil(lambda: label.isVisible() and label.text() == long_error, timeout=5_000)
    qtbot.waitUntil(lambda: label.heightForWidth(box.viewport().width()) <= box.viewport().height(),
                    timeout=5_000)
    assert label.accessibleName() == "Error of server broken"
    tree = child(window, QTreeWidget, "servers")
    fine = tree.topLevelItem(1)
    assert fine is not None
    tree.setCurrentItem(fine)
    assert not box.isVisible()


# ---- 16. a card grows with its error lines; "Decline all" is a control -----------------------------


def booking_invoke(channel: str = "msgElicitationTransferResult-card-1") -> messages.ElicitationInvoke:
    properties = {
        "name": {"type": "string", "title": "Name on the booking", "default": "Ada", "minLength": 1},
        "party_size": {"type": "integer", "title": "Guests", "minimum": 1, "maximum": 12, "default": 2},
        "email": {"type": "string", "format": "email", "title": "Email", "default": "ada@example.com"},
    }
    params = {"mode": "form", "message": "Book a table at Chez MCP?",
              "requestedSchema": {"type": "object", "properties": properties, "required": ["name", "email"]}}
    return messages.ElicitationInvoke(request=messages.ElicitationRequest(server="demo", params=params),
                                      response_channel=channel, created_at=1, expires_at=None, origin=None)


@pytest.fixture
def window_with_card(qtbot: QtBot) -> tuple[MainWindow, ElicitationCard]:
    window = MainWindow(name="cards", opener=lambda _url: None)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.on_state_changed("connected")
    window.on_invoked(booking_invoke())
    card = window.current_card()
    assert isinstance(card, ElicitationCard)
    qtbot.waitExposed(card)
    return window, card


def fully_shown(widget: QWidget) -> bool:
    """Shown whole: not clipped by the scroll area, and not squeezed below its own height."""
    return (widget.isVisible() and widget.visibleRegion().boundingRect() == widget.rect()
            and widget.height() >= widget.sizeHint().height())


def test_an_error_line_grows_the_card_instead_of_hiding_the_last_field(
    qtbot: QtBot, window_with_card: tuple[MainWindow, ElicitationCard]
) -> None:
    _window, card = window_with_card
    scroll = card.findChild(QScrollArea)  # around the form
    assert scroll is not None
    name, email = child(card, QLineEdit, "field:name"), child(card, QLineEdit, "field:email")
    qtbot.waitUntil(lambda: fully_shown(email), timeout=5_000)
    height_before = card.height()
    for edit, text in ((email, "ada at example"), (name, "")):  # an error line under two fields
        edit.selectAll()
        qtbot.keyClick(edit, Qt.Key.Key_Delete)
        qtbot.keyClicks(edit, text)
    errors = [child(card, QLabel, "error:email"), child(card, QLabel, "error:name")]
    qtbot.waitUntil(lambda: all(error.isVisible() for error in errors), timeout=5_000)
    # The card grew: the last field and its error line show whole, and the form has no scroll bar.
    qtbot.waitUntil(lambda: fully_shown(errors[0]) and fully_shown(email), timeout=5_000)
    assert not scroll.verticalScrollBar().isVisible()
    assert card.height() > height_before


def test_decline_all_is_a_link_styled_button_with_an_accessible_name(
    qtbot: QtBot, window_with_card: tuple[MainWindow, ElicitationCard]
) -> None:
    window, card = window_with_card
    button = child(card, QPushButton, "decline_all")
    assert button.accessibleName() == "Decline all from demo for this session"
    assert button.cursor().shape() == Qt.CursorShape.PointingHandCursor
    assert button.font().underline()  # reads as a link, not as a line of text
    assert button.focusPolicy() & Qt.FocusPolicy.TabFocus
    policies: list[tuple[str, bool]] = []
    window.policy_requested.connect(lambda server, decline: policies.append((server, decline)))
    button.setFocus()
    qtbot.keyClick(button, Qt.Key.Key_Space)  # a control: the keyboard presses it
    assert policies == [("demo", True)]


# ---- 2. a paired connection file open to others: the window says why, with the fix -----------------


def free_tcp_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_a_paired_file_open_to_others_is_explained_in_the_window_and_pair_output_writes_0600(
    qtbot: QtBot, main_factory: Callable[..., RunningMain],
    open_window: Callable[..., tuple[MainWindow, MainBridge]], tmp_path: Path,
) -> None:
    main = main_factory({}, "--listen", f"tcp://127.0.0.1:{free_tcp_port()}")
    # What `elicitron pair > laptop.json` left under a usual umask: the shell's 0644.
    printed = main.cli("pair", "--name", "laptop")
    assert printed.returncode == 0, printed.stderr
    loose = tmp_path / "laptop.json"
    loose.write_text(printed.stdout)
    loose.chmod(0o644)
    window, bridge = open_window(loose, "laptop")
    banner = child(window, QLabel, "main_banner_text")
    qtbot.waitUntil(lambda: banner.isVisible() and "chmod 600" in banner.text(), timeout=15_000)
    assert "mode 644" in banner.text() and f"chmod 600 {loose}" in banner.text(), banner.text()
    loose.chmod(0o600)  # what the banner says to do: the window attaches by itself
    qtbot.waitUntil(lambda: bridge.is_welcomed, timeout=15_000)
    qtbot.waitUntil(lambda: not child(window, QWidget, "main_banner").isVisible(), timeout=5_000)

    # `pair --output FILE` writes it 0600 itself, and says what to do with it.
    written = tmp_path / "desk.json"
    made = main.cli("pair", "--name", "desk", "--output", str(written))
    assert (made.returncode, made.stdout) == (0, ""), made.stderr
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert "elicitron window --connection desk.json" in made.stderr
    _desk, desk_bridge = open_window(written, "desk")
    qtbot.waitUntil(lambda: desk_bridge.is_welcomed, timeout=15_000)

    # Printed into a file after all (`pair > FILE`): that file is made 0600 too.
    redirected = tmp_path / "redirected.json"
    redirected.touch(mode=0o644)
    redirected.chmod(0o644)
    with redirected.open("w") as out:
        done = subprocess.run([sys.executable, "-m", "cli_process", "pair", "--name", "redirected", "--connection",
                               str(main.connection)], stdout=out, stderr=subprocess.PIPE, text=True, timeout=60,
                              env=child_env(main.home), cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(redirected.stat().st_mode) == 0o600
    assert json.loads(redirected.read_text())["clientSecretKey"]


# ---- 13. after `elicitron stop`: "main is not running" at once ---------------------------------------


@pytest.mark.slow
def test_after_elicitron_stop_the_window_says_main_is_not_running_at_once(
    qtbot: QtBot, demo_main: RunningMain, open_window: Callable[..., tuple[MainWindow, MainBridge]]
) -> None:
    # The bridge's own silence limit is a minute away: only main's word can turn the window in time.
    window, bridge = open_window(demo_main.connection, "stop-at-once", silence_limit=60.0)
    tree = child(window, QTreeWidget, "servers")
    banner = child(window, QWidget, "main_banner")
    qtbot.waitUntil(lambda: bridge.is_welcomed and tree.topLevelItemCount() == 1, timeout=30_000)
    shown_while_attached: list[str] = []  # server statuses the window showed without the banner
    bridge.servers_changed.connect(
        lambda servers: shown_while_attached.extend(s.status for s in servers if not banner.isVisible()))

    stopping = subprocess.Popen([sys.executable, "-m", "cli_process", "stop", "--connection",
                                 str(demo_main.connection)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=child_env(demo_main.home), cwd=ROOT)
    try:
        qtbot.waitUntil(banner.isVisible, timeout=10_000)  # the window's loop runs meanwhile, as a user's does
        qtbot.waitUntil(lambda: stopping.poll() is not None, timeout=30_000)
    finally:
        if stopping.poll() is None:
            stopping.kill()
        stopping.wait(timeout=10)
    assert stopping.returncode == 0
    assert "main is not running" in child(window, QLabel, "main_banner_text").text()
    assert not child(window, QPushButton, "server_start").isEnabled()
    row = tree.topLevelItem(0)
    assert row is not None and row.text(1) == "main not running"
    assert "stopped" not in shown_while_attached  # never "connected" with a stopped server and Start


# ---- 12. `ask --start` while a window is reconnecting: no other window ------------------------------


def auto_open_decision(line: str) -> bool:
    return "auto-open:" in line or line.endswith("no window is attached: opening one")


@pytest.mark.slow
def test_ask_start_while_a_window_is_reconnecting_opens_no_other_window() -> None:
    home = short_tmp_dir("eli-hour-")
    runtime = home / "run"
    (home / "config" / "elicitron").mkdir(parents=True)
    # No servers, for the first main and for the one `ask --start` starts (it reads the default config).
    config = write_config(home / "config" / "elicitron" / "mcp.json", {})
    first = start_main(config, runtime, home=home)
    connection = first.connection
    window = start_window(connection, "survivor", home=home)
    log, log_output = follow(home / "state" / "elicitron" / "log" / "main.log")  # `ask --start`'s main logs here
    asking: subprocess.Popen[str] | None = None
    try:
        window.wait_state("connected", timeout_s=30)
        assert first.cli("stop").returncode == 0
        first.proc.wait(timeout=30)
        window.wait_state("disconnected - reconnecting", timeout_s=15)
        window.proc.send_signal(signal.SIGSTOP)  # it cannot attach before the question arrives
        asking = subprocess.Popen(
            [sys.executable, "-m", "cli_process", "ask", "Still there?", "--start", "--timeout", "60",
             "--connection", str(connection)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=child_env(home, ELICITRON_AUTO_OPEN_GRACE_S="10"), cwd=ROOT)
        wait_line(log_output, lambda line: "no window is attached: opening one" in line,
                  "the question found no window")
        window.proc.send_signal(signal.SIGCONT)
        assert window.wait_card(timeout_s=30)["server"]  # the survivor shows the question
        decision = wait_line(log_output, auto_open_decision, "main's auto-open decision")
        assert "a window attached within the grace" in decision, decision
        main_pid = json.loads(connection.read_text())["pid"]
        assert not [cmd for cmd in descendants(main_pid).values() if "renderer_process" in cmd]
    finally:
        window.proc.send_signal(signal.SIGCONT)
        if asking is not None:
            asking.send_signal(signal.SIGTERM)  # withdraws the question
            asking.communicate(timeout=30)
        if connection.exists():
            main_pid = json.loads(connection.read_text())["pid"]
            for pid, cmdline in descendants(main_pid).items():
                if "renderer_process" in cmdline:  # an auto-opened window (the code before the fix)
                    os.kill(pid, signal.SIGKILL)
            subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                           capture_output=True, timeout=60, env=child_env(home), cwd=ROOT, check=False)
        window.end()
        log.kill()
        log.wait(timeout=10)
        log_output.close()
        first.stop()
        shutil.rmtree(home, ignore_errors=True)


# ---- 3. no display: launch says so in one line and starts nothing -----------------------------------


def venv_is_current() -> bool:
    """Whether .venv is synced with uv.lock, so scripts/launch starts without installing anything."""
    check = ('. scripts/_env.sh; have="$(cat "$VENV/.elicitron-locked" 2>/dev/null)"; '
             '[ "$have" = "$(lock_digest) [test]" ] || [ "$have" = "$(lock_digest) " ]')
    return subprocess.run(["bash", "-c", check], cwd=ROOT, check=False).returncode == 0


def without_display(home: Path) -> dict[str, str]:
    env = child_env(home)
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        env.pop(name, None)
    return env


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["scripts/launch", "elicitron launch"])
def test_without_a_display_launch_says_so_in_one_line_and_starts_nothing(launcher: str) -> None:
    home = short_tmp_dir("eli-nodisplay-")
    connection = home / "run" / "connection.json"
    env = without_display(home)
    argv = [str(ROOT / "scripts" / "launch")] if launcher == "scripts/launch" else [
        sys.executable, "-m", "cli_process", "launch"]
    if launcher == "scripts/launch" and not venv_is_current():
        pytest.skip("scripts/launch would install .venv from uv.lock first (run scripts/test)")
    try:
        done = subprocess.run([*argv, "--connection", str(connection)], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120, env=env, cwd=ROOT, check=False)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, done.stderr
        assert len(lines) == 1 and "no display" in lines[0], done.stderr
        assert " main`" in lines[0] and " pair --output" in lines[0], lines[0]  # the command as typed here
        assert not connection.exists(), "main was started behind a window that cannot open"
    finally:
        if connection.exists():  # the code before this fix left main running
            subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                           capture_output=True, timeout=60, env=env, cwd=ROOT, check=False)
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.slow
def test_without_a_display_launch_no_window_still_starts_main_headless() -> None:
    home = short_tmp_dir("eli-nodisplay-")
    connection = home / "run" / "connection.json"
    env = without_display(home)
    try:
        done = subprocess.run([sys.executable, "-m", "cli_process", "launch", "--no-window", "--connection",
                               str(connection)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120, env=env, cwd=ROOT, check=False)
        assert done.returncode == 0 and "starting main in the background" in done.stderr, done.stderr
        assert connection.exists()
    finally:
        if connection.exists():
            subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                           capture_output=True, timeout=60, env=env, cwd=ROOT, check=False)
        shutil.rmtree(home, ignore_errors=True)


# ---- `elicitron launch` starts main so that the window it becomes is not main's parent -----------


def parent_pid(pid: int) -> int:
    # /proc/<pid>/stat: "pid (comm) state ppid …"; comm may hold spaces, so split after its ')'.
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.mark.slow
def test_launch_leaves_main_no_child_of_its_window_so_a_stopped_main_does_not_linger() -> None:
    home = short_tmp_dir("eli-launch-")
    connection = home / "run" / "connection.json"
    env = child_env(home, QT_QPA_PLATFORM="offscreen")
    tail, main_log = follow(home / "state" / "elicitron" / "log" / "main.log")
    launcher = subprocess.Popen([sys.executable, "-m", "cli_process", "launch", "--connection", str(connection),
                                 "--name", "launched"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    try:
        wait_line(main_log, lambda line: "attached renderer 'launched'" in line, "the launched window attaching",
                  timeout_s=90)
        status = subprocess.run([sys.executable, "-m", "cli_process", "status", "--json", "--connection",
                                 str(connection)], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT,
                                check=True)
        main_pid = json.loads(status.stdout)["pid"]
        # The window is `launcher` itself (launch execs into it); before the fix main was its child,
        # so stopping main while the window stayed open left a zombie nobody reaped.
        assert parent_pid(main_pid) != launcher.pid
        assert main_pid not in descendants(launcher.pid)
        stopped = subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                                 capture_output=True, text=True, timeout=60, env=env, cwd=ROOT, check=False)
        assert stopped.returncode == 0, stopped.stderr
        assert launcher.poll() is None  # the window stays, saying main is not running
        assert main_pid not in descendants(launcher.pid)
    finally:
        end_process(launcher)
        end_process(tail)
        main_log.close()
        if connection.exists():
            subprocess.run([sys.executable, "-m", "cli_process", "stop", "--connection", str(connection)],
                           capture_output=True, timeout=60, env=env, cwd=ROOT, check=False)
        shutil.rmtree(home, ignore_errors=True)
