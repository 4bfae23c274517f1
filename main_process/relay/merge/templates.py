"""Resource templates the servers list: which one a URI matches, and which of several is the more
specific (RFC 6570, with mcp's matcher loaded on its own: serve never loads all of mcp)."""

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(eq=False)
class Template:
    text: str
    server: str
    specificity: tuple[int, int]
    parsed: Any = None
    invalid: bool = False

    def matches(self, uri: str) -> bool:
        if self.invalid:
            return False
        if self.parsed is None:
            template_class, invalid = _uri_templates()
            try:
                self.parsed = template_class.parse(self.text)
            except (invalid, ValueError):
                self.invalid = True
                return False
        return self.parsed.match(uri) is not None


_EXPRESSION = re.compile(r"\{[^}]*\}")


def specificity(template: str) -> tuple[int, int]:
    """More literal characters, then fewer variables: the more specific template."""
    return len(_EXPRESSION.sub("", template)), -len(_EXPRESSION.findall(template))


_URI_TEMPLATE: ModuleType | None = None


def _uri_templates() -> tuple[Any, type[Exception]]:
    """mcp's RFC 6570 matcher (mcp.shared.uri_template), without loading all of mcp for it (that
    takes seconds, and serve starts in a fraction of one): the module imports only the stdlib."""
    global _URI_TEMPLATE
    module = sys.modules.get("mcp.shared.uri_template") or _URI_TEMPLATE
    if module is None:
        spec = importlib.util.find_spec("mcp")
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        path = Path(locations[0]) / "shared" / "uri_template.py" if locations else None
        loaded = importlib.util.spec_from_file_location("_elicitron_uri_template", path) if path else None
        if loaded is None or loaded.loader is None:
            module = importlib.import_module("mcp.shared.uri_template")
        else:
            module = importlib.util.module_from_spec(loaded)
            sys.modules[loaded.name] = module  # dataclasses look their module up while the class is made
            loaded.loader.exec_module(module)
        _URI_TEMPLATE = module
    return module.UriTemplate, module.InvalidUriTemplate
