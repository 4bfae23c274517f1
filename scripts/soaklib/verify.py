"""What must hold after a soak run, from what the peers saw and from the audit log."""

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from soaklib.driver import Call, Elicitation, Soak

BOOKING_FIELDS = ["name", "party_size", "outdoor", "budget", "cuisine"]


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    audit_problems: list[str] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)  # accept / decline / cancel / expired
    plans: Counter[str] = field(default_factory=Counter)  # plans as carried out
    refusals: Counter[str] = field(default_factory=Counter)  # error codes answered to attempts
    audit_rows: int = 0
    audit_outcomes: Counter[str] = field(default_factory=Counter)


def _expected(elicitation: Elicitation) -> tuple[str, dict[str, Any] | None, str, str | None]:
    """(tool result action, content, audit outcome, answering window) the peers' view implies."""
    accepted = [a for a in elicitation.attempts if a.outcome == "accepted"]
    if accepted:
        answer = accepted[0]
        content = answer.content if answer.action == "accept" else None
        return answer.action, content, answer.action, answer.window
    return "cancel", None, "expired", None


def _tool_answer(call: Call) -> Any:
    reply = call.replies[0]
    if "result" not in reply:
        return None
    result = reply["result"]
    if result.get("isError"):
        return None
    try:
        return json.loads(result["content"][0]["text"])
    except (KeyError, IndexError, TypeError, json.JSONDecodeError):
        return None


def verify(soak: Soak, audit: list[dict[str, Any]] | None) -> Verdict:
    verdict = Verdict()
    problem = verdict.problems.append
    for text in soak.problems:
        problem(text)
    for notice in soak.notices:
        problem(f"main sent a notice: {notice}")

    for call in soak.calls:
        if len(call.replies) != 1:
            problem(f"call {call.id} ({call.server}) got {len(call.replies)} replies")
            continue
        if call.elicitation is None:
            problem(f"call {call.id}: no window ever saw its elicitation (lost); "
                    f"reply {str(call.replies[0])[:200]}")
            continue
        elicitation = soak.elicitations[call.elicitation]
        verdict.plans[elicitation.executed_as or f"{elicitation.plan} (never carried out)"] += 1
        accepted = [a for a in elicitation.attempts if a.outcome == "accepted"]
        if len(accepted) > 1:
            problem(f"{elicitation.channel} accepted {len(accepted)} answers: {accepted}")
        for attempt in elicitation.attempts:
            if attempt.outcome != "accepted":
                verdict.refusals[str(attempt.outcome)] += 1
            if attempt.invalid and attempt.outcome != "invalid-content":
                problem(f"{elicitation.channel}: content the schema refuses got {attempt.outcome}: {attempt}")
            elif not attempt.invalid and attempt.outcome not in ("accepted", "already-answered"):
                problem(f"{elicitation.channel}: a valid answer got {attempt.outcome}: {attempt}")
            elif attempt.outcome == "already-answered" and not attempt.race:
                problem(f"{elicitation.channel}: the only answer got already-answered: {attempt}")
        if elicitation.executed_as == "race":
            verdicts = sorted(str(a.outcome) for a in elicitation.attempts)
            if verdicts != ["accepted", "already-answered"]:
                problem(f"{elicitation.channel}: race of two answers ended {verdicts}")
        action, content, outcome, by = _expected(elicitation)
        if outcome == "expired" and elicitation.executed_as != "none":
            problem(f"{elicitation.channel}: planned {elicitation.executed_as}, but no answer was accepted")
        verdict.outcomes[outcome] += 1
        got = _tool_answer(call)
        if got != {"action": action, "content": content}:
            problem(f"call {call.id}: the server got {got}, the accepted answer was {action} {content}")
        for window, dismiss in elicitation.dismissals.items():
            want = {"responseChannel": elicitation.channel, "reason": "answered", "by": by} if by else \
                {"responseChannel": elicitation.channel, "reason": "expired"}
            if dismiss != want:
                problem(f"{elicitation.channel}: window {window} got dismiss {dismiss}, expected {want}")

    if audit is not None:
        _verify_audit(soak, audit, verdict)
    return verdict


def _verify_audit(soak: Soak, rows: list[dict[str, Any]], verdict: Verdict) -> None:
    problem = verdict.audit_problems.append
    verdict.audit_rows = len(rows)
    by_channel: dict[str, dict[str, Any]] = {}
    for row in rows:
        verdict.audit_outcomes[row.get("outcome") or "pending"] += 1
        if row["channel"] in by_channel:
            problem(f"audit: two rows for {row['channel']}")
        by_channel[row["channel"]] = row
    seen = set(soak.elicitations)
    if len(rows) != len(soak.calls):
        problem(f"audit: {len(rows)} rows for {len(soak.calls)} elicitations")
    for channel in sorted(set(by_channel) - seen):
        problem(f"audit: a row for a request no window saw: {by_channel[channel]}")
    for channel in sorted(seen - set(by_channel)):
        problem(f"audit: no row for {channel}")
    for channel in sorted(seen & set(by_channel)):
        elicitation, row = soak.elicitations[channel], by_channel[channel]
        call = soak.calls[elicitation.call_id]
        _, _, outcome, by = _expected(elicitation)
        want = {"outcome": outcome, "window": by, "server": call.server, "origin": soak.controller.window,
                "mode": "form", "fields": BOOKING_FIELDS, "message": f"Book a table at soak-{call.id}?"}
        got = {key: row.get(key) for key in want}
        if got != want:
            problem(f"audit: {channel} holds {got}, the peers saw {want}")
        if row.get("decidedAt") is None or row["decidedAt"] < row["createdAt"]:
            problem(f"audit: {channel} decided at {row.get('decidedAt')}, created at {row.get('createdAt')}")
