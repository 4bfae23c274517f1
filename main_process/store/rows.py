"""Records as rows and back, for every backend's SQL: a rule (`main_process.consent.rules.Rule`) and an
audit row (records.py) as the same columns in SQLite and PostgreSQL, JSON values as JSON text.

The SQLite backend's columns and order are those of every release before the store interface;
PostgreSQL has the same ones (jsonb where SQLite has JSON text) plus its own (`machine`).
"""

import logging
from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec

from main_process.consent.grants import ANY, Coverage
from main_process.consent.rules import Rule
from main_process.store.records import AuditEntry
from shared.elicit_params import mode_of
from shared.messages import ElicitationInvoke, ElicitationResult, QuorumApprover

logger = logging.getLogger(__name__)

# ---- remembered rules and approvals ----------------------------------------------------------

RULE_COLUMNS: Final = ("id, server, tool, decision, question, message, fields, action, content, scope, expires_at, "
                       "created_at, created_by, party, identity, arguments, single_use, covers")
RULE_COLUMN_COUNT: Final = 18


def rule_row(rule: Rule) -> tuple[Any, ...]:
    answer = rule.answer
    content = msgspec.json.encode(answer.content).decode() if answer is not None and answer.content else None
    fields = msgspec.json.encode(list(rule.fields)).decode() if rule.fields else None
    return (rule.id, rule.server, rule.tool, rule.decision, rule.question, rule.message, fields,
            answer.action if answer is not None else None, content, rule.scope, rule.expires_at,
            rule.created_at, rule.created_by, rule.party, rule.identity, *_grant_columns(rule))


def _grant_columns(rule: Rule) -> tuple[str | None, bool, str | None]:
    """A tool rule's coverage (JSON: {"arguments", "digest"?, "pattern"?}), single use, and the
    digest of what it covers (grants.py); answer rules have none."""
    if rule.tool is None:
        return None, False, None
    coverage = rule.coverage
    stored: dict[str, Any] = {"arguments": coverage.arguments}
    if coverage.digest is not None:
        stored["digest"] = coverage.digest
    if coverage.arguments == "pattern":
        stored["pattern"] = dict(coverage.pattern)
    return msgspec.json.encode(stored).decode(), rule.single_use, rule.covers_digest()


class _StoredCoverage(msgspec.Struct, forbid_unknown_fields=True):
    arguments: Literal["any", "exact", "pattern"]
    digest: str | None = None
    pattern: dict[str, str] | None = None


def _coverage(stored: str | None) -> Coverage:
    if stored is None:  # stored before grants: any arguments, as it was given
        return ANY
    read = msgspec.json.decode(stored, type=_StoredCoverage)
    if (read.arguments == "exact") != (read.digest is not None) or (read.arguments == "pattern") != (read.pattern is not None):
        raise ValueError(f"a coverage of {read.arguments} arguments with the wrong parts")
    return Coverage(read.arguments, digest=read.digest, pattern=tuple(sorted((read.pattern or {}).items())))


def rule_from_row(row: Sequence[Any]) -> Rule:
    (rule_id, server, tool, decision, question, message, fields, action, content, scope, expires_at,
     created_at, created_by, party, identity, arguments, single_use, covers) = row
    if scope not in ("always", "until") or (tool is None) == (question is None):
        raise ValueError("neither a tool rule nor an answer rule")
    if party not in (None, "server", "asker") or (party == "asker" and tool is not None):
        raise ValueError(f"unknown party {party!r}")
    answer = None
    if question is not None:
        if action not in ("accept", "decline"):
            raise ValueError(f"unknown action {action!r}")
        values = msgspec.json.decode(content, type=dict[str, Any]) if content else None
        answer = ElicitationResult(action=action, content=values if action == "accept" else None)
    elif decision not in ("allow", "deny"):
        raise ValueError(f"unknown decision {decision!r}")
    rule = Rule(id=rule_id, source="user", server=server, created_at=created_at, created_by=created_by,
                scope=scope, expires_at=expires_at, tool=tool, decision=decision, answer=answer,
                question=question, message=message,
                fields=tuple(msgspec.json.decode(fields, type=list[str])) if fields else (),
                party=party or "server", identity=identity,  # schema 1: a server's, not bound (unbound)
                coverage=_coverage(arguments) if tool is not None else ANY, single_use=bool(single_use))
    if tool is not None and (arguments is not None or covers is not None) and covers != rule.covers_digest():
        raise ValueError("what the grant covers does not match its digest")  # never applied beyond what was approved
    return rule


# ---- the audit log ----------------------------------------------------------------------------

REQUEST_COLUMNS: Final = ("channel, server, mode, message, fields, url, origin_window, created_at, expires_at, "
                          "kind, via, tool, arguments")
AUDIT_COLUMNS: Final = (REQUEST_COLUMNS + ", outcome, answer_window, decided_at, content, rule_id, decision, "
                        "answer_window_name, answer_device, answer_device_id, reason")


def request_row(invoke: ElicitationInvoke, arguments_json: str | None) -> tuple[Any, ...]:
    params = invoke.request.params  # the JSON as the windows got it: the row records what was sent
    mode = mode_of(params)
    mode = mode if isinstance(mode, str) else str(mode)
    message = params.get("message")
    message = message if isinstance(message, str) else ""
    fields_json: str | None = None
    url: str | None = None
    if mode == "url":
        raw_url = params.get("url")
        url = raw_url if isinstance(raw_url, str) else None
    else:
        schema = params.get("requestedSchema")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        names = [str(name) for name in properties] if isinstance(properties, dict) else []
        fields_json = msgspec.json.encode(names).decode()
    tool = invoke.approval.tool if invoke.approval is not None else None
    return (invoke.response_channel, invoke.request.server, mode, message, fields_json, url,
            invoke.origin, invoke.created_at, invoke.expires_at, invoke.kind, invoke.via, tool, arguments_json)


def audit_entry(row: Sequence[Any], machine: str | None = None, answer_machine: str | None = None,
                answer_user: str | None = None, approvers: str | None = None) -> AuditEntry:
    (channel, server, mode, message, fields, url, origin, created_at, expires_at, kind, via, tool, arguments,
     outcome, window, decided_at, content, rule_id, decision, window_name, device, device_id, reason) = row
    return AuditEntry(
        channel=channel, server=server, mode=mode, message=message,
        fields=decode_json(fields, list[str]), url=url, origin=origin, created_at=created_at,
        expires_at=expires_at, outcome=outcome, window=window, decided_at=decided_at,
        content=decode_json(content, dict[str, Any]), kind=kind, via=via, tool=tool,
        arguments=decode_json(arguments, dict[str, Any]), rule_id=rule_id, decision=decision,
        window_name=window_name, device=device, device_id=device_id, machine=machine, reason=reason,
        answer_machine=answer_machine, answer_user=answer_user,
        approvers=decode_json(approvers, list[QuorumApprover]),
    )


def decode_json[T](raw: str | None, kind: type[T]) -> T | None:
    if raw is None:
        return None
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.DecodeError as exc:
        logger.warning("audit log: unreadable JSON column %r: %s", raw[:80], exc)
        return None


def values_json(channel: str, values: dict[str, Any] | None, record_values: bool) -> str | None:
    """Values a user typed or a host passed, as JSON: only with record_values."""
    if not record_values or values is None:
        return None
    try:
        return msgspec.json.encode(values).decode()
    except (TypeError, msgspec.EncodeError) as exc:
        logger.warning("audit log: values of %s not recorded: %s", channel, exc)
        return None
