"""A raw stdio MCP host (handshake era) for the soak: it starts `elicitron serve` with pipes, as
Claude Desktop or an IDE does, speaks JSON lines to it, and ends the session in one of the ways
hosts really do (close stdin, signal, close its read end first, close both, die).

The standard library only: `host_proc.py` (a host that is SIGKILLed) runs it in a bare process.
"""

import json
import os
import select
import signal
import subprocess
import tempfile
import time
from typing import IO, Any

HANDSHAKE_VERSION = "2025-11-25"


class HostError(RuntimeError):
    """serve answered something a host cannot go on with, or nothing in time."""


class StdioHost:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, name: str) -> None:
        self.name = name
        # read after it exits (a pipe could fill); closed in finish() or kill(), so no context manager
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=env, cwd=cwd)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in: IO[bytes] | None = self.proc.stdin
        self._out: IO[bytes] | None = self.proc.stdout
        self._buffer = b""
        self._ids = 0

    # ---- speaking --------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        assert self._in is not None
        self._in.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self._in.flush()

    def start_request(self, method: str, params: dict[str, Any]) -> int:
        self._ids += 1
        self.send({"id": self._ids, "method": method, "params": params})
        return self._ids

    def response(self, request_id: int, timeout_s: float = 30.0) -> dict[str, Any]:
        """The response to `request_id`; what else serve says on the way is read and dropped."""
        deadline = time.monotonic() + timeout_s
        while True:
            message = self._next_message(deadline)
            if message.get("id") == request_id and "method" not in message:
                return message

    def request(self, method: str, params: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
        return self.response(self.start_request(method, params), timeout_s)

    def open(self, timeout_s: float = 30.0) -> "StdioHost":
        answer = self.request("initialize", {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {},
                                             "clientInfo": {"name": self.name, "version": "1"}}, timeout_s)
        if "result" not in answer:
            raise HostError(f"initialize answered {answer}")
        self.send({"method": "notifications/initialized"})
        return self

    def call(self, tool: str, arguments: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
        answer = self.request("tools/call", {"name": tool, "arguments": arguments}, timeout_s)
        if "result" not in answer:
            raise HostError(f"tools/call {tool}: {answer}")
        result: dict[str, Any] = answer["result"]
        return result

    def _next_message(self, deadline: float) -> dict[str, Any]:
        assert self._out is not None
        fd = self._out.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise HostError("serve answered nothing in time")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise HostError("serve closed its stdout")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise HostError(f"serve sent {line[:200]!r}")
        return message

    # ---- ending ----------------------------------------------------------------------------

    def close_stdin(self) -> None:
        if self._in is not None:
            self._in.close()
            self._in = None

    def close_stdout(self) -> None:
        """Stop reading: the host's read end of serve's stdout closed."""
        if self._out is not None:
            self._out.close()
            self._out = None

    def signal(self, number: signal.Signals) -> None:
        self.proc.send_signal(number)

    def drain(self, deadline: float) -> None:
        """Read (and drop) what serve still writes until its stdout closes, as a host does."""
        if self._out is None:
            return
        fd = self._out.fileno()
        while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
            if not os.read(fd, 65536):
                return

    def finish(self, timeout_s: float) -> tuple[int | None, float, str]:
        """Wait for serve to exit: (exit code or None if it did not, seconds waited, its stderr).
        Whatever still runs after `timeout_s` is killed."""
        began = time.monotonic()
        self.drain(began + timeout_s)
        try:
            code: int | None = self.proc.wait(max(0.0, began + timeout_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
            self.proc.kill()
            self.proc.wait()
        waited = time.monotonic() - began
        self.close_stdin()
        self.close_stdout()
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        self.stderr.close()
        return code, waited, text

    def kill(self) -> None:
        """For cleanup on an error path."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.close_stdin()
        self.close_stdout()
        self.stderr.close()
