"""`elicitron audit` goes through the running main (issue 37, friction 7): a shell whose HOME (data
dir, config) is not main's still sees main's rows when its connection file names that main, and
with no main it reads this machine's store without ever creating an empty one. Real main, real
demo server, the CLI as a user runs it."""

import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from consent_kit import ConsentMains, demo, invoke_of, started_mains
from kit.env import child_env
from kit.main import RunningMain
from kit.paths import PYTHON, ROOT

pytestmark = pytest.mark.slow  # every test here runs the CLI, most a main too


@pytest.fixture
def consent_mains(tmp_path: Path) -> Iterator[ConsentMains]:
    yield from started_mains(tmp_path)


def elicitron(home: Path, *args: str, **env: str) -> "subprocess.CompletedProcess[str]":
    """`elicitron ARGS` in a shell whose config, data and runtime dirs are under `home`, with `env`
    on top (child_env drops ELICITRON_CONNECTION: the shell's own is given here)."""
    return subprocess.run([PYTHON, "-m", "cli_process", *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, env=child_env(home) | env, cwd=ROOT, timeout=60, check=False)


def decline_a_booking(main: RunningMain) -> None:
    """One audited row: demo's book_table at Noma, declined by a window named kitchen."""
    window = main.peer(name="kitchen")
    caller = main.peer(name="cli", role="controller")
    call = caller.call_tool("demo", "book_table", {"restaurant": "Noma"})
    window.answer(invoke_of(window), "decline")
    assert "result" in caller.expect_topic(call)
    window.close()
    caller.close()


def audit_file(home: Path) -> Path:
    return home / "data" / "elicitron" / "audit.sqlite3"


def test_audit_from_another_home_shows_the_running_mains_rows_and_json_is_the_same_as_from_its_file(
        consent_mains: ConsentMains, tmp_path: Path) -> None:
    main = consent_mains({"demo": demo()})
    decline_a_booking(main)

    elsewhere = Path(tempfile.mkdtemp(prefix="other-home-", dir=tmp_path))
    table = elicitron(elsewhere, "audit", ELICITRON_CONNECTION=str(main.connection))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["CREATED", "SERVER", "MODE", "OUTCOME", "BY", "ASKED", "MESSAGE"]
    assert len(lines) == 2 and "demo" in lines[1] and "decline" in lines[1] and "kitchen" in lines[1], lines
    assert "Book a table at Noma?" in lines[1]

    through_main = elicitron(elsewhere, "audit", "--json", "--connection", str(main.connection))
    assert through_main.returncode == 0, through_main.stderr
    rows = json.loads(through_main.stdout)
    assert [(r["server"], r["outcome"], r["windowName"]) for r in rows] == [("demo", "decline", "kitchen")]
    assert not audit_file(elsewhere).exists(), "the other shell's HOME got no store of its own"

    main.stop()  # no main now: the same HOME reads main's file itself, and prints the very same JSON
    assert main.home is not None
    from_file = elicitron(main.home, "audit", "--json")
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == through_main.stdout


def test_with_no_main_and_no_store_audit_says_so_and_creates_nothing(tmp_path: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="empty-home-", dir=tmp_path))
    shown = elicitron(home, "audit")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"no audit log yet at {audit_file(home)}"
    as_json = elicitron(home, "audit", "--json")
    assert (as_json.returncode, json.loads(as_json.stdout)) == (0, [])
    assert f"no audit log yet at {audit_file(home)}" in as_json.stderr
    assert not audit_file(home).exists() and not audit_file(home).parent.exists()


def test_a_limit_main_would_refuse_is_a_usage_error_here(tmp_path: Path) -> None:
    shown = elicitron(Path(tempfile.mkdtemp(prefix="home-", dir=tmp_path)), "audit", "--limit", "0")
    assert shown.returncode == 2
    assert "--limit takes 1 to 10000" in shown.stderr
