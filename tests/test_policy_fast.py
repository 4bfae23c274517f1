"""The policy engine's fast path (main_process/policy/engine.py, scope.py) decides every call exactly
as cedarpy's plain `is_authorized` does over the whole set and the whole request: same decision,
same policies behind it, same errors. Speed is measured by `scripts/bench --only policy`, not here."""

import json
import re
from pathlib import Path
from typing import Any

import cedarpy
import pytest
from kit import policy_set

from main_process.policy import schema, scope
from main_process.policy.engine import Engine
from main_process.policy.load import LoadedPolicies, load

NOON = 1_796_644_800.0  # 2026-12-07T12:00:00Z
NIGHT = NOON + 11 * 3600 + 0.1234567  # 23:00:00.123 (a datetime policy reads the milliseconds too)


def plain(loaded: LoadedPolicies, host: str, server: str, tool: str, arguments: dict[str, Any],
          annotations: dict[str, Any] | None, now: float) -> tuple[bool, list[str], list[str]]:
    """cedarpy's own answer: the whole set, the whole request."""
    result = cedarpy.is_authorized(schema.call_request(host, server, tool, arguments, annotations, now),
                                   loaded.handle, schema.entities(host, server, tool))
    return result.allowed, sorted(result.diagnostics.reasons), sorted(map(unplaced, result.diagnostics.errors))


def unplaced(error: str) -> str:
    """An error without its position in the request's JSON (the engine sends less of it)."""
    return re.sub(r" at line \d+ column \d+$", "", error)


def fast(engine: Engine, host: str, server: str, tool: str, arguments: dict[str, Any],
         annotations: dict[str, Any] | None, now: float) -> tuple[bool, list[str], list[str]]:
    """The engine's answer, in the same terms (permit, the ids of the policies behind it, the errors)."""
    verdict = engine.decide_call(host, server, tool, arguments, annotations, now)
    ids = sorted(info_id for info_id, info in engine.loaded.infos.items() if verdict.policy is info)
    return verdict.decision == "permit", ids, sorted(map(unplaced, verdict.errors))


def deciding(loaded: LoadedPolicies, reasons: list[str]) -> list[str]:
    """Of the policies behind cedarpy's answer, the one the engine names (the first in the files)."""
    return [min(reasons, key=lambda r: loaded.infos[r].order)] if reasons else []


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> LoadedPolicies:
    path = tmp_path_factory.mktemp("policies") / "team.cedar"
    path.write_text(policy_set.policies(200), encoding="utf-8")
    return load([path])


def test_200_generated_policies_decide_2000_calls_as_cedarpy_does(generated: LoadedPolicies) -> None:
    engine = Engine(generated)
    seen = {"permit": 0, "forbid": 0, "none": 0, "errors": 0}
    for index, call in enumerate(policy_set.calls(2000, 200)):
        now = NIGHT if index % 2 else NOON
        allowed, reasons, errors = plain(generated, call.host, call.server, call.tool, call.arguments,
                                         call.annotations, now)
        got = fast(engine, call.host, call.server, call.tool, call.arguments, call.annotations, now)
        assert got == (allowed, deciding(generated, reasons), errors), call
        verdict = engine.decide_call(call.host, call.server, call.tool, call.arguments, call.annotations, now)
        seen[verdict.decision] += 1
        seen["errors"] += bool(errors)
    # the calls exercise every outcome, not only "no match"
    assert min(seen.values()) >= 20, seen


def write(tmp_path: Path, text: str) -> LoadedPolicies:
    path = tmp_path / "edge.cedar"
    path.write_text(text, encoding="utf-8")
    return load([path])


