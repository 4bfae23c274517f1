"""The `elicitron` command's parsers as the docs tests read them: each command and its options."""

import argparse


def commands() -> dict[str, argparse.ArgumentParser]:
    """`elicitron` and each subcommand's parser (and theirs: `config import`), walked from
    cli_process's own parser (`ask`'s is asker_process's: the CLI hands `ask` over before parsing)."""
    from asker_process.cli import parser as ask_parser
    from cli_process.cli import _parser

    found: dict[str, argparse.ArgumentParser] = {}

    def walk(command: str, parser: argparse.ArgumentParser) -> None:
        found[command] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(f"{command} {name}", ask_parser() if name == "ask" else sub)

    walk("elicitron", _parser())
    assert "elicitron config import" in found  # a subcommand's own subcommands are walked
    return found


def arguments(parser: argparse.ArgumentParser) -> set[str]:
    """A parser's option strings, and its positionals by metavar (or name)."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        found |= set(action.option_strings) if action.option_strings else {str(action.metavar or action.dest)}
    return found


def command_of(words: list[str], known: dict[str, argparse.ArgumentParser]) -> str:
    """The longest command `words` (from "elicitron" on) start with."""
    command = "elicitron"
    for word in words[1:]:
        if f"{command} {word}" not in known:
            break
        command = f"{command} {word}"
    return command
