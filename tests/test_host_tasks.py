"""A session's tasks (main_process/relay/host_tasks.py), in-process on a settable clock: what a
host's task requests get back, the cap, the ttl, and tasks/cancel."""

import json
from typing import Any

from main_process.clock import SettableClock
from main_process.relay.host_tasks import HostTasks
from shared import jsonrpc


class Host:
    """What the host was sent, and which calls were withdrawn."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.withdrawn: list[jsonrpc.Id] = []

    def send(self, raw: bytes) -> None:
        self.sent.append(json.loads(raw))

    def last(self) -> dict[str, Any]:
        return self.sent[-1]


def tasks(clock: SettableClock, host: Host, cap: int = 32, max_ttl_s: float = 3600.0) -> HostTasks:
    return HostTasks(clock, "waiting for approval on desk", host.send, host.withdrawn.append, cap=cap,
                     max_ttl_s=max_ttl_s, wall=lambda: 1_800_000_000.0)


def created(host_tasks: HostTasks, host: Host, request_id: int, ttl: int | None = None) -> tuple[str, str]:
    call_id = host_tasks.create(request_id, {} if ttl is None else {"ttl": ttl})
    assert call_id is not None
    return call_id, host.last()["result"]["task"]["taskId"]


def test_a_call_gets_a_working_task_at_once_and_tasks_get_reports_it_waiting_for_approval() -> None:
    clock, host = SettableClock(), Host()
    host_tasks = tasks(clock, host)
    call_id, task_id = created(host_tasks, host, 7, ttl=60_000)
    assert host.last()["id"] == 7
    task = host.last()["result"]["task"]
    assert (task["status"], task["statusMessage"], task["ttl"]) == ("working", "waiting for approval on desk", 60_000)
    assert task["createdAt"] == "2027-01-15T08:00:00Z"
    assert host_tasks.owns(call_id) and not host_tasks.owns(7)
    host_tasks.handle(8, "tasks/get", {"taskId": task_id})
    assert host.last()["id"] == 8 and host.last()["result"]["status"] == "working"


def test_tasks_result_waits_for_the_answer_then_gets_the_calls_result_with_its_task() -> None:
    clock, host = SettableClock(), Host()
    host_tasks = tasks(clock, host)
    call_id, task_id = created(host_tasks, host, 1)
    host_tasks.handle(2, "tasks/result", {"taskId": task_id})
    assert len(host.sent) == 1  # it waits
    host_tasks.finished(call_id, jsonrpc.response(call_id, {"content": [{"type": "text", "text": "done"}]}))
    answer = host.last()
    assert answer["id"] == 2 and answer["result"]["content"] == [{"type": "text", "text": "done"}]
    assert answer["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    host_tasks.handle(3, "tasks/get", {"taskId": task_id})
    assert host.last()["result"]["status"] == "completed" and "statusMessage" not in host.last()["result"]
    host_tasks.handle(4, "tasks/result", {"taskId": task_id})  # once done: at once
    assert host.last()["id"] == 4 and host.last()["result"]["content"][0]["text"] == "done"


def test_a_call_that_failed_fails_its_task_and_tasks_result_gets_the_error() -> None:
    clock, host = SettableClock(), Host()
    host_tasks = tasks(clock, host)
    call_id, task_id = created(host_tasks, host, 1)
    host_tasks.finished(call_id, jsonrpc.error_response(call_id, -32000, "the server is not running"))
    host_tasks.handle(2, "tasks/get", {"taskId": task_id})
    assert host.last()["result"]["status"] == "failed"
    host_tasks.handle(3, "tasks/result", {"taskId": task_id})
    assert host.last() == {"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": "the server is not running"}}


def test_past_the_cap_a_call_gets_a_clear_error_and_is_not_made() -> None:
    clock, host = SettableClock(), Host()
    host_tasks = tasks(clock, host, cap=2)
    first, _ = created(host_tasks, host, 1)
    created(host_tasks, host, 2)
    assert host_tasks.create(3, {}) is None
    assert host.last()["id"] == 3 and "Too many tasks" in host.last()["error"]["message"]
    assert "not made" in host.last()["error"]["message"]
    host_tasks.finished(first, jsonrpc.response(first, {"content": []}))  # a finished one frees its place
    assert host_tasks.create(4, {}) is not None


def test_tasks_cancel_withdraws_the_call_and_a_late_answer_changes_nothing() -> None:
    clock, host = SettableClock(), Host()
    host_tasks = tasks(clock, host)
    call_id, task_id = created(host_tasks, host, 1)
    host_tasks.handle(2, "tasks/result", {"taskId": task_id})
    host_tasks.handle(3, "tasks/cancel", {"taskId": task_id})
    assert host.withdrawn == [call_id]
    replies = {message["id"]: message for message in host.sent[1:]}
    assert replies[3]["result"]["status"] == "cancelled"
    assert "cancelled" in replies[2]["error"]["message"]  # the waiting tasks/result is answered too
    assert not host_tasks.owns(call_id)
    host_tasks.finished(call_id, jsonrpc.response(call_id, {"content": []}))
    host_tasks.handle(4, "tasks/get", {"taskId": task_id})
    assert host.last()["result"]["status"] == "cancelled"
    host_tasks.handle(5, "tasks/cancel", {"taskId": task_id})
    assert "cancelled already" in host.last()["error"]["message"]


def test_a_task_is_forgotten_when_its_ttl_passes_and_an_unfinished_one_is_withdrawn() -> None:
    clock, host = SettableClock(), Host()
    host_tasks = tasks(clock, host, max_ttl_s=600.0)
    call_id, task_id = created(host_tasks, host, 1, ttl=10_000_000)  # asks for more than allowed
    assert host.last()["result"]["task"]["ttl"] == 600_000
    host_tasks.handle(2, "tasks/result", {"taskId": task_id})
    clock.advance(599.0)
    assert host.withdrawn == []
    clock.advance(1.0)
    assert host.withdrawn == [call_id]
    assert host.last()["id"] == 2 and "expired" in host.last()["error"]["message"]
    assert not host_tasks.handle(3, "tasks/get", {"taskId": task_id})  # forgotten: the server's to answer


def test_requests_about_tasks_main_does_not_hold_go_on_to_the_server_and_tasks_list() -> None:
    clock, host = SettableClock(), Host()
    host_tasks = tasks(clock, host)
    assert not host_tasks.handle(1, "tasks/get", {"taskId": "the-servers-own"})
    assert not host_tasks.handle(1, "tasks/list", {})
    assert host.sent == []
    _, task_id = created(host_tasks, host, 2)
    assert host_tasks.handle(9, "tasks/update", {"taskId": task_id, "inputResponses": {}})
    assert "needs no input" in host.last()["error"]["message"]
    host_tasks.handle(3, "tasks/list", {})
    assert [task["taskId"] for task in host.last()["result"]["tasks"]] == [task_id]
    host_tasks.close()
    clock.advance(4000.0)
    assert host.withdrawn == []


def test_a_2026_call_adopted_as_a_task_gets_the_sep_2663_shape_and_tasks_get_carries_its_result() -> None:
    clock, host = SettableClock(), Host()
    host_tasks = tasks(clock, host, cap=1)
    assert host_tasks.adopt(11)
    handle = host.last()
    assert handle["id"] == 11 and handle["result"]["resultType"] == "task"
    assert (handle["result"]["status"], handle["result"]["statusMessage"]) == ("working", "waiting for approval on desk")
    assert "ttlMs" in handle["result"] and "pollIntervalMs" in handle["result"] and "ttl" not in handle["result"]
    task_id = handle["result"]["taskId"]
    assert not host_tasks.adopt(12)  # past the cap: that call just keeps waiting
    assert len(host.sent) == 1
    host_tasks.handle(13, "tasks/get", {"taskId": task_id})
    assert host.last()["result"]["status"] == "working" and "result" not in host.last()["result"]
    host_tasks.finished(11, jsonrpc.response(11, {"content": [{"type": "text", "text": "ok"}], "resultType": "complete"}))
    host_tasks.handle(14, "tasks/get", {"taskId": task_id})
    done = host.last()["result"]
    assert (done["status"], done["resultType"]) == ("completed", "complete")
    assert done["result"]["content"] == [{"type": "text", "text": "ok"}]
