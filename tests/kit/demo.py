"""The demo MCP server (main_process/demo_server.py): its config entry, and running it over HTTP."""

import select
import subprocess
from typing import Any

from kit.env import child_env
from kit.paths import DEMO_SERVER, ROOT
from kit.procs import end_process
from kit.zygote import launched


def demo_stdio_entry(**extra: Any) -> dict[str, Any]:
    """The demo server over stdio as an `mcpServers` entry, with any Elicitron keys added."""
    return {**launched(DEMO_SERVER), **extra}  # forked by the test zygote (kit/zygote.py)


def start_http_demo(port: int = 0, timeout_s: float = 30.0) -> tuple["subprocess.Popen[bytes]", str]:
    """The demo server over streamable HTTP on loopback (`port` 0: any free one) and its URL, which
    it announces as its first stdout line `LISTENING <url>`."""
    entry = launched(DEMO_SERVER, "--http", "--port", str(port))  # forked by the test zygote
    proc = subprocess.Popen([entry["command"], *entry["args"]], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("LISTENING "):
        end_process(proc)
        proc.stdout.close()
        raise AssertionError(f"the HTTP demo server did not start: {line!r}")
    return proc, line.split()[1]
