"""A relayed session's tasks in process (main_process/relay/relay.py with host_tasks.py), on a
settable clock: a 2025-11-25 host that asks for a task, a 2026-07-28 host that declared the tasks
extension and gets one past the threshold, tasks/cancel, and tasks main does not hold."""

import json
from collections.abc import Callable
from typing import Any

from test_long_waits import setup
from test_relay_core import MODERN, Ports, decoded, req, resp, session

from main_process.clock import SettableClock
from main_process.relay.host_tasks import HostTasks
from main_process.relay.relay import RelaySession
from shared import jsonrpc
from shared.messages import ChannelReply

AFTER_S = 10.0
MODERN_TASKS = {**MODERN, "io.modelcontextprotocol/clientCapabilities": {
    "extensions": {"io.modelcontextprotocol/tasks": {}}}}


def with_tasks(decision: str = "hold") -> tuple[RelaySession, Ports, list[bytes], SettableClock]:
    clock = SettableClock()

    def make_tasks(cancel: Callable[[jsonrpc.Id], None]) -> HostTasks:
        return HostTasks(clock, "waiting for approval on desk", lambda message: ports.to_host(relay, message),
                         cancel, after_s=AFTER_S)
    relay, ports, sent = session(make_tasks=make_tasks)
    ports.decision = decision
    return relay, ports, sent, clock


def last(messages: list[bytes]) -> dict[str, Any]:
    return json.loads(messages[-1])


def test_a_call_that_asks_for_a_task_gets_it_at_once_and_its_result_from_tasks_result() -> None:
    relay, ports, sent, _ = with_tasks()
    relay.from_host(req(5, "tools/call", {"name": "echo", "arguments": {"text": "hi"}, "task": {"ttl": 60000},
                                          "_meta": {"progressToken": 5}}))
    task = last(ports.host)["result"]["task"]
    assert last(ports.host)["id"] == 5 and task["status"] == "working"
    assert sent == []  # the card waits
    send_on, _ = ports.held[0]
    send_on()
    call = last(sent)
    assert call["id"] != 5 and "task" not in call["params"] and "progressToken" not in call["params"]["_meta"]
    relay.from_host(req(6, "tasks/result", {"taskId": task["taskId"]}))
    assert len(ports.host) == 1  # it waits for the server
    relay.from_server(resp(call["id"], {"content": [{"type": "text", "text": "hi"}]}))
    answer = last(ports.host)
    assert answer["id"] == 6 and answer["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert len(ports.host) == 2  # the server's answer itself never reaches the host under the call's id


def test_a_2026_host_that_declared_tasks_gets_one_past_the_threshold_and_the_denial_in_tasks_get() -> None:
    relay, ports, sent, clock = with_tasks()
    relay.from_host(req(7, "tools/call", {"name": "echo", "arguments": {}, "_meta": MODERN_TASKS}))
    clock.advance(AFTER_S - 0.1)
    assert ports.host == []
    clock.advance(0.1)
    handle = last(ports.host)
    assert handle["id"] == 7 and handle["result"]["resultType"] == "task"
    assert handle["result"]["statusMessage"] == "waiting for approval on desk"
    _, reply = ports.held[0]
    reply(ChannelReply(result={"content": [{"type": "text", "text": "denied"}], "isError": True}))
    relay.from_host(req(8, "tasks/get", {"taskId": handle["result"]["taskId"], "_meta": MODERN_TASKS}))
    done = last(ports.host)["result"]
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert sent == []


def test_a_2026_call_answered_before_the_threshold_gets_no_task() -> None:
    relay, ports, _, clock = with_tasks()
    relay.from_host(req(7, "tools/call", {"name": "echo", "arguments": {}, "_meta": MODERN_TASKS}))
    send_on, _ = ports.held[0]
    send_on()
    relay.from_server(resp(7, {"content": [], "resultType": "complete"}))
    clock.advance(AFTER_S)
    assert [message["result"].get("resultType") for message in decoded(ports.host)] == ["complete"]


def test_a_host_without_the_extension_gets_no_task() -> None:
    relay, ports, _, clock = with_tasks()
    relay.from_host(req(7, "tools/call", {"name": "echo", "arguments": {}, "_meta": MODERN}))
    clock.advance(AFTER_S * 10)
    assert ports.host == []


def test_tasks_cancel_withdraws_the_card() -> None:
    relay, ports, _, _ = with_tasks()
    relay.from_host(req(5, "tools/call", {"name": "echo", "arguments": {}, "task": {}}))
    task_id = last(ports.host)["result"]["task"]["taskId"]
    relay.from_host(req(6, "tasks/cancel", {"taskId": task_id}))
    assert ports.cancelled == ["echo"]
    assert last(ports.host)["result"]["status"] == "cancelled"


def test_a_request_about_a_task_main_does_not_hold_goes_to_the_server_as_sent() -> None:
    relay, ports, sent, _ = with_tasks()
    request = req(9, "tasks/get", {"taskId": "the-servers-own"})
    relay.from_host(request)
    assert sent == [request] and ports.host == []



def test_a_call_with_a_progress_token_hears_progress_until_it_became_a_task_then_none_and_no_retry() -> None:
    def make_tasks(clock: SettableClock, cancel: Callable[[jsonrpc.Id], None]) -> HostTasks:
        return HostTasks(clock, "waiting for approval on desk", lambda message: waited.ports.to_host(waited.relay, message),
                         cancel, after_s=AFTER_S)
    waited = setup(make_tasks=make_tasks)  # the card path through LongWaits: progress every 5 s, "retry" at 50 s
    waited.relay.from_host(req(7, "tools/call", {"name": "echo", "arguments": {},
                                                 "_meta": {**MODERN_TASKS, "progressToken": "p"}}))
    waited.clock.advance(AFTER_S - 1)
    assert [message["method"] for message in waited.host_got()] == ["notifications/progress"]  # at 5 s
    waited.clock.advance(1)
    assert [message["result"]["resultType"] for message in waited.host_got()] == ["task"]  # its 10 s tick: none
    waited.clock.advance(120.0)  # past the retry deadline too
    assert waited.host_got() == []
    waited.ports.opened[0].run()  # the person allows it: it goes on to the server
    assert json.loads(waited.sent[-1])["id"] == 7
