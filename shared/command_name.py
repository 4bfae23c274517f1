"""How to type the `elicitron` command where the user is, for messages that tell them to run it.

After `scripts/launch` in a checkout, nothing named `elicitron` is on PATH: the command is
`.venv/bin/elicitron`. A message saying "run `elicitron main`" then sends the user looking. So a
message names `elicitron` only when that name on PATH is this very install; otherwise this install's
script (relative to the current directory when it lies below it), or, with no script at all (a
checkout run as `python -m cli_process`), the module through this interpreter.
"""

import os
import shlex
import shutil
import sys
from pathlib import Path


def elicitron_command(path: str | None = None, cwd: Path | None = None) -> str:
    """`elicitron`, `.venv/bin/elicitron`, `/abs/bin/elicitron` or `/abs/python -m cli_process`:
    what runs this install's command from `cwd` (default: the current directory) with `path`
    (default: $PATH)."""
    script = Path(sys.executable).parent / "elicitron"
    on_path = shutil.which("elicitron", path=path)
    if not script.is_file():
        return "elicitron" if on_path else f"{shlex.quote(sys.executable)} -m cli_process"
    if on_path is not None and _same_file(on_path, script):
        return "elicitron"
    where = Path(os.path.abspath(script))
    try:
        shown = str(where.relative_to(Path(os.path.abspath(cwd or Path.cwd()))))
    except ValueError:
        shown = str(where)
    if "/" not in shown:  # a bare name would be looked up on PATH, not here
        shown = f"./{shown}"
    return shlex.quote(shown)


def _same_file(a: str | Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
