"""A test's stdio MCP server, forked by the test zygote rather than exec'd:
`python -I -S tests/kit/server_launcher.py ZYGOTE_SOCKET SCRIPT [ARGS...]` (kit/zygote.py's
`launched`). main starts this as it starts any server; it hands its stdin, stdout and stderr, its
environment (the stripped one a host gives) and working directory to the zygote, which forks a
child that runs SCRIPT as `python SCRIPT ARGS` would, on those pipes (or, with `-m cli_process ARGS`
in place of SCRIPT, an `elicitron` command: `serve` as a host starts it). What each start costs is
then the test, not a second of CPU importing mcp for every server (the suite starts hundreds).

This process stands for the server: signals main sends it are passed on, it exits as the server
exits (the same code, or killed by the same signal), and if it is killed the zygote kills the
server (the request's socket closes). Only the standard library, and no site (-S): it starts in
milliseconds.
"""

import json
import os
import signal
import socket
import struct
import sys

_CODE = struct.Struct("!i")
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _read_code(conn: socket.socket) -> int | None:
    got = b""
    while len(got) < _CODE.size:
        chunk = conn.recv(_CODE.size - len(got))  # a forwarded signal's handler runs; recv goes on (PEP 475)
        if not chunk:
            return None
        got += chunk
    return int(_CODE.unpack(got)[0])


def main() -> None:
    zygote, script, *args = sys.argv[1:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(zygote)
    if script == "-m":  # `-m cli_process ARGS`: an `elicitron` command (serve, as a host starts it)
        module, *args = args
        assert module == "cli_process", f"the zygote runs cli_process only, not {module}"
    request = {"script": None if script == "-m" else script, "args": args, "env": dict(os.environ),
               "cwd": os.getcwd(), "tied": True}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the pipes are the server's now: their end of file is its exit
        os.dup2(devnull, fd)
    pid = _read_code(conn)
    if pid is None:
        os._exit(1)
    for sig in _FORWARDED:
        signal.signal(sig, lambda received, _frame: os.kill(pid, received))
    code = _read_code(conn)
    if code is None:
        os._exit(1)  # the zygote is gone, and with it the server's status
    if code < 0:  # killed by a signal: so is this process, as main would see of the server
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main()
