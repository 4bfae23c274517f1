"""docs/troubleshooting.md has a row for every one-line error the program shows a person, and
quotes nothing it no longer shows (issue 37). The lines are read from the source
(tests/error_lines.py): a new error without a row fails here, with its text and where it is made."""

import ast
import re
from pathlib import Path

from docs_kit import arguments, command_of, commands
from error_lines import FILLED, ErrorLine, error_lines, lines_in, normalized, rpc_codes, wire_codes

PAGE = Path(__file__).resolve().parents[1] / "docs" / "troubleshooting.md"
WIRE_SECTION = "## Error codes from main"


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def _quoted(markdown: str) -> list[str]:
    """The first cell of each table row, a code span (`` `text` `` or ``` ``text with `x` `` ```)."""
    return [cell.replace("\\|", "|") for _, cell in re.findall(r"^\| (`+) ?(.+?) ?\1 \|", markdown, re.MULTILINE)]


def _rows() -> set[str]:
    before_codes = _page().split(WIRE_SECTION)[0]
    return {normalized(cell) for cell in _quoted(before_codes)}


def test_every_error_line_the_program_shows_has_a_row() -> None:
    rows = _rows()
    missing = sorted({f"{line.where}: {line.text}" for line in error_lines() if line.text not in rows})
    assert missing == [], "lines the program shows that docs/troubleshooting.md has no row for:\n" + "\n".join(missing)


def test_every_row_quotes_a_line_the_program_still_shows() -> None:
    shown = {line.text for line in error_lines()}
    stale = sorted(_rows() - shown)
    assert stale == [], "rows of docs/troubleshooting.md that quote a line the program no longer shows"


def test_every_wire_and_json_rpc_error_code_has_a_row() -> None:
    codes = _quoted(_page().split(WIRE_SECTION)[1])
    assert sorted(code for code in codes if not code.lstrip("-").isdigit()) == sorted(wire_codes())
    assert sorted(code for code in codes if code.lstrip("-").isdigit()) == sorted(rpc_codes())


def test_the_lines_are_found_where_they_are_made() -> None:
    """The reader finds what each kind of site shows: an error raised, a line printed to stderr, a
    reason given to `_fail`, a helper's text followed to its return, a banner constant, an HTTP
    answer's `error`, the web page's status line, a warning logged."""
    found = {line.text: line.where for line in error_lines()}
    assert found["no main is running (no connection file at …)"] == "shared/connection_file.py:132"
    assert found["arguments must be a JSON object"].startswith("cli_process/cli.py:")
    assert found["expired: nobody answered within … s"].startswith("asker_process/cli.py:")
    assert "command … of server … is not executable (…)" in found  # spawn_error(...), in status
    assert "no answer from main within … s (…)" in found  # unreachable_text(f"...", path): the argument in the return
    assert found["unknown server … (configured: …)"].startswith("cli_process/cli.py:")  # for_terminal(f"..."): its text
    assert any(text.endswith("`serve --print-config --http` needs main running with `elicitron main --mcp-http "
                             "[HOST:]PORT`") for text in found)  # f"{exc}; {needs}": a string constant put in
    assert f"Lost contact with main; reconnecting{FILLED} Nothing can be sent to it until it answers." in found
    assert found["no server named …"].startswith("gateway_process/http_app.py:")  # a JSON error a host shows
    assert found["Not connected to main (…); trying again…"].startswith("web_process/static/app.js:")  # the page
    assert found["store … is unreachable: …"].startswith("main_process/store/postgres_connect.py:")  # logged, %s
    assert f"{FILLED}: rule {FILLED} skipped: its answer does not fit this request ({FILLED}); asking in the windows " \
        "instead" in found  # logger.warning("%s: %s", server, text): the text built before the call


def test_a_new_error_without_a_row_is_named_with_its_place() -> None:
    source = ast.parse('from shared.errors import ConfigError\n'
                       'def check(where):\n'
                       '    raise ConfigError(f"{where}: a brand new complaint")\n'
                       'def passes_on(exc):\n'
                       '    raise ConfigError(str(exc))\n'
                       'import logging\n'
                       'log = logging.getLogger(__name__)\n'
                       'def logs(exc):\n'
                       '    log.warning("%s", exc)\n'
                       '    log.error("cannot keep %r: %.1f%% full", "x", 99.5)\n'
                       '    log.info("not a problem: %s", exc)\n')
    new = lines_in(source, "new_module.py")
    assert new == [ErrorLine("…: a brand new complaint", "new_module.py:3"),  # str(exc) has no text of its own
                   ErrorLine("cannot keep …: …% full", "new_module.py:10")]  # nor "%s", exc; info is no problem
    assert new[0].text not in _rows()


def test_each_command_a_row_says_to_run_exists_with_its_options() -> None:
    """What a row says to do (its last cell) names `elicitron` commands that exist, with options
    they take: a renamed command or option fails here, not in a reader's terminal."""
    parsers = commands()
    advised = [span for row in re.findall(r"^\|.*\| (.*?) \|$", _page(), re.MULTILINE)
               for span in re.findall(r"`(elicitron [^`]*)`", row)]
    assert len(advised) >= 40
    wrong = []
    for span in advised:
        words = span.split()
        command = command_of(words, parsers)
        if command == "elicitron" or set(re.findall(r"--[a-z][a-z-]*", span)) - arguments(parsers[command]):
            wrong.append(span)
    assert wrong == [], "commands the troubleshooting page advises that do not exist, or options they lack"
