"""The policy engine in-process (main_process/policy/): what a policy file decides for a host's call,
where a bad file's error points, and a reload that keeps the last good set."""

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kit.paths import ROOT

from main_process.config import parse_config
from main_process.policy.engine import Engine
from main_process.policy.errors import PolicyError
from main_process.policy.live import Policies
from main_process.policy.load import load


def docs_example() -> str:
    """The example policy file on the docs' consent page (docs/consent.md), as a user copies it."""
    text = (ROOT / "docs" / "consent.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```cedar\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == 1
    return blocks[0]


def write(tmp_path: Path, text: str, name: str = "team.cedar") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def example(tmp_path: Path) -> Engine:
    return Engine(load([write(tmp_path, docs_example())]))


def noon() -> float:
    return datetime(2026, 12, 7, 12, 0, tzinfo=UTC).timestamp()


def test_the_docs_example_permits_reads_under_tmp_and_forbids_etc(example: Engine) -> None:
    permitted = example.decide_call("Claude Desktop", "files", "read_file", {"path": "/tmp/notes.txt"},
                                    {"readOnlyHint": True}, now=noon())
    assert permitted.decision == "permit" and permitted.policy is not None
    assert permitted.policy.id == "tmp-reads" and permitted.policy.line == 2

    forbidden = example.decide_call("Cursor", "files", "read_file", {"path": "/etc/passwd"}, None, now=noon())
    assert forbidden.decision == "forbid" and forbidden.policy is not None
    assert (forbidden.policy.id, forbidden.policy.reason) == ("no-etc", "nothing under /etc, for any host")

    elsewhere = example.decide_call("Cursor", "files", "read_file", {"path": "/home/ada/x"}, {"readOnlyHint": True},
                                    now=noon())
    assert (elsewhere.decision, elsewhere.policy) == ("none", None)  # today's flow decides


def test_a_permit_only_covers_its_tool_and_a_forbid_wins_over_it(example: Engine) -> None:
    other_tool = example.decide_call("Claude", "files", "write_file", {"path": "/tmp/x"}, {"destructiveHint": False},
                                     now=noon())
    assert other_tool.decision == "none"
    night = datetime(2026, 12, 7, 22, 30, tzinfo=UTC).timestamp()
    # read_file says nothing of its hints: MCP's default is destructive, so the night forbid wins
    late = example.decide_call("Claude", "files", "read_file", {"path": "/tmp/x"}, None, now=night)
    assert late.decision == "forbid" and late.policy is not None and late.policy.id == "no-destructive-at-night"
    read_only = example.decide_call("Claude", "files", "read_file", {"path": "/tmp/x"}, {"readOnlyHint": True,
                                    "destructiveHint": False}, now=night)
    assert read_only.decision == "permit"


def test_the_principal_is_the_host_by_its_name(tmp_path: Path) -> None:
    engine = Engine(load([write(tmp_path, '@id("only-claude")\npermit(principal == Host::"Claude Desktop", '
                                          'action == Action::"callTool", resource in Server::"demo");\n')]))
    assert engine.decide_call("Claude Desktop", "demo", "echo", {}, None).decision == "permit"
    assert engine.decide_call("Cursor", "demo", "echo", {}, None).decision == "none"
    assert engine.decide_call("Claude Desktop", "other", "echo", {}, None).decision == "none"


def test_a_policy_without_an_id_is_named_by_its_file_and_line(tmp_path: Path) -> None:
    engine = Engine(load([write(tmp_path, "// a comment\n\nforbid(principal, action, resource)\n"
                                          "when { context.arguments has n && context.arguments.n > 3 };\n")]))
    verdict = engine.decide_call("h", "s", "t", {"n": 5}, None)
    assert verdict.decision == "forbid" and verdict.policy is not None
    assert verdict.policy.id == "team.cedar:3" and verdict.policy.reason is None
    assert engine.decide_call("h", "s", "t", {"n": 2}, None).decision == "none"


def test_arguments_are_plain_values_only(tmp_path: Path) -> None:
    """An agent's arguments cannot smuggle in an entity (Cedar JSON's `__entity`) or break the
    request with a null, a float or a huge number."""
    engine = Engine(load([write(tmp_path, 'permit(principal, action, resource) when { context.arguments has who && '
                                          'context.arguments.who == Host::"admin" };\n')]))
    smuggled = {"who": {"__entity": {"type": "Host", "id": "admin"}}, "x": None, "y": 1.5, "z": 2 ** 70}
    assert engine.decide_call("h", "s", "t", smuggled, None).decision == "none"


def test_a_misspelt_attribute_is_an_error_naming_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, 'permit(principal, action, resource);\n\npermit(principal, action, resource)\n'
                           'when {\n  context.argumnets.path == "/tmp" };\n')
    with pytest.raises(PolicyError) as error:
        load([path])
    assert str(error.value) == f"{path}:5:11: attribute `argumnets` in context not found"

    entity = write(tmp_path, 'forbid(principal, action, resource) when { resource.nmae == "x" };\n', "two.cedar")
    with pytest.raises(PolicyError, match=rf"^{re.escape(str(entity))}:1:53: attribute `nmae` on entity type"):
        load([entity])


