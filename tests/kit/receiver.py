"""WebhookReceiver: a real HTTP server on 127.0.0.1 (stdlib, its own thread) that keeps every
request it gets and answers each with the status the test chose, for main's `notify` webhooks.

    with WebhookReceiver() as receiver:          # receiver.url: http://127.0.0.1:PORT/hook
        ...
        posts = receiver.wait_for(1)             # the first POST (method, path, headers, body)
    receiver.answer_with(500)                    # from now on every request gets 500
    receiver.hold()                              # requests wait (a receiver that never answers)
    receiver.release()                           # ... until released
"""

import http.server
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Self


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        """Everything a receiver got, headers and body, for "this never appears" checks."""
        head = "\n".join(f"{name}: {value}" for name, value in self.headers.items())
        return f"{self.method} {self.path}\n{head}\n\n{self.body.decode('utf-8', 'replace')}"


class WebhookReceiver:
    def __init__(self, path: str = "/hook") -> None:
        self._path = path
        self._lock = threading.Condition()
        self._received: list[Received] = []
        self._status = 200
        self._extra_headers: dict[str, str] = {}
        self._released = threading.Event()
        self._released.set()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                receiver._keep(Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                receiver._released.wait(60)
                status, extra = receiver._answer()
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self._path}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def answer_with(self, status: int, **headers: str) -> None:
        with self._lock:
            self._status, self._extra_headers = status, headers

    def hold(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def _answer(self) -> tuple[int, dict[str, str]]:
        with self._lock:
            return self._status, dict(self._extra_headers)

    def _keep(self, received: Received) -> None:
        with self._lock:
            self._received.append(received)
            self._lock.notify_all()

    @property
    def received(self) -> list[Received]:
        with self._lock:
            return list(self._received)

    def wait_for(self, count: int, timeout_s: float = 30.0) -> list[Received]:
        """The first `count` requests, once they arrived; fails after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while len(self._received) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"the receiver got {len(self._received)} requests, not {count}, in {timeout_s} s"
                self._lock.wait(left)
            return list(self._received[:count])
