"""The documentation site's references cannot drift from the program (issue 37): the CLI reference
names every option of every `elicitron` command and nothing else; the config reference every key
the parse functions read and nothing else (the troubleshooting page: test_docs_troubleshooting.py).
The references are generated (docs/hooks/reference.py) while `mkdocs build --strict`
runs in CI (`scripts/docs build`); these tests check what the generator produces against the
parsers themselves, walked here on their own."""

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from docs_kit import arguments, command_of, commands

from main_process.config import parse_config
from main_process.config_keys import SECTIONS, Kind, names
from shared.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _reference() -> Any:
    spec = importlib.util.spec_from_file_location("elicitron_docs_reference", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _reference()


# ---- the CLI -------------------------------------------------------------------------------------


def _sections(markdown: str) -> dict[str, str]:
    """The generated page's sections by command: "## `elicitron call`" up to the next one."""
    parts = re.split(r"^## `(elicitron[^`]*)`$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _documented(section: str) -> set[str]:
    """The options and positionals in a section's table (its first column)."""
    found: set[str] = set()
    for row in re.findall(r"^\| `(.+?)` \|", section, re.MULTILINE):
        row = row.replace("\\|", "|")
        if row.startswith("-"):
            found |= set(re.findall(r"--?[a-z][a-z-]*", row))
        else:
            found.add(row.split(":")[0].split()[0])
    return found


def test_the_cli_reference_has_every_command_and_option_and_nothing_else() -> None:
    sections = _sections(reference.cli_markdown())
    parsers = commands()
    assert sorted(sections) == sorted(parsers), "commands the reference lists vs the parser's"
    for command, parser in parsers.items():
        documented, actual = _documented(sections[command]), arguments(parser)
        assert actual - documented == set(), f"{command}: options the reference leaves out"
        assert documented - actual == set(), f"{command}: options the reference lists that do not exist"
    assert "--connection" in _documented(sections["elicitron status"])  # the table was read at all
    assert "`--listen tcp://HOST:PORT`" in sections["elicitron main"]  # with its metavar


def test_the_reference_pages_ask_for_the_generated_text() -> None:
    assert "<!-- generated: cli -->" in (DOCS / "cli.md").read_text(encoding="utf-8")
    assert "<!-- generated: config -->" in (DOCS / "config.md").read_text(encoding="utf-8")


def test_the_cli_pages_command_table_lists_every_subcommand() -> None:
    """The hand-written "Commands at a glance" table on the CLI page names every subcommand, and
    only options its command has."""
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    table = text[text.index("## Commands at a glance"):]
    table = table[:table.index("\n## ")]
    parsers = commands()
    listed: set[str] = set()
    for cell in re.findall(r"^\| `(elicitron[^`]*)` \|", table, re.MULTILINE):
        command = command_of(cell.replace("\\|", "|").split(), parsers)
        listed.add(command)
        unknown = set(re.findall(r"--[a-z][a-z-]*", cell)) - arguments(parsers[command])
        assert unknown == set(), f"{cell}: no such option"
    named = {" ".join(command.split()[:2]) for command in listed}
    assert {command for command in parsers if command.count(" ") == 1} - named == set(), \
        "subcommands the CLI page's table leaves out"


# ---- the config ----------------------------------------------------------------------------------


class _Read(dict[str, Any]):
    """A config object that notes each key a parse function looks up (get, [], in) under its kind."""

    def __init__(self, kind: Kind, seen: set[tuple[str, str]], items: dict[str, Any]) -> None:
        super().__init__(items)
        self.kind, self.seen = kind, seen

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add((self.kind, key))
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.seen.add((self.kind, key))
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.seen.add((self.kind, str(key)))
        return super().__contains__(key)


def _keys_the_parser_reads() -> dict[str, set[str]]:
    """Parse one config with every kind of object in it (a stdio server, a url server with oauth,
    notify, each kind of rule) and collect the keys looked up in each."""
    seen: set[tuple[str, str]] = set()

    def read(kind: Kind, items: dict[str, Any]) -> _Read:
        return _Read(kind, seen, items)

    parse_config({
        "mcpServers": {
            "stdio": read("server", {"command": "server"}),
            "remote": read("server", {"url": "https://example.net/mcp", "oauth": read("oauth", {"clientId": "c"})}),
        },
        "elicitron": read("elicitron", {
            "notify": read("notify", {"url": "https://example.net/hook"}),
            "rules": [read("rule", {"server": "stdio", "tool": "t", "decision": "allow"}),
                      read("rule", {"server": "stdio", "tool": "t", "quorum": 1, "approvers": ["ana"]}),
                      read("rule", {"server": "stdio", "message": "m", "answer": {"action": "decline"}}),
                      read("rule", {"asker": "deploy.sh", "answer": {"action": "decline"}}),
                      read("rule", {"server": "stdio", "tool": "t", "message": "m", "escalateAfterSeconds": 60})],
        }),
    }, "test")
    found: dict[str, set[str]] = {}
    for kind, key in seen:
        found.setdefault(kind, set()).add(key)
    return found


@pytest.mark.parametrize("kind", ["server", "oauth", "elicitron", "notify", "rule"])
def test_the_config_table_names_exactly_the_keys_the_parser_reads(kind: Kind) -> None:
    assert _keys_the_parser_reads()[kind] == set(names(kind))


def test_the_strict_parsers_key_sets_match_the_table() -> None:
    from main_process.consent import consent_config, escalation_rules
    from main_process.notify import config as notify_config
    from main_process.oauth import settings

    assert set(names("notify")) == set(notify_config._KEYS)
    assert set(names("oauth")) == set(settings._KEYS)
    rule_keys = consent_config._TOOL_RULE_KEYS | consent_config._ANSWER_RULE_KEYS | consent_config._ASKER_RULE_KEYS \
        | consent_config._QUORUM_RULE_KEYS | escalation_rules._KEYS
    assert set(names("rule")) == set(rule_keys)


def test_the_config_reference_lists_every_key_of_the_table_and_nothing_else() -> None:
    text = reference.config_markdown()
    for section in SECTIONS:
        body = text[text.index(f"## {section.title}\n"):]
        body = body[:body.index("\n## ")] if "\n## " in body else body
        rows = re.findall(r"^\| `([^`]+)` \| (.*?) \|", body, re.MULTILINE)
        assert [name for name, _ in rows] == [key.name for key in section.keys], section.title
        assert all(default.strip() for _, default in rows), f"{section.title}: a key without a default"
    # Defaults come from what the parser makes of an entry without the key.
    assert "| `elicitationTimeoutSeconds` | `600` |" in text
    assert "| `burst` | `5` |" in text


def test_a_key_the_elicitron_object_does_not_have_stops_the_config_naming_it() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({"mcpServers": {}, "elicitron": {"auditValue": True}}, "mcp.json")
    assert str(refused.value).startswith("mcp.json: elicitron.auditValue is not a key Elicitron reads")
    assert "auditValues" in str(refused.value)


def test_every_config_example_on_the_site_is_one_main_accepts() -> None:
    """Each ```json block of the README and docs/ that is an Elicitron config (it has `mcpServers`),
    or the `"elicitron": {...}` part of one, parses as main parses its config file."""
    checked = 0
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for block in re.findall(r"```json\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL):
            if block.lstrip().startswith('"elicitron"'):
                block = '{"mcpServers": {}, ' + block + "}"
            elif "mcpServers" not in block:
                continue
            parse_config(json.loads(block), f"{page.name}: {block[:40]!r}")
            checked += 1
    assert checked >= 6