def test_a_syntax_error_names_the_policy_it_is_in(tmp_path: Path) -> None:
    path = write(tmp_path, 'permit(principal, action, resource);\n// "a quote; in a comment"\n'
                           '@reason("a ; in a string")\nforbid(principal, action, resource) when { 1 == };\n')
    with pytest.raises(PolicyError, match=rf"^{re.escape(str(path))}:3:1: not a Cedar policy"):
        load([path])


def test_two_policies_with_one_id_are_an_error(tmp_path: Path) -> None:
    a = write(tmp_path, '@id("same")\npermit(principal, action, resource);\n', "a.cedar")
    b = write(tmp_path, '\n@id("same")\nforbid(principal, action, resource);\n', "b.cedar")
    with pytest.raises(PolicyError, match=rf"^{re.escape(str(b))}:2:1: policy id 'same' is already the id of "
                                          rf"the policy at {re.escape(str(a))}:1$"):
        load([a, b])


def test_a_bad_reload_keeps_the_last_good_set_and_says_why(tmp_path: Path) -> None:
    path = write(tmp_path, '@id("no-echo")\nforbid(principal, action, resource == Tool::"demo/echo");\n')
    policies = Policies([path])
    path.write_text('@id("no-echo")\nforbid(principal, action, resource == Tool::"demo/echo")\n'
                    'when { context.tiem > 3 };\n')
    problem = policies.reload([path])
    assert problem == (f"{path}:3:16: attribute `tiem` in context not found; the last good set (1 policies) "
                       "stays in force")
    verdict = policies.host_call("Claude", "demo", "echo", {}, None)
    assert verdict is not None and verdict.decision == "forbid"
    status = policies.status()
    assert status is not None and status.problem == problem and status.policies == 1

    path.write_text('@id("echo-ok")\npermit(principal, action, resource == Tool::"demo/echo");\n')
    assert policies.reload([path]) is None
    verdict = policies.host_call("Claude", "demo", "echo", {}, None)
    assert verdict is not None and verdict.decision == "permit"
    assert policies.status() == type(status)(files=[str(path)], policies=1, problem=None)
    assert policies.reload([]) is None and not policies.active and policies.status() is None


def test_the_config_names_policy_files_relative_to_itself(tmp_path: Path) -> None:
    config = parse_config({"mcpServers": {}, "elicitron": {"policies": ["team.cedar", "/etc/elicitron/x.cedar"]}},
                          str(tmp_path / "mcp.json"))
    assert config.policies == (tmp_path / "team.cedar", Path("/etc/elicitron/x.cedar"))
    with pytest.raises(Exception, match="elicitron.policies must be a list of file paths"):
        parse_config({"mcpServers": {}, "elicitron": {"policies": "team.cedar"}}, "mcp.json")

