"""The fork server behind kit/zygote.py: `python tests/kit/zygote_server.py SOCKET`.

It imports main's modules once (about 0.9 s of CPU: mcp's types are pydantic models built at
import), then forks a `python -m cli_process ARGS` for every request, or a `python SCRIPT ARGS`
(a test's MCP server, asked for by kit/server_launcher.py): the child takes the request's stdio
descriptors, working directory and environment, and runs as `-m` (or the script) would.
The parent tells the requester the child's pid, and its exit code when it ends. A request that is
`tied` (a launcher standing for its server) kills its child when the requester's socket closes
first: a launcher killed by main takes its server with it. Nothing here runs
threads, opens a zmq context or reads the environment at import, so a fork is as good as an exec
for what main does; tests whose subject is the start itself (the environment a host strips, an
installed package, descriptor limits) still exec.

Ends when its stdin closes (the test process is gone) or on SIGTERM.
"""

import atexit
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import traceback

MAX_REQUEST_BYTES = 1 << 20
EXIT = struct.Struct("!i")  # a child's Popen-style return code: -N for a signal


# What main imports by the time it is up (measured with -X importtime on a running main).
PRELOADED = ("anyio._backends._asyncio", "mcp.client.session", "mcp.client.stdio", "uuid6", "uvloop",
             "cli_process.cli", "cli_process.config_import", "gateway_process.cli", "main_process.app",
             "main_process.store.sqlite", "web_process.cli",
             "mcp.server.mcpserver")  # the tests' MCP servers (demo, probes)


def preload() -> None:
    for name in PRELOADED:
        importlib.import_module(name)


def run_child(request: dict[str, object], fds: list[int], closing: list[socket.socket], wakeup: tuple[int, int],
              selector: selectors.BaseSelector) -> None:
    """In the forked child: become `python -m cli_process ARGS` (or `python SCRIPT ARGS`), never return."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        selector.close()
        for sock in closing:
            sock.close()
        for fd in wakeup:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(str(request["cwd"]))
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update(env)
        args = request["args"]
        assert isinstance(args, list)
        script = request.get("script")
        if isinstance(script, str):  # as `python SCRIPT ARGS`: its folder first on the path
            sys.argv = [script, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
        else:
            sys.argv = ["-m", *args]  # runpy puts the module's path in argv[0]
            runpy.run_module("cli_process", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except BaseException:  # noqa: BLE001 (the child's top level: what python itself would print)
        traceback.print_exc()
        code = 1
    finally:
        atexit._run_exitfuncs()  # as python's own exit would (logging, thread pools); os._exit skips them
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def serve(path: str) -> None:
    preload()
    import threading

    if threading.active_count() != 1:  # a fork keeps only the forking thread: a child would miss the rest
        raise SystemExit(f"zygote: importing main started threads: {threading.enumerate()}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears of it
    children: dict[int, socket.socket] = {}
    tied: dict[socket.socket, int] = {}  # a launcher's socket -> its child, killed when it closes first

    def forget(conn: socket.socket) -> None:
        if tied.pop(conn, None) is not None:
            selector.unregister(conn)
        conn.close()

    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if isinstance(key.data, int):  # a tied requester's socket: closed means it is gone
                requester = key.fileobj
                assert isinstance(requester, socket.socket)
                try:
                    gone = not requester.recv(64)
                except OSError:
                    gone = True
                if gone:
                    try:
                        os.kill(key.data, signal.SIGKILL)  # reaped below, as any child
                    except ProcessLookupError:
                        pass
                    selector.unregister(requester)
                    tied.pop(requester, None)
            elif key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    return
            elif key.data == "child":
                while True:
                    try:
                        os.read(wake_r, 4096)
                    except BlockingIOError:
                        break
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    conn = children.pop(pid, None)
                    if conn is not None:
                        try:
                            conn.sendall(EXIT.pack(os.waitstatus_to_exitcode(status)))
                        except OSError:
                            pass
                        forget(conn)
            else:
                conn, _ = listener.accept()
                with_fds = socket.recv_fds(conn, MAX_REQUEST_BYTES, 3)
                raw, fds = with_fds[0], with_fds[1]
                request = json.loads(raw)
                pid = os.fork()
                if pid == 0:
                    run_child(request, fds, [listener, conn, *children.values()], (wake_r, wake_w), selector)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                try:
                    conn.sendall(EXIT.pack(pid))
                except OSError:  # the requester is gone already
                    os.kill(pid, signal.SIGKILL)
                    continue
                if request.get("tied"):
                    tied[conn] = pid
                    selector.register(conn, selectors.EVENT_READ, pid)


if __name__ == "__main__":
    sys.path[0] = os.environ.get("PYTHONPATH", sys.path[0])  # as `-m` from the project's root
    try:
        serve(sys.argv[1])
    except KeyboardInterrupt:
        pass