EDGE_CASES = """
@id("host-in") forbid(principal in Host::"evil", action, resource);
@id("is-tool-in") permit(principal is Host, action in [Action::"callTool"], resource is Tool in Server::"s")
when { context.annotations.readOnlyHint && resource.name == "read" };
@id("server-name") forbid(principal, action == Action::"callTool", resource in Server::"s") when { resource.server == "s" && context has time
  && context.time.toTime() > duration("22h") };
@id("errs") forbid(principal, action, resource == Tool::"s/errs") when { context.arguments.missing == 1 };
@id("star") permit(principal, action == Action::"callTool", resource == Tool::"s/star")
when { context.arguments has q && context.arguments.q like "a\\*b*" && principal.name != "Cursor" };
@id("flags") forbid(principal, action == Action::"callTool", resource == Tool::"s/flags")
when { context.arguments has flag && (context.arguments.flag == true || !context.annotations.idempotentHint) }
unless { context.arguments has n && context.arguments.n >= 3 };
"""


@pytest.mark.parametrize(("host", "tool", "arguments", "annotations", "now"), [
    ("evil", "read", {}, {"readOnlyHint": True}, NOON),
    ("Claude", "read", {}, {"readOnlyHint": True}, NOON),
    ("Claude", "read", {}, {"readOnlyHint": True}, NIGHT),
    ("Claude", "errs", {"other": 1}, None, NOON),
    ("Claude", "errs", {"missing": 1}, None, NOON),
    ("Claude", "other", {"a": None, "__entity": {"type": "Host", "id": "x"}}, None, NOON),
    ("Claude", "star", {"q": "a*bc"}, None, NOON),
    ("Claude", "star", {"q": "axbc"}, None, NOON),
    ("Cursor", "star", {"q": "a*b"}, None, NOON),
    ("Claude", "star", {"q": 7}, None, NOON),  # `like` on a number: Cedar's type error
    ("Claude", "flags", {"flag": True}, {"idempotentHint": True}, NOON),
    ("Claude", "flags", {"flag": 1}, {"idempotentHint": True}, NOON),  # 1 is not true
    ("Claude", "flags", {"flag": "x"}, None, NOON),
    ("Claude", "flags", {"flag": True, "n": 3}, None, NOON),
    ("Claude", "flags", {"flag": True, "n": "3"}, None, NOON),  # `>=` on text: Cedar's type error
    ("Claude", "flags", {"flag": True, "n": 2.5}, None, NOON),
    ("Claude", "star", {"q": "a*b\ud800"}, None, NOON),  # a lone surrogate: Cedar cannot build the request
])
def test_scopes_and_whole_values_decide_as_cedarpy_does(tmp_path: Path, host: str, tool: str,
                                                         arguments: dict[str, Any],
                                                         annotations: dict[str, Any] | None, now: float) -> None:
    loaded = write(tmp_path, EDGE_CASES)
    allowed, reasons, errors = plain(loaded, host, "s", tool, arguments, annotations, now)
    assert fast(Engine(loaded), host, "s", tool, arguments, annotations, now) == (
        allowed, deciding(loaded, reasons), errors)


def parsed(text: str) -> dict[str, Any]:
    return dict(json.loads(cedarpy.policies_to_json_str(text))["staticPolicies"]["policy0"])


def test_what_policies_read_of_the_context(tmp_path: Path) -> None:
    loaded = write(tmp_path, EDGE_CASES)
    reads = scope.reads([loaded.parsed["errs"], loaded.parsed["is-tool-in"]])
    assert reads.of("arguments") == frozenset({"missing"}) and reads.of("annotations") == frozenset({"readOnlyHint"})
    assert "time" not in reads.attributes and "time" in scope.reads([loaded.parsed["server-name"]]).attributes
    # a record or the context used as a whole value (the schema's validation refuses these today,
    # but the engine would then send all of it)
    whole = scope.reads([parsed('permit(principal, action, resource) when { context.arguments == {"a": 1} };')])
    assert whole.of("arguments") is None and whole.of("annotations") == frozenset()
    assert scope.reads([parsed("permit(principal, action, resource) when { context == {} };")]).everything


