"""The layout shows the design: one top-level package per kind of process, main depending on shared/
only, and no import cycles between the project's modules. Read from the source with `ast`
(nothing is imported, so this takes milliseconds)."""

import ast
import functools
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("shared", "main_process", "cli_process", "renderer_process", "gateway_process", "asker_process",
            "web_process")
PEERS_OF_MAIN = ("cli_process", "renderer_process", "gateway_process", "asker_process", "web_process")
# Cycles that only an import inside a function closes, each with why it stays. Such an import runs
# when the function is called, after both modules have finished loading, so it cannot meet a
# half-initialised module; the CLI's commands import what they need that way to start fast.
LAZY_CYCLES = {
    # resolve_connection_path asks the locator, which reads connection files; the locator is only
    # needed when no --connection or ELICITRON_CONNECTION names the file.
    frozenset({"shared.connection_file", "shared.locator"}),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


@functools.cache
def tree_of(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))  # once per file for all the tests here


def imports(tree: ast.AST, *, in_functions: bool) -> Iterator[tuple[int, str]]:
    """(line, module) for each import of `tree`: module level (class bodies and `if TYPE_CHECKING:`
    blocks included, which mypy follows), and inside functions too when `in_functions`. `from a
    import b` yields `a.b` as well as `a`: b may be a module."""
    pending = list(ast.iter_child_nodes(tree))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
        elif in_functions or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            # imports are statements: only blocks can hold one (expressions never do)
            pending += [child for child in ast.iter_child_nodes(node) if isinstance(child, _BLOCKS)]


def import_graph(*, in_functions: bool) -> dict[str, set[str]]:
    """Each project module -> the project modules it imports. A module that imports a package's
    submodules is not counted as importing the package's __init__ too (Python runs that first, and
    `from shared import messages` is an import of shared.messages)."""
    found = project_modules()
    graph = {}
    for name, path in found.items():
        names = {imported for _line, imported in imports(tree_of(path), in_functions=in_functions)}
        # `from a import b` with b a module is an import of a.b, not of a's __init__
        graph[name] = {i for i in names if i in found and i != name and not any(
            other.startswith(i + ".") and other in found for other in names)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_main_imports_none_of_its_peers_packages() -> None:
    offending = [f"{path.relative_to(ROOT)}:{line} imports {name}"
                 for module, path in project_modules().items() if module.split(".")[0] == "main_process"
                 for line, name in imports(tree_of(path), in_functions=True)
                 if name.split(".")[0] in PEERS_OF_MAIN + ("PySide6",)]
    assert offending == []


def test_the_web_window_imports_neither_qt_nor_main_nor_mcp() -> None:
    """A browser is a window like the Qt one, so the web window is a peer of main: it never loads
    the Qt window's code, main's internals or the MCP SDK (what both windows need is in shared/)."""
    refused = ("renderer_process", "main_process", "PySide6", "mcp", "gateway_process", "asker_process")
    offending = [f"{path.relative_to(ROOT)}:{line} imports {name}"
                 for module, path in project_modules().items() if module.split(".")[0] == "web_process"
                 for line, name in imports(tree_of(path), in_functions=True) if name.split(".")[0] in refused]
    assert offending == []


def test_no_module_level_import_cycles() -> None:
    assert cycles(import_graph(in_functions=False)) == []


def test_imports_inside_functions_close_only_the_cycles_that_say_why() -> None:
    assert set(cycles(import_graph(in_functions=True))) <= LAZY_CYCLES


def test_the_checks_see_what_they_look_for() -> None:
    """The checks above pass on an empty walk too: they must find a lazy import and a cycle."""
    source = "if True:\n    import shared.codec\ndef f():\n    from gateway_process.cli import run_serve\n"
    assert list(imports(ast.parse(source), in_functions=False)) == [(2, "shared.codec")]
    guarded = "try:\n    pass\nexcept ImportError:\n    import asker_process\n"
    assert list(imports(ast.parse(guarded), in_functions=False)) == [(4, "asker_process")]
    assert (4, "gateway_process.cli") in imports(ast.parse(source), in_functions=True)
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    graph = import_graph(in_functions=False)
    assert "main_process.config" in graph["main_process.app"]
    assert "shared.messages" in graph["renderer_process.card"]  # `from shared import messages`


def packages_on_disk() -> set[str]:
    """Every package and subpackage of the product (`shared`, `*_process`), dotted."""
    inits = [*ROOT.glob("*_process/**/__init__.py"), *ROOT.glob("shared/**/__init__.py")]
    return {str(init.parent.relative_to(ROOT)).replace("/", ".") for init in inits}


def test_every_package_is_in_the_wheel() -> None:
    """An installed elicitron has every package and subpackage (a new one missing from pyproject's
    list imports fine from a checkout and fails only once installed)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = packages_on_disk()
    assert on_disk - listed == set()


def readme_package_table() -> set[str]:
    """The packages the "Where things live" table names (its first column), on the site's
    architecture page (docs/architecture.md)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Where things live", 1)[1].split("\n#", 1)[0]
    return {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}


def test_the_readme_says_where_every_package_lives() -> None:
    """The architecture page's table lists every package and subpackage on disk, and none that is gone."""
    on_disk = packages_on_disk()
    listed = readme_package_table()
    assert {"main_process", "shared"} <= listed  # the table was read at all
    assert on_disk - listed == set(), "packages docs/architecture.md's table does not list"
    assert listed - on_disk == set(), "packages docs/architecture.md's table lists that are gone"
