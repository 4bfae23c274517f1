"""`python -m cli_process ARGS` started by a fork of a process that imported main already
(kit/zygote_server.py), as a Popen-like handle: what the suite's mains cost is then the test, not
0.9 s of CPU importing mcp's types for every one of them (the suite starts hundreds).

The child is a real process with its own pid, stdio, working directory and environment, talking
over real sockets; it is the zygote's child, so its exit code comes over the request's socket
rather than from waitpid. `ELICITRON_TEST_EXEC=1` turns it off (every main is exec'd as before).
"""

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO, Any, Self

from kit.env import child_env
from kit.paths import PYTHON, ROOT

_EXIT_BYTES = 4
_LAUNCHER = ROOT / "tests" / "kit" / "server_launcher.py"


class ZygoteProcess:
    """The subset of subprocess.Popen the kit and the tests use of a main."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int, stdout: IO[bytes] | None,
                 stderr: IO[bytes] | None) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self.stdin: IO[bytes] | None = None
        self.stdout = stdout
        self.stderr = stderr
        self._conn = conn
        self._got = b""

    def poll(self) -> int | None:
        return self._wait(0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._wait(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def _wait(self, timeout: float | None) -> int | None:
        while self.returncode is None:
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if not ready:
                return None
            chunk = self._conn.recv(_EXIT_BYTES - len(self._got))
            if not chunk:  # the zygote is gone: so is its child's status
                self.returncode = -signal.SIGKILL
                break
            self._got += chunk
            if len(self._got) == _EXIT_BYTES:
                self.returncode = int.from_bytes(self._got, "big", signed=True)
        if self.returncode is not None:
            self._conn.close()
        return self.returncode

    def communicate(self) -> tuple[str, str]:
        """Both pipes to their end (as text), then the exit: Popen(text=True).communicate()."""
        out: list[bytes] = []

        def read_stdout() -> None:
            assert self.stdout is not None
            out.append(self.stdout.read())

        reader = threading.Thread(target=read_stdout, daemon=True)
        reader.start()
        assert self.stderr is not None
        err = self.stderr.read()
        reader.join()
        self.stdout.close() if self.stdout is not None else None
        self.stderr.close()
        self.wait()
        return out[0].decode(), err.decode()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        for pipe in (self.stdout, self.stderr):
            if pipe is not None:
                pipe.close()
        self.wait()


class _Zygote:
    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="eli-zy-", dir="/tmp"))
        self.path = str(self._dir / "z.sock")
        self._proc = subprocess.Popen([PYTHON, str(ROOT / "tests" / "kit" / "zygote_server.py"), self.path],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env(), cwd=ROOT)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"the test zygote did not start: {line!r}")
        atexit.register(self.close)

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for leftover in self._dir.iterdir():
            leftover.unlink()
        self._dir.rmdir()

    def spawn(self, args: list[str], env: dict[str, str], cwd: Path, *, stdout_pipe: bool,
              stderr_pipe: bool) -> ZygoteProcess:
        devnull = os.open(os.devnull, os.O_RDWR)
        out_read, out_write = os.pipe() if stdout_pipe else (-1, devnull)
        read_end, write_end = os.pipe() if stderr_pipe else (-1, devnull)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            request = json.dumps({"args": args, "env": env, "cwd": str(cwd)}).encode()
            socket.send_fds(conn, [request], [devnull, out_write, write_end])
        finally:
            for fd in {devnull, out_write, write_end}:
                os.close(fd)
        got = b""
        while len(got) < _EXIT_BYTES:
            chunk = conn.recv(_EXIT_BYTES - len(got))
            if not chunk:
                raise RuntimeError("the test zygote closed the request without a pid")
            got += chunk
        return ZygoteProcess([PYTHON, "-m", "cli_process", *args], conn, int.from_bytes(got, "big", signed=True),
                             os.fdopen(out_read, "rb") if stdout_pipe else None,
                             os.fdopen(read_end, "rb") if stderr_pipe else None)


_zygote: _Zygote | None = None
_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get("ELICITRON_TEST_EXEC") != "1"


def _started() -> _Zygote:
    global _zygote
    with _lock:
        if _zygote is None:
            _zygote = _Zygote()
        return _zygote


def launched(script: Path, *args: str) -> dict[str, Any]:
    """A config entry's `command` and `args` that run `python SCRIPT ARGS` as a stdio MCP server:
    forked from this process's zygote through kit/server_launcher.py, or exec'd when the zygote is
    off. For tests whose subject is not how main starts a server process."""
    if not enabled():
        return {"command": PYTHON, "args": [str(script), *args]}
    return {"command": PYTHON, "args": ["-I", "-S", str(_LAUNCHER), _started().path, str(script), *args]}


def launched_cli(*args: str) -> list[str]:
    """The command line that runs `python -m cli_process ARGS` for a host (`elicitron serve` as its
    config starts it): through kit/server_launcher.py, forked from this process's zygote, or exec'd
    when the zygote is off. For tests whose subject is not how serve itself starts."""
    if not enabled():
        return [PYTHON, "-m", "cli_process", *args]
    return [PYTHON, "-I", "-S", str(_LAUNCHER), _started().path, "-m", "cli_process", *args]


def spawn_cli(args: list[str], env: dict[str, str], *, cwd: Path = ROOT, stdout_pipe: bool = False,
              stderr_pipe: bool = True) -> Any:
    """`python -m cli_process ARGS` with stdin on /dev/null, stdout and stderr pipes or /dev/null,
    forked from this process's zygote (started on first use)."""
    return _started().spawn(args, env, cwd, stdout_pipe=stdout_pipe, stderr_pipe=stderr_pipe)