def test_a_tool_no_policy_can_match_is_not_asked_of_cedar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(write(tmp_path, EDGE_CASES.replace('forbid(principal in Host::"evil", action, resource)',
                                                        'forbid(principal in Host::"evil", action, resource in '
                                                        'Server::"s")')))

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"cedarpy asked: {json.dumps(args[0])}")

    monkeypatch.setattr(cedarpy, "is_authorized", refuse)
    verdict = engine.decide_call("evil", "elsewhere", "tool", {"path": "/"}, None, NOON)
    assert (verdict.decision, verdict.policy, verdict.errors) == ("none", None, ())


@pytest.mark.parametrize(("condition", "guarded"), [
    ('when { context.arguments has path && context.arguments.path like "/tmp/*" }', {"path"}),
    (('when { context.annotations.destructiveHint && context.time.toTime() > duration("19h") '
      '&& context.arguments has path && context.arguments has mode }'), {"path", "mode"}),
    ('when { principal is Host && resource in Server::"s" } when { context.arguments has path }', {"path"}),
    # tested after something that can fail (an argument's value, arithmetic): Cedar must see it
    ("when { context.arguments.count > 1 && context.arguments has path }", set()),
    ("when { context.annotations.readOnlyHint || context.arguments has path }", set()),
    ("unless { context.arguments has path }", set()),
])
def test_a_policy_is_left_out_only_when_a_missing_argument_makes_it_false_without_error(
        condition: str, guarded: set[str]) -> None:
    policy = parsed(f'forbid(principal, action == Action::"callTool", resource)\n{condition};')
    assert scope.guards(policy) == guarded


def test_plain_conditions_are_decided_without_cedar_and_the_time_by_cedar(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain_ones = "".join(f"{policy};" for policy in EDGE_CASES.split(";")
                         if any(f'@id("{name}")' in policy for name in ("star", "flags")))
    engine = Engine(write(tmp_path, plain_ones + '\n@id("late") forbid(principal, action, resource == Tool::"s/late") '
                                                 'when { context.time.toTime() > duration("22h59m59s999ms") };'
                                                 '\n@id("until") forbid(principal, action, resource == Tool::"s/read") '
                                                 'when { context.time > datetime("2026-12-07") };'))
    asked: list[str] = []
    plain_is_authorized = cedarpy.is_authorized

    def counting(request: dict[str, Any], *args: Any) -> Any:
        asked.append(request["resource"]["id"])
        return plain_is_authorized(request, *args)

    monkeypatch.setattr(cedarpy, "is_authorized", counting)
    assert engine.decide_call("Claude", "s", "star", {"q": "a*b"}, None, NOON).decision == "permit"
    assert engine.decide_call("Claude", "s", "flags", {"flag": True}, None, NOON).decision == "forbid"
    assert engine.decide_call("Claude", "s", "late", {}, None, NIGHT).decision == "forbid"  # 23:00:00.123
    assert engine.decide_call("Claude", "s", "late", {}, None, NOON).decision == "none"
    assert asked == []
    # a datetime literal: only Cedar evaluates it
    assert engine.decide_call("Claude", "s", "read", {}, {"readOnlyHint": True}, NIGHT).decision == "forbid"
    assert asked == ["s/read"]


def test_a_tools_annotations_are_looked_up_only_when_a_policy_that_can_apply_reads_them(tmp_path: Path) -> None:
    engine = Engine(write(tmp_path, """
@id("tmp") permit(principal, action, resource == Tool::"files/read") when { context.arguments.path like "/tmp/*" };
@id("ro") permit(principal, action, resource == Tool::"files/list") when { context.annotations.readOnlyHint };
"""))
    looked_up: list[str] = []

    def annotations() -> dict[str, Any]:
        looked_up.append("dumped")
        return {"readOnlyHint": True}

    assert engine.decide_call("Claude", "files", "read", {"path": "/tmp/a"}, annotations, NOON).decision == "permit"
    assert looked_up == []  # tmp reads no hint
    assert engine.decide_call("Claude", "files", "list", {}, annotations, NOON).decision == "permit"
    assert looked_up == ["dumped"]
