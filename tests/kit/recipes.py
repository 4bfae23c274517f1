"""The pages' recipes as the pages write them: a docs/ section, a command line in it, and
docs/web.md's reverse-proxy recipe (its Caddyfile and `elicitron web` lines). Tests that read a recipe
and tests that run it take its words from here, so both follow the page."""

import re

from kit.paths import ROOT

DOCS = ROOT / "docs"
PROXY_HEADING = "A phone away from this network: a reverse proxy with a real certificate"


def section(page: str, heading: str) -> str:
    """The text of `## heading` in docs/`page`, up to the next `## ` (the page must have it)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    assert f"\n## {heading}\n" in text, f"docs/{page} no longer has the section {heading!r} this test runs"
    body = text[text.index(f"\n## {heading}\n"):]
    return body[:body.index("\n## ", 1)]


def first(pattern: str, text: str) -> str:
    """The first group of `pattern`'s first match in `text` (the page must have it)."""
    found = re.search(pattern, text, re.DOTALL)
    assert found is not None, f"the page no longer has {pattern!r}"
    return found[1]


def command(text: str, start: str) -> list[str]:
    """The words of the one `elicitron ...` code span (or code line) of `text` that begins `start`."""
    found = {match.strip() for match in re.findall(rf"`({re.escape(start)}[^`\n]*)`", text)}
    found |= {line.strip() for line in text.splitlines() if line.strip().startswith(start)}
    assert len(found) == 1, f"{start!r} on the page: {found}"
    return found.pop().split()


def proxy_recipe() -> str:
    """The shell block of docs/web.md's reverse-proxy section."""
    return first(r"```sh\n(.*?)```", section("web.md", PROXY_HEADING))


def caddyfile(recipe: str) -> str:
    """The Caddyfile the recipe shows in its comment, as a file would hold it."""
    lines = [line.lstrip("#") for line in recipe.splitlines() if line.startswith("#") and "Caddyfile:" in line
             or re.match(r"#\s{3,}\S", line)]
    return "\n".join(line.replace("Caddyfile:", "").strip() for line in lines)


def caddy_sites(caddyfile_text: str) -> dict[str, list[list[str]]]:
    """Caddyfile's site blocks (`ADDRESS { directive args... }`) as address -> directives."""
    sites: dict[str, list[list[str]]] = {}
    for address, body in re.findall(r"^(\S+)\s*\{\n(.*?)^\}", caddyfile_text, re.MULTILINE | re.DOTALL):
        sites[address] = [line.split() for line in body.splitlines() if line.strip()]
    return sites


def lines_starting(recipe: str, start: str) -> list[list[str]]:
    """The words of each line of `recipe` that begins `start` (`elicitron web`, `caddy run`)."""
    return [line.split("#")[0].split() for line in recipe.splitlines() if line.startswith(start)]
