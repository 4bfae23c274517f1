"""Which asyncio event loop main and `elicitron serve` run on.

They run on uvloop (libuv's loop, written in Cython) wherever it is installed, which is every
platform but Windows: their work per message is mostly event-loop work (pipes, task wake-ups,
timers), and uvloop does it with less CPU and latency per message than the standard library's loop
(`scripts/bench --only e2e` compares main and the bare relay on each; `--only gateway` a relayed
host's calls). Behaviour is the same; `elicitron status` names the loop main runs on.

`ELICITRON_LOOP=asyncio` picks the standard library's loop instead, e.g. to rule uvloop out when
reporting a bug; `ELICITRON_LOOP=uvloop` insists on uvloop. Any other value is a config error, said
before main starts.
"""

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Final

from shared.errors import ConfigError

LOOP_ENV: Final = "ELICITRON_LOOP"
CHOICES: Final = ("uvloop", "asyncio")


def loop_factory(environ: Mapping[str, str] | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory `asyncio.run` should use; None means the standard library's loop."""
    wanted = (os.environ if environ is None else environ).get(LOOP_ENV, "").strip().lower()
    if wanted not in ("", *CHOICES):
        raise ConfigError(f"{LOOP_ENV} must be one of {', '.join(CHOICES)}, not {wanted!r}")
    if wanted == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as exc:
        if wanted == "uvloop":
            raise ConfigError(f"{LOOP_ENV}=uvloop, but uvloop is not installed ({exc})") from exc
        return None  # e.g. Windows, where uvloop does not exist
    return uvloop.new_event_loop


def describe(loop: asyncio.AbstractEventLoop) -> str:
    """"uvloop 0.23.0" or "asyncio": what `elicitron status` shows."""
    if type(loop).__module__.split(".")[0] == "uvloop":
        import uvloop

        return f"uvloop {uvloop.__version__}"
    return "asyncio"
