"""A session's tasks: a host's `tools/call` that waits on its approval card, answered with a task
(issue 36, item 4), so the host's request timeout no longer races the person deciding on the card.
Two forms of MCP tasks:

- 2025-11-25 (the TypeScript SDK's `client.experimental.tasks`): the host asks for a task with
  `params.task`; it gets one at once (`working`, "waiting for approval on <machine>"), and the call
  goes on in main under the task's own request id. `tasks/result` answers once the task is done
  (waiting for it until then);
- 2026-07-28 (SEP-2663, the `io.modelcontextprotocol/tasks` extension): the host declares the
  extension in its request's capabilities and main decides: a call still waiting on its card after
  `waitTaskSeconds` gets a task (`resultType: "task"`); `tasks/get` carries the result once done.

Either way the answer (the server's result, or the denial) completes the task; `tasks/get` reports
it and `tasks/cancel` withdraws the card (or cancels the call at the server). The task is `working`
while the card waits, not `input_required`: the spec keeps that for input the host itself provides.

Bounded: at most `cap` unfinished tasks a session (past it a clear error, and the call is not made);
each task is kept for its ttl (the host's, at most `max_ttl_s`) from creation, then forgotten.
"""

import itertools
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from main_process.clock import Clock, Timer
from shared import jsonrpc
from shared.errors import RpcCode

CAP: Final = 32  # unfinished tasks a session may hold
MAX_TTL_S: Final = 3600.0
POLL_INTERVAL_MS: Final = 1000
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/list", "tasks/update"})
EXTENSION: Final = "io.modelcontextprotocol/tasks"
CAPABILITY: Final[dict[str, Any]] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}  # initialize's `tasks`
_RELATED: Final = "io.modelcontextprotocol/related-task"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


@dataclass(eq=False)
class _Task:
    task_id: str
    call_id: jsonrpc.Id  # the request id the call goes on with in main and at the server
    created: str
    ttl_ms: int
    modern: bool  # 2026-07-28's form (ttlMs, the result inline) rather than 2025-11-25's
    status: str = "working"
    message: str = ""
    updated: str = ""
    answer: bytes | None = None  # the call's final response, with the call's id; sent as tasks/result's
    waiting: list[jsonrpc.Id] = field(default_factory=list)  # tasks/result requests waiting on it
    expiry: Timer | None = None

    def shown(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"taskId": self.task_id, "status": self.status, "createdAt": self.created,
                                 "lastUpdatedAt": self.updated or self.created}
        if self.modern:
            shown.update(ttlMs=self.ttl_ms, pollIntervalMs=POLL_INTERVAL_MS)
        else:
            shown.update(ttl=self.ttl_ms, pollInterval=POLL_INTERVAL_MS)
        if self.message:
            shown["statusMessage"] = self.message
        return shown

    def detailed(self) -> dict[str, Any]:
        """2026-07-28's tasks/get result: the task, with its result or error once it has one."""
        detailed = {**self.shown(), "resultType": "complete"}
        if self.answer is not None:
            message = jsonrpc.strict_object(self.answer)
            if self.status == "completed" and isinstance(message.get("result"), dict):
                detailed["result"] = {**message["result"], "resultType": "complete"}
            elif self.status == "failed" and isinstance(message.get("error"), dict):
                detailed["error"] = message["error"]
        return detailed


