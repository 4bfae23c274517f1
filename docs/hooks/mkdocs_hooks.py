"""mkdocs hooks (mkdocs.yml `hooks:`): the generated references go where a page asks for them, and
the pictures the tests take (tests/screenshots) are served as `screenshots/…` without a copy in docs/.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

HERE = Path(__file__).resolve().parent
SCREENSHOTS = HERE.parents[1] / "tests" / "screenshots"


def _reference() -> Any:
    spec = importlib.util.spec_from_file_location("elicitron_docs_reference", HERE / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_files(files: Files, config: Any) -> Files:
    for picture in sorted(SCREENSHOTS.glob("*.png")):
        files.append(File.generated(config, f"screenshots/{picture.name}", abs_src_path=str(picture)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    for marker, make in _reference().GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
