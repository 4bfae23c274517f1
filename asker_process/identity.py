"""Who asks, as the card shows it: "deploy.sh (pid 4242 on build-7) asks".

`elicitron ask` speaks for the program that ran it (its parent: the script, not the CLI), a
Python agent for itself. The name is the script a shell or interpreter runs, else the program's
own name; `--name` / `name=` overrides it.
"""

import os
import socket
import sys
from pathlib import Path

from shared.messages import AskerInfo

# Programs that run a script named by their first non-option argument.
_INTERPRETERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "env", "node", "perl", "ruby",
                           "python", "python3", "pwsh", "uv", "uvx"})
_FALLBACK_NAME = "elicitron ask"


def this_program(name: str | None = None) -> AskerInfo:
    """The asker for a Python program asking for itself."""
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c") else sys.executable
    return AskerInfo(name=name or Path(script).name or "python", pid=os.getpid(),
                     machine=socket.gethostname())


def parent_program(name: str | None = None) -> AskerInfo:
    """The asker for `elicitron ask`: the program that ran it."""
    parent = os.getppid()
    return AskerInfo(name=name or _process_name(parent) or _FALLBACK_NAME, pid=parent,
                     machine=socket.gethostname())


def _process_name(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None  # not Linux, or the parent is gone already
    return _script_name([arg.decode(errors="replace") for arg in raw.split(b"\0") if arg])


def _script_name(argv: list[str]) -> str | None:
    """'deploy.sh' for ['bash', './deploy.sh'] and ['./deploy.sh']; 'bash' for ['-bash'] or 'bash -c …'."""
    if not argv or not argv[0]:
        return None
    program = Path(argv[0].lstrip("-")).name or None
    base = (program or "").rstrip("0123456789.")  # python3.12 -> python
    if base not in _INTERPRETERS:
        return program
    for arg in argv[1:]:
        if arg in ("-c", "-e", "-m"):
            return program  # inline code or a module: the interpreter is all there is to name
        if arg.startswith(("/dev/fd/", "/proc/")):
            return program  # a script from a pipe has no name of its own
        if not arg.startswith("-") and "=" not in arg:  # `env VAR=1 script` skips the assignment
            return Path(arg).name or program
    return program
