"""Start main in the background when none runs, the way `elicitron launch` does.

The gateway never imports main: it runs `python -m cli_process launch --no-window` (the same code
path as `elicitron launch`: a bad config fails there with its one-line error, main starts with
auto-open windows on, and a main that another gateway started at the same moment is used rather
than reported as a failure). That command's stderr is the gateway's, which the host logs; when
this environment has no display (a host that strips it), one line there says the windows cannot
open and what to do.
"""

import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from shared.errors import ConfigError, MainUnreachableError

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 90.0
_EXIT_USAGE = 2  # cli_process.command: usage or config error
NO_DISPLAY = ("elicitron serve: starting main, but its windows cannot open from this environment (no DISPLAY "
              "or WAYLAND_DISPLAY): run `elicitron launch` on your desktop first, or use the entry that "
              "`elicitron serve --print-config` prints in a desktop terminal (its \"env\" names your display)")


def can_open_windows(env: Mapping[str, str]) -> bool:
    """Whether the windows main opens (they inherit this environment) can reach a display: X11 and
    Wayland need DISPLAY or WAYLAND_DISPLAY; macOS and Windows need neither."""
    return sys.platform in ("darwin", "win32") or bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def start_main(connection: Path, config: Path | None) -> None:
    """Blocking: returns once a main answers on `connection`. Raises ConfigError for a bad config,
    MainUnreachableError when main could not be started."""
    argv = [sys.executable, "-m", "cli_process", "launch", "--no-window", "--connection", str(connection)]
    if config is not None:
        argv += ["--config", str(config.resolve())]
    logger.info("no main is running on %s: starting one", connection)
    if not can_open_windows(os.environ):
        print(NO_DISPLAY, file=sys.stderr, flush=True)
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, timeout=START_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        raise MainUnreachableError(f"main did not come up within {START_TIMEOUT_S:.0f} s") from None
    if done.returncode == _EXIT_USAGE:
        raise ConfigError(f"main could not start with config {config or '(default)'}: see the error above")
    if done.returncode != 0:
        raise MainUnreachableError(f"starting main failed (exit code {done.returncode}); see the error above")
