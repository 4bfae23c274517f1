"""Denials in-process: the one builder of every denied call's result (main_process/consent/denial.py),
the reason a person types cleaned and capped (shared/denial_reason.py), and a card's deny carrying
who answered and their reason through the pending lifecycle into the audit."""

import asyncio
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from kit.paths import ROOT

from main_process.audit import format_entries
from main_process.consent import approvals
from main_process.consent.audit_writer import AuditWriter
from main_process.consent.denial import DENIAL_KEY, SEP_2643_KEY, TOOL_APPROVAL_ID, Denial
from main_process.consent.pending import Elicitation, PendingRequests, RequestOptions
from main_process.store.factory import open_store
from shared.denial_reason import REASON_MAX_CHARS, clean_reason
from shared.errors import ProtocolError
from shared.messages import ApprovalInfo, DeviceRef, ElicitationResult

CALL = ("files", "write_file")


def test_a_persons_deny_names_their_window_and_reason_and_asking_again_may_succeed() -> None:
    result = Denial(*CALL, "person", window="laptop", reason="not that file", context="c-1").result()
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": (
        'The user denied this call in Elicitron (in the window "laptop"): files/write_file was not called. '
        'The user\'s reason: "not that file". Do not repeat it unchanged: continue without it, or tell the user '
        "why it is needed; if you call it again they are asked again and may allow it.")}]
    assert result["_meta"] == {
        SEP_2643_KEY: {"reason": "insufficient_authorization", "remediation": "available",
                       "authorizationContextId": "c-1"},
        DENIAL_KEY: {"deniedBy": "person", "window": "laptop", "reason": "not that file", "retry": "maybe",
                     "server": "files", "tool": "write_file"},
    }
    on_phone = Denial(*CALL, "person", window="web", device="Ada's phone").result()
    assert '(on the device "Ada\'s phone")' in on_phone["content"][0]["text"]
    assert on_phone["_meta"][DENIAL_KEY]["device"] == "Ada's phone"
    assert "reason" not in on_phone["_meta"][DENIAL_KEY] and "reason" not in on_phone["content"][0]["text"]


def test_a_forbid_policy_names_its_id_and_reason_and_says_retrying_will_not_help() -> None:
    result = Denial(*CALL, "policy", id="no-etc", reason="nothing under /etc.", context="c-2").result()
    assert result["content"][0]["text"].startswith(
        "Policy 'no-etc' in the user's Elicitron configuration forbids this call: nothing under /etc. "
        "files/write_file was not called. Do not retry it")
    assert result["_meta"][SEP_2643_KEY]["remediation"] == "unavailable"
    assert result["_meta"][DENIAL_KEY] == {"deniedBy": "policy", "id": "no-etc", "reason": "nothing under /etc.",
                                           "retry": "no", "server": "files", "tool": "write_file"}


@pytest.mark.parametrize(("denial", "said", "retry"), [
    (Denial(*CALL, "rule", id="r-7"), "A rule the user saved in Elicitron (r-7) denies this call", "until-revoked"),
    (Denial(*CALL, "config", id="config-2"), "A rule in the user's Elicitron configuration (config-2) denies",
     "until-config-changed"),
    (Denial(*CALL, "config", id=TOOL_APPROVAL_ID), 'does not allow this tool (toolApproval "deny")',
     "until-config-changed"),
])
def test_a_rule_or_the_config_denies_until_changed(denial: Denial, said: str, retry: str) -> None:
    result = denial.result()
    text = result["content"][0]["text"]
    assert said in text and "files/write_file was not called. Do not retry it" in text
    assert (result["_meta"][DENIAL_KEY]["retry"], result["_meta"][DENIAL_KEY]["id"]) == (retry, denial.id)
    assert result["_meta"][SEP_2643_KEY] == {"reason": "insufficient_authorization", "remediation": "unavailable"}


