"""Nothing a server, host, asker or window wrote acts on the terminal the CLI prints to (issue 24,
finding 8): `status`, `call`, `audit`, `rules` and `ask` show such text escaped, and `--json`
stays valid JSON with the exact values. The unit: shared/terminal_text.py; across processes: a
real main with a server whose tool name and result carry OSC 52 and screen clears, a server whose
crash says the same on stderr, and peers named that way."""

import json
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from escapes_server import CLEAR, CLIPBOARD, TEXT, TOOL
from kit.demo import demo_stdio_entry
from kit.env import child_env
from kit.main import RunningMain
from kit.paths import PYTHON, ROOT
from kit.zygote import launched

from shared.terminal_text import for_terminal, json_for_terminal, table_cell

ESCAPES_SERVER = ROOT / "tests" / "escapes_server.py"
OSC = "\x1b]52;c;T3duZWQ=\x07"  # would put "Owned" on the clipboard


def acting(text: str) -> list[str]:
    """The characters of `text` a terminal would act on (C0 but newline, DEL, C1) or that reorder it."""
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"]


# ---- the unit ----------------------------------------------------------------------------------


def test_control_and_format_characters_are_shown_as_escapes() -> None:
    assert for_terminal(f"a{OSC}b\r\u202e\u009b2J") == "a\\x1b]52;c;T3duZWQ=\\x07b\\x0d\\u202e\\x9b2J"
    assert for_terminal("two\n\tlines\x1b[2J", lines=True) == "two\n\tlines\\x1b[2J"
    assert for_terminal("two\nlines") == "two\\x0alines"
    assert for_terminal("plain, é, 日本, emoji 🎉") == "plain, é, 日本, emoji 🎉"
    assert for_terminal("tag\U000e0041") == "tag\\U000e0041"


def test_a_table_cell_is_one_safe_line_of_bounded_width() -> None:
    assert table_cell(f"pay{CLEAR} now\nthen", 60) == "pay\\x1b[2J\\x9b2J now then"
    assert table_cell("x" * 100, 10) == "x" * 9 + "…"


def test_json_keeps_its_value_and_escapes_what_it_leaves_raw() -> None:
    value = {"text": f"{OSC}{CLEAR}\u202e\U000e0041 é", "n": 1}
    for encoded in (json.dumps(value, ensure_ascii=False), json.dumps(value)):
        safe = json_for_terminal(encoded)
        assert json.loads(safe) == value and acting(safe) == [] and "\U000e0041" not in safe
    assert json_for_terminal('{"a": "é 日本"}') == '{"a": "é 日本"}'


# ---- across real processes -----------------------------------------------------------------------


def cli_beside(main: RunningMain, *args: str, timeout_s: float = 60) -> "subprocess.CompletedProcess[str]":
    """`elicitron ARGS --connection FILE` while this main's test peers keep heartbeating (they
    heartbeat only when the test reads them, and a command may take longer than main waits)."""
    argv = [PYTHON, "-m", "cli_process", *args]
    if args[0] != "audit":
        argv += ["--connection", str(main.connection)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(main.home), cwd=ROOT)
    deadline = time.monotonic() + timeout_s
    while True:
        for peer in main.peers:
            peer.heartbeat_if_due()
        try:
            out, err = proc.communicate(timeout=0.2)
            return subprocess.CompletedProcess(argv, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                proc.kill()
                proc.communicate()
                raise


@pytest.fixture
def escapes_main(main_factory: Callable[..., RunningMain]) -> RunningMain:
    crash = f"import sys; sys.stderr.write('boom {CLIPBOARD}{CLEAR}\\n'); sys.exit(3)"
    main = main_factory({
        "escapes": launched(ESCAPES_SERVER),
        "crasher": {"command": sys.executable, "args": ["-c", crash]},
        "demo": demo_stdio_entry(),
    })
    main.wait_server_ready("escapes")
    main.wait_server_ready("demo")
    with main.watch() as watcher:
        watcher.wait(lambda: bool((watcher.server("crasher") or {}).get("error")), "crasher's error", 60)
    return main


def test_status_call_audit_and_rules_print_peer_and_server_text_escaped(escapes_main: RunningMain) -> None:
    main = escapes_main
    window = main.peer(name=f"window{OSC}", role="renderer")
    main.peer(name=f"host{CLEAR}", role="host")
    asker = main.peer(name="controller", role="controller")
    asker.call_tool("demo", "ask", {"message": f"Deploy?{CLEAR}{OSC}"})  # pending: its message is shown
    window.expect(lambda t, b: t == "msgElicitationTransferInvoke", 30)

    status = cli_beside(main, "status")
    assert status.returncode == 0, status.stderr
    assert acting(status.stdout + status.stderr) == [], status.stdout
    assert "wipe\\x1b[2J\\x9b2J" in status.stdout  # shown, not hidden
    assert "window\\x1b]52;c;T3duZWQ=\\x07" in status.stdout and "host\\x1b[2J" in status.stdout
    assert "boom \\x1b]52;c;SGFja2Vk\\x07" in status.stdout  # the crashed server's stderr
    assert "Deploy?\\x1b[2J" in status.stdout

    as_json = cli_beside(main, "status", "--json")
    assert acting(as_json.stdout) == []
    report = json.loads(as_json.stdout)
    assert TOOL in next(s for s in report["servers"] if s["name"] == "escapes")["tools"]  # the exact name
    assert f"window{OSC}" in [p["name"] for p in report["peers"]]

    called = cli_beside(main, "call", "escapes", "paste")
    assert called.returncode == 0, called.stderr
    assert acting(called.stdout) == []
    assert called.stdout.splitlines() == [for_terminal(TEXT.split("\n")[0]), "second line"]
    exact = cli_beside(main, "call", "escapes", TOOL, "--json")
    assert acting(exact.stdout) == [] and json.loads(exact.stdout)["content"][0]["text"] == TEXT

    for args in (["audit"], ["audit", "--json"]):
        audit = cli_beside(main, *args)
        assert audit.returncode == 0, audit.stderr
        assert acting(audit.stdout) == [] and "Deploy?" in audit.stdout
    rules = cli_beside(main, "rules")
    assert rules.returncode == 0 and acting(rules.stdout + rules.stderr) == []


@pytest.mark.parametrize("typed", ["plain é", f"pasted{OSC}{CLEAR}\u202e"], ids=["plain", "escapes"])
def test_ask_prints_an_answer_with_escapes_as_json_of_the_same_value(demo_main: RunningMain, typed: str) -> None:
    schema = json.dumps({"type": "object", "properties": {"note": {"type": "string"}}})
    argv = [PYTHON, "-m", "cli_process", "ask", "Note?", "--schema", schema, "--connection",
            str(demo_main.connection), "--timeout", "60"]
    window = demo_main.peer(name="answering-window")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(demo_main.home), cwd=ROOT)
    try:
        _, invoke = window.expect(lambda t, b: t == "msgElicitationTransferInvoke", 30)
        window.answer(invoke, "accept", {"note": typed})
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert acting(out) == [] and json.loads(out) == {"note": typed}
