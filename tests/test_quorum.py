"""Quorum approvals counted in the pending lifecycle (no sockets): one approval keeps the request
open and every window gets the count; the same person counts once; someone not listed is refused;
a deny ends it; the last approval needed completes it, and the audit names every approver."""

import asyncio
from pathlib import Path

import msgspec
import pytest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot
from test_consent_widgets import approval
from test_pending import WINDOW_A, WINDOW_B, Outbox, request, result
from test_window_core import invoke, shows

from main_process.consent.audit_writer import AuditWriter
from main_process.consent.consent_config import parse_rules
from main_process.consent.pending import PendingRequests, RequestOptions
from main_process.consent.quorum import approver_of
from main_process.store.factory import open_store
from main_process.store.interface import Store
from renderer_process.approval_card import ApprovalCard
from shared import channels
from shared.errors import ConfigError, ProtocolError, WireCode
from shared.messages import ApprovalInfo, ElicitationResult, QuorumInfo
from shared.rule_text import describe
from shared.window_core import Show, WindowCore, quorum_text
from web_process.cards import card_of

APPROVAL = {"mode": "form", "message": "host wants to call prod/drop_table",
            "requestedSchema": {"type": "object", "required": ["decision"], "properties": {"decision": {
                "type": "string", "enum": ["allow-once", "allow-session", "allow-always", "deny"]}}}}
NAMES = {"window-a": "ana", "window-b": "ben", "window-c": "dan"}
QUORUM = QuorumInfo(needed=2, approvers=["ana", "ben", "chen"], approved=[])
OPTIONS = RequestOptions(timeout_s=60, kind="approval", quorum=QUORUM,
                         approval=ApprovalInfo(server="prod", tool="drop_table", arguments={}))
WINDOW_C = b"\x00c"


def _allow() -> bytes:
    return result("accept", {"decision": "allow-once"})


def _lifecycle(tmp_path: Path) -> tuple[PendingRequests, Outbox, Store]:
    loop = asyncio.get_running_loop()
    store = open_store(None, audit_path=tmp_path / "audit.sqlite3", record_values=True)
    outbox = Outbox()
    outbox.attached.append(WINDOW_C)
    pending = PendingRequests(outbox, loop, audit=AuditWriter(store.audit, loop), window_name=NAMES.get)
    return pending, outbox, store


def test_one_approval_shows_the_count_everywhere_and_the_second_completes(tmp_path: Path) -> None:
    async def body() -> None:
        pending, outbox, store = _lifecycle(tmp_path)
        answers: list[ElicitationResult] = []
        opened = pending.open(request(APPROVAL), OPTIONS, answers.append)
        pending.answer(WINDOW_A, "window-a", opened.channel, _allow())
        pending.answer(WINDOW_A, "window-a", opened.channel, _allow())  # ana again: counts once
        assert answers == [] and pending.get(opened.channel) is opened
        recounts = outbox.topics(channels.INVOKE)[3:]
        assert {rid for rid, _ in recounts} == {WINDOW_A, WINDOW_B, WINDOW_C}
        assert all(b["quorum"] == {"needed": 2, "approvers": ["ana", "ben", "chen"], "approved": ["ana"]}
                   for _, b in recounts)
        assert quorum_text(opened.invoke.quorum) == "1 of 2 approvals (ana)"  # type: ignore[arg-type]
        pending.answer(WINDOW_B, "window-b", opened.channel, result("accept", {"decision": "allow-always"}))
        assert answers == [ElicitationResult(action="accept", content={"decision": "allow-once"})]  # never remembered
        assert len(outbox.topics(channels.DISMISS)) == 3
        entry = (await store.audit.entries())[0]
        assert (entry.outcome, entry.decision, entry.window_name) == ("accept", "allow-once", "ana, ben")

    asyncio.run(body())