def test_the_docs_example_is_what_a_host_gets_for_a_forbid() -> None:
    """docs/consent.md's "Denials the agent can act on" shows this result as it is."""
    text = (ROOT / "docs" / "consent.md").read_text(encoding="utf-8").split("## Denials the agent can act on")[1]
    shown = json.loads(re.findall(r"```json\n(.*?)```", text, re.DOTALL)[0])
    context = shown["_meta"][SEP_2643_KEY]["authorizationContextId"]
    assert shown == Denial("files", "read_file", "policy", id="no-etc", reason="nothing under /etc, for any host",
                           context=context).result()


def test_nobody_answering_in_time_may_be_asked_again() -> None:
    result = Denial(*CALL, "nobody", context="c-3").result()
    assert result["content"][0]["text"].startswith("Nobody answered the approval request in Elicitron in time")
    assert (result["_meta"][DENIAL_KEY]["retry"], result["_meta"][SEP_2643_KEY]["remediation"]) == ("yes", "available")


def test_a_typed_reason_is_one_line_of_plain_text_and_capped() -> None:
    assert clean_reason("  no,\n\tnot\x1b[2J now\u202e!  ") == "no, not [2J now !"
    assert clean_reason(" \n\u200b ") is None and clean_reason(None) is None
    long = clean_reason("x" * (REASON_MAX_CHARS + 50))
    assert long is not None and len(long) == REASON_MAX_CHARS


# ---- a card's deny, through the pending lifecycle ----------------------------------------------

WINDOW = b"\x00w"


class _Outbox:
    def renderers(self) -> list[bytes]:
        return [WINDOW]

    def send(self, routing_ids: Iterable[bytes], frames: list[bytes]) -> list[bytes]:
        return [rid for rid in routing_ids if rid == WINDOW]


def _approval(pending: PendingRequests, answers: list[ElicitationResult]) -> str:
    info = ApprovalInfo(server="files", tool="write_file", arguments={"path": "/etc/hosts"})
    opened = pending.open(Elicitation.read("files", approvals.approval_params("Claude", info)),
                          RequestOptions(timeout_s=60, kind="approval", via="Claude", approval=info), answers.append)
    return opened.channel


def _result(body: dict[str, Any]) -> bytes:
    return msgspec.msgpack.encode(body)


def test_a_deny_with_a_reason_reaches_the_asker_and_the_audit_with_who_answered(tmp_path: Path) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        store = open_store(None, audit_path=tmp_path / "audit.sqlite3")
        pending = PendingRequests(_Outbox(), loop, audit=AuditWriter(store.audit, loop),
                                  window_name=lambda _window: "phone page",
                                  window_device=lambda _window: DeviceRef(id="d-1", name="Ada's phone"))
        answers: list[ElicitationResult] = []
        channel = _approval(pending, answers)
        with pytest.raises(ProtocolError):  # longer than the card's field takes: refused, still open
            pending.answer(WINDOW, "w", channel, _result({"action": "accept", "content": {"decision": "deny"},
                                                          "reason": "x" * (REASON_MAX_CHARS + 1)}))
        assert pending.get(channel) is not None
        asked = pending.get(channel)
        pending.answer(WINDOW, "w", channel, _result({"action": "accept", "content": {"decision": "deny"},
                                                      "reason": "wrong\nfile"}))
        assert answers[0].reason == "wrong file"
        assert asked is not None and asked.answered_by is not None
        assert (asked.answered_by.name, asked.answered_by.device) == ("phone page", DeviceRef(id="d-1", name="Ada's phone"))
        entry = (await store.audit.entries())[0]
        assert (entry.decision, entry.reason, entry.device) == ("deny", "wrong file", "Ada's phone")
        assert "device Ada's phone" in format_entries([entry])

        allowed: list[ElicitationResult] = []  # a reason beside an allow is nobody's business
        channel = _approval(pending, allowed)
        pending.answer(WINDOW, "w", channel, _result({"action": "accept", "content": {"decision": "allow-once"},
                                                      "reason": "fine"}))
        assert allowed[0].reason is None
        v1: list[ElicitationResult] = []  # a v1 window sends no reason: a deny as before
        channel = _approval(pending, v1)
        pending.answer(WINDOW, "w", channel, _result({"action": "decline"}))
        assert (v1[0].action, v1[0].reason) == ("decline", None)
        await store.close()

    asyncio.run(body())
