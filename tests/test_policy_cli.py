"""`elicitron policy test` as a user runs it (a real process, no main), and main's imports without
policies (cedarpy is loaded only when the config names policy files: main's start time)."""

import json
import subprocess
from pathlib import Path

import pytest
from kit.env import child_env
from kit.paths import PYTHON, ROOT

pytestmark = pytest.mark.slow  # real CLI processes

POLICIES = """\
@id("tmp-reads")
@reason("reading under /tmp is fine")
permit(principal == Host::"Claude Desktop", action == Action::"callTool", resource == Tool::"files/read_file")
when { context.arguments has path && context.arguments.path like "/tmp/*" };

@id("no-etc")
@reason("nothing under /etc")
forbid(principal, action, resource in Server::"files")
when { context.arguments has path && context.arguments.path like "/etc/*" };

@id("no-asking-via-agents")
@reason("the bank asks a person directly")
forbid(principal == Host::"Claude Desktop", action == Action::"elicit", resource == Server::"bank");
"""


def elicitron(home: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([PYTHON, "-m", "cli_process", *args], capture_output=True, text=True, timeout=60,
                          env=child_env(home), cwd=ROOT, check=False, stdin=subprocess.DEVNULL)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "team.cedar").write_text(POLICIES)
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {}, "elicitron": {"policies": ["team.cedar"]}}))
    return path


def test_policy_test_prints_the_decision_and_the_policy_that_made_it(tmp_path: Path, config: Path) -> None:
    def test(host: str, path: str) -> "subprocess.CompletedProcess[str]":
        return elicitron(tmp_path, "policy", "test", "--config", str(config), "--host", host, "--server", "files",
                         "--tool", "read_file", "--args", json.dumps({"path": path}))

    permitted = test("Claude Desktop", "/tmp/notes.txt")
    assert (permitted.returncode, permitted.stdout) == (
        0, f"permit: policy tmp-reads ({tmp_path / 'team.cedar'}:1)\nreason: reading under /tmp is fine\n")
    forbidden = test("Claude Desktop", "/etc/passwd")
    assert (forbidden.returncode, forbidden.stdout) == (
        1, f"forbid: policy no-etc ({tmp_path / 'team.cedar'}:6)\nreason: nothing under /etc\n")
    other_host = test("Cursor", "/tmp/notes.txt")
    assert other_host.returncode == 2
    assert other_host.stdout.startswith("no match: no policy decides files/read_file for Cursor")


def test_policy_test_action_elicit_decides_a_servers_questions_in_a_hosts_session(tmp_path: Path,
                                                                                  config: Path) -> None:
    def test(*args: str) -> "subprocess.CompletedProcess[str]":
        return elicitron(tmp_path, "policy", "test", "--config", str(config), *args)

    forbidden = test("--action", "elicit", "--host", "Claude Desktop", "--server", "bank")
    assert (forbidden.returncode, forbidden.stdout, forbidden.stderr) == (
        1, (f"forbid: policy no-asking-via-agents ({tmp_path / 'team.cedar'}:11)\n"
            "reason: the bank asks a person directly\nbank's question is declined before any card\n"), "")
    other_host = test("--action", "elicit", "--host", "Cursor", "--server", "bank")
    assert (other_host.returncode, other_host.stdout) == (
        2, "no match: no policy decides bank's questions in Cursor's session; a remembered answer or a card does\n")
    # The forbid on the server's tools under /etc is about calls: the same server's questions are not decided.
    files = test("--action", "elicit", "--host", "Claude Desktop", "--server", "files")
    assert files.returncode == 2
    with_a_tool = test("--action", "elicit", "--host", "Claude Desktop", "--server", "bank", "--tool", "pay")
    assert (with_a_tool.returncode, with_a_tool.stdout) == (2, "")
    assert with_a_tool.stderr == ("elicitron: --action elicit asks about a server's question, which has no tool: "
                                  "leave out --tool, --args and --annotations\n")
    no_tool = test("--host", "Claude Desktop", "--server", "files")
    assert (no_tool.returncode, no_tool.stdout) == (2, "")
    assert no_tool.stderr.startswith("elicitron: --tool is needed with --action callTool (the default)")


def test_policy_test_with_a_bad_file_names_file_line_and_column(tmp_path: Path, config: Path) -> None:
    (tmp_path / "team.cedar").write_text(POLICIES.replace("context.arguments has path &&", "context.arguments has "
                                                          "path && resource.nmae == \"x\" &&", 1))
    done = elicitron(tmp_path, "policy", "test", "--config", str(config), "--host", "h", "--server", "files",
                     "--tool", "read_file")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"elicitron: config error: {tmp_path / 'team.cedar'}:4:47: attribute `nmae` on "
                                  "entity type `Tool` not found")


def test_main_loads_cedarpy_only_when_policies_are_configured() -> None:
    """Importing main's app (with the consent layer and its policy hook) and the CLI leaves cedarpy out."""
    done = subprocess.run([PYTHON, "-c", ("import sys, main_process.app, cli_process.cli; "
                                         "print('cedarpy' in sys.modules)")],
                          capture_output=True, text=True, check=True, cwd=ROOT, timeout=60)
    assert done.stdout.strip() == "False"