def test_someone_not_listed_is_refused_and_the_request_stays_open(tmp_path: Path) -> None:
    async def body() -> None:
        pending, outbox, _ = _lifecycle(tmp_path)
        opened = pending.open(request(APPROVAL), OPTIONS, lambda _answer: None)
        with pytest.raises(ProtocolError) as refused:
            pending.answer(WINDOW_C, "window-c", opened.channel, _allow())
        assert refused.value.code == WireCode.NOT_APPROVER
        assert "dan is not an approver of this call (approvers: ana, ben, chen)" in str(refused.value)
        assert pending.get(opened.channel) is opened and len(outbox.topics(channels.INVOKE)) == 3

    asyncio.run(body())


def test_a_deny_by_any_approver_ends_it_and_names_the_denier(tmp_path: Path) -> None:
    async def body() -> None:
        pending, _outbox, store = _lifecycle(tmp_path)
        answers: list[ElicitationResult] = []
        opened = pending.open(request(APPROVAL), OPTIONS, answers.append)
        pending.answer(WINDOW_A, "window-a", opened.channel, _allow())
        pending.answer(WINDOW_B, "window-b", opened.channel, result("accept", {"decision": "deny"}))
        assert answers == [ElicitationResult(action="accept", content={"decision": "deny"})]
        assert opened.answered_by is not None and opened.answered_by.name == "ben"
        entry = (await store.audit.entries())[0]
        assert (entry.decision, entry.window_name) == ("deny", "ana, ben")

    asyncio.run(body())


def test_an_approver_is_matched_by_any_name_their_window_gives() -> None:
    assert approver_of(QUORUM, [None, "laptop", "chen"]) == "chen"
    assert approver_of(QUORUM, ["phone", None, None]) is None


def test_a_quorum_rule_is_parsed_strictly() -> None:
    (rule,) = parse_rules([{"server": "prod", "tool": "drop_*", "quorum": 2, "approvers": ["ana", "ben", "chen"]}],
                          "c.json")
    assert (rule.tool, rule.decision, rule.quorum, rule.approvers) == ("drop_*", None, 2, ("ana", "ben", "chen"))
    assert describe(rule.info()) == "tool drop_* → ask 2 of ana, ben, chen"  # `elicitron rules`, the windows
    for bad in ({"quorum": 3, "approvers": ["ana", "ana"]}, {"quorum": 0, "approvers": ["ana"]},
                {"quorum": 1, "approvers": []}, {"quorum": 1, "approvers": ["ana"], "decision": "allow"}):
        with pytest.raises(ConfigError):
            parse_rules([{"server": "prod", "tool": "drop_*", **bad}], "c.json")


def test_a_window_shows_the_new_count_and_the_approver_gets_the_card_back() -> None:
    first = invoke("q1", 1)
    counted = msgspec.structs.replace(first, quorum=QuorumInfo(needed=2, approvers=["ana", "ben"], approved=["ana"]))
    shown_here, approved_here = WindowCore("w1"), WindowCore("w2")
    for core in (shown_here, approved_here):
        core.peers([])
        assert shows(core.invoked(first)) == ["q1"]
    approved_here.answer("q1", "accept", {"decision": "allow-once"})
    assert [e.invoke.quorum for e in shown_here.invoked(counted) if isinstance(e, Show)] == [counted.quorum]
    assert shows(approved_here.invoked(counted)) == ["q1"]  # asked again, with the count
    assert card_of(counted)["quorum"] == "1 of 2 approvals (ana)"


def test_the_qt_approval_card_shows_the_count_and_updates_it(qtbot: QtBot) -> None:
    needs_two = msgspec.structs.replace(approval({}), quorum=QuorumInfo(needed=2, approvers=["ana", "ben"],
                                                                        approved=[]))
    card = ApprovalCard(needs_two)
    qtbot.addWidget(card)
    card.open()
    label = card.findChild(QLabel, "quorum")
    assert label is not None and label.text() == "0 of 2 approvals" and label.isVisible()
    card.recount(msgspec.structs.replace(needs_two, quorum=QuorumInfo(needed=2, approvers=["ana", "ben"],
                                                                      approved=["ana"])))
    assert label.text() == "1 of 2 approvals (ana)"
    plain = ApprovalCard(approval({}))
    qtbot.addWidget(plain)
    plain.open()
    assert plain.findChild(QLabel, "quorum").isHidden()  # type: ignore[union-attr]
