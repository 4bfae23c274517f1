"""A host in a process of its own, for the soak's "the host is SIGKILLed" row:

    python host_proc.py NAME TOOL_PREFIX [--in-flight] -- SERVE_ARGV...

It starts serve (stdio_host.py), opens the session (and with `--in-flight` leaves a `hang` call
open), prints `READY <serve's pid>` and waits to be killed. Its pipes to serve close when it dies,
as a host's do; nothing of it says goodbye.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from soaklib.stdio_host import StdioHost


def main() -> None:
    split = sys.argv.index("--")
    name, prefix, *flags = sys.argv[1:split]
    host = StdioHost(sys.argv[split + 1:], dict(os.environ), os.getcwd(), name).open()
    if "--in-flight" in flags:
        host.start_request("tools/call", {"name": f"{prefix}hang", "arguments": {}})
    host.call(f"{prefix}echo", {"text": name})  # answered after the hang reached main: it is in flight
    print(f"READY {host.proc.pid}", flush=True)
    sys.stdin.read()  # until killed (or the soak goes away)


if __name__ == "__main__":
    main()