class HostTasks:
    """One session's tasks. `send` writes to the host; `cancel_call(call_id)` withdraws the call's
    card or cancels it at the server; `wall` is the wall clock for the timestamps the host sees."""

    def __init__(self, clock: Clock, waiting_message: str, send: Callable[[bytes], None],
                 cancel_call: Callable[[jsonrpc.Id], None], *, cap: int = CAP, max_ttl_s: float = MAX_TTL_S,
                 after_s: float = 10.0, wall: Callable[[], float] | None = None) -> None:
        """`after_s`: how long a 2026-07-28 call waits on its card before main makes it a task."""
        self._clock = clock
        self._waiting_message = waiting_message
        self._send = send
        self._cancel_call = cancel_call  # (the call's request id)
        self._cap = cap
        self.after_s = after_s
        self._max_ttl_s = max_ttl_s
        self._wall = wall or (lambda: datetime.now(UTC).timestamp())
        self._tasks: dict[str, _Task] = {}
        self._by_call: dict[jsonrpc.Id, _Task] = {}
        self._ids = itertools.count(1)

    @staticmethod
    def requested(params: dict[str, Any]) -> dict[str, Any] | None:
        """The host's `params.task` when the call is task-augmented."""
        task = params.get("task")
        return task if isinstance(task, dict) else None

    def create(self, request_id: jsonrpc.Id, requested: dict[str, Any]) -> str | None:
        """Answer the host's call with a new task; the call id it goes on with, or None when the
        session holds `cap` unfinished tasks already (the host got the error)."""
        if self.full():
            self._send(jsonrpc.error_response(
                request_id, RpcCode.INVALID_REQUEST,
                f"Too many tasks: this session has {self._cap} unfinished tasks; wait for one to finish "
                f"or cancel one (tasks/cancel) first. The call was not made."))
            return None
        ttl = requested.get("ttl")
        ttl_s = min(ttl / 1000, self._max_ttl_s) if isinstance(ttl, int) and ttl > 0 else self._max_ttl_s
        call_id = f"elicitron-task-{next(self._ids)}"
        task = self._new(call_id, ttl_s, modern=False)
        self._send(jsonrpc.response(request_id, {"task": task.shown()}))
        return call_id

    def full(self) -> bool:
        return sum(task.status not in TERMINAL for task in self._tasks.values()) >= self._cap

    def adopt(self, request_id: jsonrpc.Id) -> bool:
        """2026-07-28: the host's call, still waiting on its card, becomes a task (the host gets it
        now, the call goes on under its own id); False when the session holds `cap` unfinished tasks
        (the call just keeps waiting)."""
        if self.full():
            return False
        task = self._new(request_id, self._max_ttl_s, modern=True)
        self._send(jsonrpc.response(request_id, {**task.shown(), "resultType": "task"}))
        return True

    def later(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        return self._clock.call_later(delay_s, callback)

    def _new(self, call_id: jsonrpc.Id, ttl_s: float, *, modern: bool) -> _Task:
        task = _Task(task_id=secrets.token_hex(8), call_id=call_id, created=_iso(self._wall()),
                     ttl_ms=int(ttl_s * 1000), modern=modern, message=self._waiting_message)
        task.expiry = self._clock.call_later(ttl_s, self._expire, task)
        self._tasks[task.task_id] = task
        self._by_call[task.call_id] = task
        return task

    def owns(self, call_id: jsonrpc.Id) -> bool:
        return call_id in self._by_call

    def finished(self, call_id: jsonrpc.Id, answer: bytes) -> None:
        """The call's response (a result or an error, with `call_id` as its id) completes its task."""
        task = self._by_call.pop(call_id, None)
        if task is None or task.status in TERMINAL:
            return
        envelope = jsonrpc.peek(answer)
        task.answer = answer
        task.status = "failed" if envelope.error is not msgspec.UNSET else "completed"
        task.message = ""
        task.updated = _iso(self._wall())
        waiting, task.waiting = task.waiting, []
        for request_id in waiting:
            self._send(self._payload(task, request_id))

    def handle(self, request_id: jsonrpc.Id, method: str, params: dict[str, Any]) -> bool:
        """A host's tasks/* request about main's tasks, answered here; False when it is not about
        one of them (a task the server made itself, say): it goes on to the server."""
        if method == "tasks/list":
            if not self._tasks:
                return False
            self._send(jsonrpc.response(request_id, {"tasks": [task.shown() for task in self._tasks.values()]}))
            return True
        task_id = params.get("taskId")
        task = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            return False
        if method == "tasks/update":  # main's tasks never ask the host for input
            self._send(jsonrpc.error_response(request_id, RpcCode.INVALID_PARAMS,
                                              f"Invalid params: task {task.task_id} needs no input from the host"))
        elif method == "tasks/get":
            self._send(jsonrpc.response(request_id, task.detailed() if task.modern else task.shown()))
        elif method == "tasks/result":
            if task.status in TERMINAL:
                self._send(self._payload(task, request_id))
            else:
                task.waiting.append(request_id)
        elif task.status in TERMINAL:  # tasks/cancel
            self._send(jsonrpc.error_response(request_id, RpcCode.INVALID_PARAMS,
                                              f"Invalid params: task {task.task_id} is {task.status} already"))
        else:
            self._by_call.pop(task.call_id, None)
            task.status, task.message, task.updated = "cancelled", "cancelled by the host", _iso(self._wall())
            self._cancel_call(task.call_id)
            self._send(jsonrpc.response(request_id, task.detailed() if task.modern else task.shown()))
            waiting, task.waiting = task.waiting, []
            for waiter in waiting:
                self._send(self._payload(task, waiter))
        return True

    def close(self) -> None:
        for task in self._tasks.values():
            if task.expiry is not None:
                task.expiry.cancel()
        self._tasks.clear()
        self._by_call.clear()

    def _payload(self, task: _Task, request_id: jsonrpc.Id) -> bytes:
        """tasks/result's answer: the call's own result (or error), tagged with its task."""
        if task.status == "cancelled" or task.answer is None:
            return jsonrpc.error_response(request_id, RpcCode.INVALID_REQUEST,
                                          f"Task {task.task_id} was cancelled; it has no result")
        message = jsonrpc.strict_object(task.answer)
        message["id"] = request_id
        result = message.get("result")
        if isinstance(result, dict):
            meta = result.get("_meta")
            result["_meta"] = {**(meta if isinstance(meta, dict) else {}), _RELATED: {"taskId": task.task_id}}
        return jsonrpc.encode(message)

    def _expire(self, task: _Task) -> None:
        if self._tasks.get(task.task_id) is not task:
            return
        del self._tasks[task.task_id]
        if self._by_call.pop(task.call_id, None) is not None:  # unfinished: nobody will ask for its result
            self._cancel_call(task.call_id)
        for request_id in task.waiting:
            self._send(jsonrpc.error_response(request_id, RpcCode.INVALID_REQUEST,
                                              f"Task {task.task_id} expired (its ttl passed) before it finished"))

