"""The layout shows the design: one top-level package per kind of process, main depending on shared/
only. Read from the source with `ast` (nothing is imported, so this takes milliseconds)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("shared", "main_process", "cli_process", "renderer_process", "gateway_process", "asker_process")
PEERS_OF_MAIN = ("cli_process", "renderer_process", "gateway_process", "asker_process")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str) -> dict[str, Path]:
    return {module_name(path): path for path in sorted((ROOT / package).rglob("*.py"))}


def imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) for every import anywhere in `tree`, function bodies included; `from a import b`
    names both `a` and `a.b` (b may be a module)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def test_main_imports_none_of_its_peers_packages() -> None:
    offending = [f"{path.relative_to(ROOT)}:{line} imports {name}"
                 for path in modules("main_process").values()
                 for line, name in imported_names(ast.parse(path.read_text(encoding="utf-8")))
                 if name.split(".")[0] in PEERS_OF_MAIN + ("PySide6",)]
    assert offending == []


def test_the_walk_sees_imports_inside_functions() -> None:
    """The check above would pass on an empty walk: it must find a lazy import like cli_process's."""
    source = "def f():\n    from gateway_process.cli import run_serve\n"
    assert (2, "gateway_process.cli") in imported_names(ast.parse(source))
    assert "main_process.app" in modules("main_process")
