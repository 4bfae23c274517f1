"""The site's two generated references, as Markdown: the CLI from its argparse parsers, the config
from main_process/config_keys.py with each default read from what the parser makes of an entry
without the key. No hand-copied list: mkdocs_hooks.py puts them where a page says
`<!-- generated: cli -->` or `<!-- generated: config -->`, and tests/test_docs_reference.py checks
that they name every option and key the parsers have, and nothing else.

Imports only the project and the standard library (no mkdocs), so the tests can call it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# ---- the CLI --------------------------------------------------------------------------------------


def cli_parsers() -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(command, one-line help, parser) for `elicitron` and each subcommand, subcommands of
    subcommands too (`elicitron config import`), in the parser's order. `ask` is handed to
    asker_process before parsing, so its own parser stands in for the stub."""
    from asker_process.cli import parser as ask_parser
    from cli_process.cli import _parser

    def walk(command: str, summary: str, parser: argparse.ArgumentParser) -> Iterator[
            tuple[str, str, argparse.ArgumentParser]]:
        yield command, summary, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
                for name, sub in action.choices.items():
                    full = f"{command} {name}"
                    yield from walk(full, helps.get(name, ""), ask_parser() if full == "elicitron ask" else sub)

    top = _parser()
    yield from walk("elicitron", top.description or "", top)


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a user types: every action but help and the subcommand choice."""
    return [action for action in parser._actions
            if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(action: argparse.Action) -> str:
    value = action.default
    if value in (None, argparse.SUPPRESS) or isinstance(action, argparse._StoreTrueAction | argparse._VersionAction):
        return ""
    if isinstance(action, argparse.BooleanOptionalAction):
        return f"`--{'' if value else 'no-'}{action.dest.replace('_', '-')}`"
    return f"`{value}`"


def cli_markdown() -> str:
    """One section per command: its help, usage, and a table of every argument."""
    out: list[str] = []
    for command, summary, parser in cli_parsers():
        formatter = parser._get_formatter()
        out += [f"## `{command}`", ""]
        if summary:
            out += [summary[0].upper() + summary[1:] + ("" if summary.endswith(".") else "."), ""]
        if parser.description and parser.description != summary:
            out += [parser.description, ""]
        usage = parser.format_usage().removeprefix("usage: ").strip()
        out += ["```text", usage, "```", ""]
        rows = []
        for action in options(parser):
            invocation = formatter._format_action_invocation(action)
            if action.choices and not action.option_strings:
                invocation = f"{action.dest}: {' \\| '.join(map(str, action.choices))}"
            meaning = formatter._expand_help(action) if action.help else ""
            rows.append(f"| `{_cell(invocation)}` | {_default(action)} | {_cell(meaning)} |")
        if rows:
            out += ["| argument | default | meaning |", "|---|---|---|", *rows, ""]
        if parser.epilog:
            out += [parser.epilog[0].upper() + parser.epilog[1:] + ".", ""]
    return "\n".join(out)


# ---- the config -----------------------------------------------------------------------------------


def _parsed_defaults() -> dict[str, Any]:
    """For each section kind, what the parser makes of an entry with none of the optional keys."""
    from main_process.config import parse_config
    from main_process.notify.config import parse_notify

    config = parse_config({"mcpServers": {"stdio": {"command": "server"}}}, "docs")
    return {"server": config.servers["stdio"], "elicitron": config,
            "notify": parse_notify({"url": "https://example.net/hook"}, "docs")[0]}


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, tuple):
        value = list(value)
    return "`" + json.dumps(value) + "`"


def config_markdown() -> str:
    """One table per section of main_process/config_keys.py."""
    from main_process.config_keys import SECTIONS

    parsed = _parsed_defaults()
    out: list[str] = []
    for section in SECTIONS:
        out += [f"## {section.title}", "", f"`{section.where}`: {section.intro}", "",
                "| key | default | meaning |", "|---|---|---|"]
        for key in section.keys:
            if key.default is not None:
                default = key.default
            elif key.attr is not None:
                default = _shown(getattr(parsed[section.kind], key.attr))
            else:
                default = ""
            out.append(f"| `{key.name}` | {_cell(default)} | {_cell(key.meaning)} |")
        out.append("")
    return "\n".join(out)


GENERATED = {"<!-- generated: cli -->": cli_markdown, "<!-- generated: config -->": config_markdown}
