"""`elicitron policy test`: the config's policy files asked about one call (or, with `--action elicit`,
one server's form question), here, without main, and what decided it. Exit 0 permit, 1 forbid, 2 no match (today's flow decides: rules, toolApproval, a
card); a bad file or config is a usage error (2) too, said on stderr."""

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cli_process.command import EXIT_USAGE

if TYPE_CHECKING:
    from main_process.config import Config
from shared.terminal_text import for_terminal

EXIT_PERMIT, EXIT_FORBID, EXIT_NO_MATCH = 0, 1, 2


def add_policy_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("policy", help="policy files (Cedar): test what they decide for a call")
    actions = p.add_subparsers(dest="policy_command", required=True)
    test = actions.add_parser("test", help="decide one host's call (or a server's form question, --action elicit) "
                                           "with the config's policies; exit 0 permit, 1 forbid, 2 no match")
    test.add_argument("--host", required=True, help="the host's name, as in its clientInfo (\"Claude Desktop\")")
    test.add_argument("--server", required=True, help="the server's name in the config")
    test.add_argument("--action", choices=("callTool", "elicit"), default="callTool",
                      help="callTool (default): a host's tools/call of --tool; elicit: --server asking a form "
                           "question in --host's session (no --tool, --args or --annotations)")
    test.add_argument("--tool", help="the tool called (needed with --action callTool)")
    test.add_argument("--args", default="{}", metavar="JSON", help="the call's arguments, a JSON object")
    test.add_argument("--annotations", default="{}", metavar="JSON",
                      help="the tool's MCP annotations (readOnlyHint, …), a JSON object; MCP's defaults otherwise")
    test.add_argument("--config", type=Path, help="the mcpServers JSON whose elicitron.policies to read "
                                                  "(default: main's config)")
    test.add_argument("--policy", type=Path, action="append", metavar="FILE",
                      help="this policy file instead of the config's (repeatable)")
    test.set_defaults(func=cmd_policy_test)


def check_policies(config: "Config") -> None:
    """The config's policy files loaded once in the foreground: PolicyError (a ConfigError, one line
    and exit 2) before main starts, rather than a main that stops where nobody reads its stderr."""
    if config.policies:
        from main_process.policy.load import load

        load(config.policies)


def cmd_policy_test(args: argparse.Namespace) -> int:
    from main_process.config import load_config
    from main_process.policy.engine import Engine
    from main_process.policy.load import load

    elicit = args.action == "elicit"
    if elicit and (args.tool is not None or args.args != "{}" or args.annotations != "{}"):
        print("elicitron: --action elicit asks about a server's question, which has no tool: leave out --tool, "
              "--args and --annotations", file=sys.stderr)
        return EXIT_USAGE
    if not elicit and args.tool is None:
        print("elicitron: --tool is needed with --action callTool (the default); --action elicit asks about "
              "a server's form question instead", file=sys.stderr)
        return EXIT_USAGE
    arguments = _json_object(args.args, "--args")
    annotations = _json_object(args.annotations, "--annotations")
    if arguments is None or annotations is None:
        return EXIT_USAGE
    paths = tuple(args.policy) if args.policy else load_config(args.config).policies
    if not paths:
        print("elicitron: the config names no policy files (elicitron.policies); nothing to test", file=sys.stderr)
        return EXIT_USAGE
    engine = Engine(load(paths))  # a PolicyError is a ConfigError: cli.main prints it, exit 2
    if elicit:
        verdict = engine.decide_elicit(("Host", args.host), args.server)
    else:
        verdict = engine.decide_call(args.host, args.server, args.tool, arguments, annotations)
    for error in verdict.errors:
        print(f"warning: {for_terminal(error)} (that policy does not apply)", file=sys.stderr)
    policy = verdict.policy
    host, server = for_terminal(args.host), for_terminal(args.server)
    if verdict.decision == "none" or policy is None:
        if elicit:
            print(f"no match: no policy decides {server}'s questions in {host}'s session; a remembered answer "
                  "or a card does")
        else:
            print(f"no match: no policy decides {server}/{for_terminal(args.tool)} for {host}; the rules, "
                  "toolApproval or a card do")
        return EXIT_NO_MATCH
    print(f"{verdict.decision}: policy {for_terminal(policy.id)} ({for_terminal(policy.where)})")
    if policy.reason:
        print(f"reason: {for_terminal(policy.reason)}")
    if elicit:
        # A policy cannot fill in a form: a permit leaves the question to a remembered answer or a card.
        print(f"{server}'s question is declined before any card" if verdict.decision == "forbid" else
              f"{server}'s question still goes to a remembered answer or a card (a policy cannot fill in a form)")
    return EXIT_PERMIT if verdict.decision == "permit" else EXIT_FORBID


def _json_object(text: str, flag: str) -> dict[str, object] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"elicitron: {flag} is not JSON: {exc}", file=sys.stderr)
        return None
    if not isinstance(value, dict):
        print(f"elicitron: {flag} must be a JSON object", file=sys.stderr)
        return None
    return value


