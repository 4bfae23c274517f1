"""The audit log as a user reads it (`elicitron audit`), written by a real main."""

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit.demo import demo_stdio_entry
from kit.main import RunningMain, write_config


def audit_rows(main: RunningMain) -> list[dict[str, Any]]:
    result = main.cli_plain("audit", "--json", "--limit", "1000")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_outcome_is_logged_with_its_window(main_factory: Callable[..., RunningMain]) -> None:
    main = main_factory({"demo": demo_stdio_entry(elicitationTimeoutSeconds=1)})
    main.wait_server_ready("demo")
    window = main.peer(name="auditor")
    before = {row["channel"] for row in audit_rows(main)}

    call = window.call_tool("demo", "book_table", {"restaurant": "Audited"})
    accepted = window.expect_topic("msgElicitationTransferInvoke")
    window.answer(accepted, "accept", {"name": "Secret Name", "party_size": 2})
    window.expect_topic(call)
    call = window.call_tool("demo", "book_table", {})
    expired = window.expect_topic("msgElicitationTransferInvoke")
    window.expect_topic(call)  # nobody answers: expires after 1 s

    rows = {row["channel"]: row for row in audit_rows(main) if row["channel"] not in before}
    assert set(rows) == {accepted["responseChannel"], expired["responseChannel"]}
    row = rows[accepted["responseChannel"]]
    assert (row["server"], row["mode"], row["outcome"], row["window"]) == ("demo", "form", "accept", window.window)
    assert row["message"] == "Book a table at Audited?"
    assert row["fields"] == ["name", "party_size", "outdoor", "budget", "cuisine"]
    assert row["content"] is None, "values are recorded only when the config opts in"
    assert rows[expired["responseChannel"]]["outcome"] == "expired"
    table = main.cli_plain("audit").stdout
    assert "accept" in table and "expired" in table and "Secret Name" not in table


def test_values_are_recorded_when_the_config_opts_in(main_factory: Callable[..., RunningMain],
                                                     tmp_path: Path) -> None:
    config = write_config(tmp_path / "opt-in.json", {"demo": demo_stdio_entry()})
    data = json.loads(config.read_text())
    data["elicitron"] = {"auditValues": True}
    config.write_text(json.dumps(data))
    main = main_factory.with_config(config)  # type: ignore[attr-defined]
    window = main.peer()
    call = window.call_tool("demo", "book_table", {})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    window.answer(invoke, "accept", {"name": "Kept", "party_size": 5})
    window.expect_topic(call)
    row = next(r for r in audit_rows(main) if r["channel"] == invoke["responseChannel"])
    assert row["content"] == {"name": "Kept", "party_size": 5}


def test_sigkill_right_after_an_answer_loses_no_decided_outcome(demo_main: RunningMain) -> None:
    window = demo_main.peer()
    call = window.call_tool("demo", "book_table", {})
    invoke = window.expect_topic("msgElicitationTransferInvoke")
    window.answer(invoke, "decline")
    window.expect_topic(call)  # the server has its answer: main wrote the outcome before sending it
    demo_main.proc.send_signal(signal.SIGKILL)
    demo_main.proc.wait(timeout=10)
    row = next(r for r in audit_rows(demo_main) if r["channel"] == invoke["responseChannel"])
    assert row["outcome"] == "decline" and row["window"] == window.window
