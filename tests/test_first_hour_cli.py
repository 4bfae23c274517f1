"""Issue 37's first hour, in the CLI: `config import` adds a Claude Desktop, Cursor or VS Code
config's servers (shown first, written with --yes, the demo kept or its leaving explained), `reload`
names every change it applied (a toolApproval change is a change), and `stop` stops the web window
main started and names one it did not."""

import json
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.demo import demo_stdio_entry
from kit.env import child_env, short_tmp_dir
from kit.main import RunningMain, start_main, write_config
from kit.paths import PYTHON, ROOT
from web_kit import DEFAULT_WEB_DIR, web_window

from shared.connection_file import pid_alive
from shared.web_devices import read_announcement


def elicitron(home: Path, *args: str, cwd: Path | None = None) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([PYTHON, "-m", "cli_process", *args], capture_output=True, text=True, timeout=60,
                          env=child_env(home, HOME=str(home)), cwd=cwd or ROOT, check=False, stdin=subprocess.DEVNULL)


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_tmp_dir("eli-1h-cli-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def claude_desktop_config(home: Path, servers: dict[str, object]) -> Path:
    """A Claude Desktop config in its usual place on Linux (under $XDG_CONFIG_HOME)."""
    path = home / "config" / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def elicitron_config(home: Path) -> Path:
    return home / "config" / "elicitron" / "mcp.json"


@pytest.mark.slow
def test_config_import_finds_claude_desktops_config_shows_it_and_writes_it_only_with_yes(home: Path) -> None:
    claude_desktop_config(home, {
        "second": demo_stdio_entry(env={"API_KEY": "sk-do-not-print"}),
        "elicitron": {"command": "/usr/local/bin/elicitron", "args": ["serve"]},
    })
    shown = elicitron(home, "config", "import")
    assert shown.returncode == 0, shown.stderr
    assert "from Claude Desktop (" in shown.stdout
    assert "+ second" in shown.stdout and "(env: API_KEY)" in shown.stdout
    assert "sk-do-not-print" not in shown.stdout  # env values may be secrets
    assert "- elicitron" in shown.stdout and "Elicitron itself" in shown.stdout
    assert "demo: kept" in shown.stdout and "nothing written" in shown.stdout and "--yes" in shown.stdout
    assert not elicitron_config(home).exists()

    written = elicitron(home, "config", "import", "--yes")
    assert written.returncode == 0, written.stderr
    assert f"wrote {elicitron_config(home)}: added second" in written.stdout
    config = json.loads(elicitron_config(home).read_text())
    assert sorted(config["mcpServers"]) == ["demo", "second"]  # the demo stays; Elicitron itself is not added
    assert config["mcpServers"]["second"]["env"] == {"API_KEY": "sk-do-not-print"}
    assert stat.S_IMODE(elicitron_config(home).stat().st_mode) == 0o600

    again = elicitron(home, "config", "import", "--yes")  # nothing new: nothing changes
    assert again.returncode == 0 and "= second" in again.stdout and "nothing to add" in again.stdout


@pytest.mark.slow
def test_config_import_reads_a_vs_code_mcp_json_named_on_the_command_line(home: Path) -> None:
    vscode = home / "project" / ".vscode" / "mcp.json"
    vscode.parent.mkdir(parents=True)
    vscode.write_text(json.dumps({
        "inputs": [{"id": "token", "type": "promptString"}],
        "servers": {
            "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"X-Team": "a"}},
            "local": {"type": "stdio", "command": PYTHON, "args": ["server.py"]},
            "asks": {"type": "http", "url": "https://x.example.com/mcp",
                     "headers": {"Authorization": "Bearer ${input:token}"}},
        }}))
    done = elicitron(home, "config", "import", str(vscode), "--yes", "--no-demo")
    assert done.returncode == 0, done.stderr
    assert "from VS Code (" in done.stdout
    assert "- asks" in done.stdout and "${input:" in done.stdout
    assert "left out (--no-demo)" in done.stdout and "no config file" in done.stdout  # why the demo goes
    servers = json.loads(elicitron_config(home).read_text())["mcpServers"]
    assert servers == {"remote": {"url": "https://mcp.example.com/mcp", "headers": {"X-Team": "a"}},
                       "local": {"command": PYTHON, "args": ["server.py"]}}


@pytest.mark.slow
def test_config_import_with_no_host_config_says_where_it_looked(home: Path) -> None:
    done = elicitron(home, "config", "import", cwd=home)
    assert done.returncode == 1
    assert "no MCP host config found" in done.stderr and "claude_desktop_config.json" in done.stderr
    assert "config import PATH" in done.stderr


@pytest.fixture
def default_main(home: Path) -> Iterator[RunningMain]:
    """main with no --config: the file in the user config dir, else the embedded demo."""
    running = start_main(None, home, home=home, env=child_env(home, HOME=str(home)))
    try:
        running.wait_server_ready("demo")
        yield running
    finally:
        running.stop()


@pytest.mark.slow
def test_reload_after_import_names_what_it_added_and_a_tool_approval_change_as_changed(
        home: Path, default_main: RunningMain) -> None:
    claude_desktop_config(home, {"second": demo_stdio_entry()})
    assert elicitron(home, "config", "import", "--yes").returncode == 0
    done = default_main.cli("reload")
    assert done.returncode == 0, done.stderr
    assert "added      second" in done.stdout and "unchanged  demo" in done.stdout, done.stdout
    assert "removed    -" in done.stdout  # the demo was kept in the file

    config = elicitron_config(home)
    document = json.loads(config.read_text())
    document["mcpServers"]["second"]["toolApproval"] = "ask"
    config.write_text(json.dumps(document))
    changed = default_main.cli("reload")
    assert changed.returncode == 0, changed.stderr
    assert "changed    second (toolApproval, applied without a restart)" in changed.stdout, changed.stdout
    assert "unchanged  demo" in changed.stdout


@pytest.mark.slow
def test_reload_says_why_the_demo_left_when_a_written_config_drops_it(
        home: Path, default_main: RunningMain) -> None:
    claude_desktop_config(home, {"second": demo_stdio_entry()})
    assert elicitron(home, "config", "import", "--yes", "--no-demo").returncode == 0
    done = default_main.cli("reload")
    assert done.returncode == 0, done.stderr
    assert "removed    demo" in done.stdout
    assert "note: demo: the embedded demo server runs only while there is no config file" in done.stdout, done.stdout


def stop(main: RunningMain) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([PYTHON, "-m", "cli_process", "stop", "--connection", str(main.connection)],
                          capture_output=True, text=True, timeout=60, env=child_env(main.home), cwd=ROOT, check=False)


@pytest.mark.slow
def test_stop_stops_the_web_window_main_started(home: Path) -> None:
    main = start_main(write_config(home / "mcp.json", {}), home, "--web", "127.0.0.1:0", home=home)
    try:
        status = main.wait_status(lambda s: (s.get("webWindow") or {}).get("state") == "listening",
                                  "the web window listening")
        url = status["webWindow"]["url"]
        announced = read_announcement(home / DEFAULT_WEB_DIR)
        assert announced is not None and announced[0] == url
        done = stop(main)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [f"stopped main (pid {main.pid})",
                                            f"stopped main's web window ({url}, pid {announced[1]})"]
        assert not pid_alive(announced[1])
    finally:
        main.stop()


@pytest.mark.slow
def test_stop_names_a_web_window_it_did_not_start_and_how_to_stop_it(home: Path) -> None:
    main = start_main(write_config(home / "mcp.json", {}), home, home=home)
    try:
        with web_window(main, home / DEFAULT_WEB_DIR) as web:
            done = stop(main)
            assert done.returncode == 0, done.stderr
            lines = done.stdout.splitlines()
            assert lines[0] == f"stopped main (pid {main.pid})"
            assert lines[1:] == [(f"the web window at {web.url} (pid {web.proc.pid}) keeps running: it was started "
                                 f"with `{elicitron_command_in(home)} web`, not by main; stop it with Ctrl-C "
                                 f"where it runs, or: kill {web.proc.pid}")], done.stdout
            assert web.proc.poll() is None  # left alone: not main's to stop
    finally:
        main.stop()


def elicitron_command_in(home: Path) -> str:
    """How the CLI names itself in the test's environment (shared/command_name.py, run there)."""
    done = subprocess.run([PYTHON, "-c", "from shared.command_name import elicitron_command as c; print(c())"],
                          capture_output=True, text=True, timeout=30, env=child_env(home), cwd=ROOT, check=True)
    return done.stdout.strip()


def test_the_two_commands_section_describes_scripts_screenshots_once() -> None:
    """The "Two commands" section (the README's short one, and the whole one on the site's
    Development page, docs/development.md) says what `scripts/screenshots` does once, not twice."""
    counts = []
    for page in (ROOT / "README.md", ROOT / "docs" / "development.md"):
        text = page.read_text(encoding="utf-8")
        start = text.index("## Two commands")
        section = text[start:text.index("\n## ", start + 1)]
        counts.append(section.count("`scripts/screenshots`"))
    assert counts == [0, 1]
