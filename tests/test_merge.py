"""MergedSession (main_process/relay/merge/) in process: one host, fake relayed sessions for the
servers, a fake clock. Plain values in, plain values out; no sockets, no processes."""

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from main_process.relay.merge import (
    HANDSHAKE_TIMEOUT_S,
    LISTEN_ACK_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    MergedSession,
)
from shared.messages import ServerInfo

MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"},
          "io.modelcontextprotocol/clientCapabilities": {}}
SUB = "io.modelcontextprotocol/subscriptionId"
INFO = "io.modelcontextprotocol/serverInfo"


def raw(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


@dataclass
class FakeServer:
    """One server's relayed session: what the merger sent it."""

    name: str
    sent: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str] | None] = field(default_factory=list)
    closed: bool = False

    def from_host(self, message: bytes, headers: dict[str, str] | None = None) -> None:
        self.sent.append(json.loads(message))
        self.headers.append(headers)

    def close(self) -> None:
        self.closed = True

    def last(self, method: str | None = None) -> dict[str, Any]:
        return next(m for m in reversed(self.sent) if method is None or m.get("method") == method)

    def methods(self) -> list[str | None]:
        return [m.get("method") for m in self.sent]


@dataclass(eq=False)
class FakeTimer:
    at: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[FakeTimer] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.now + delay, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for timer in [t for t in self.timers if t.at <= self.now and not t.cancelled]:
            timer.cancelled = True
            timer.callback()


class Rig:
    """A merged session over fake servers; `host` holds what the host got (decoded)."""

    def __init__(self, *names: str, known: bool = True) -> None:
        self.host: list[dict[str, Any]] = []
        self.servers: dict[str, FakeServer] = {}
        self.clock = Clock()
        self.merged = MergedSession(lambda message: self.host.append(json.loads(message)), self._open,
                                    call_later=self.clock.call_later)
        if known:
            self.set(*names)

    def _open(self, name: str) -> FakeServer:
        server = self.servers[name] = FakeServer(name)
        return server

    def set(self, *names: str, status: str = "ready") -> None:
        self.merged.set_servers([ServerInfo(name=n, status=status, tools=[]) for n in names])  # type: ignore[arg-type]

    def send(self, message: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self.merged.from_host(raw(message), headers)

    def request(self, request_id: int | str, method: str, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> None:
        self.send({"id": request_id, "method": method, **({"params": params} if params is not None else {})}, headers)

    def says(self, name: str, message: dict[str, Any]) -> None:
        self.merged.from_server(name, raw(message))

    def answer(self, name: str, result: dict[str, Any], method: str | None = None) -> None:
        """Server `name` answers the last request (of `method`) it got."""
        self.says(name, {"id": self.servers[name].last(method)["id"], "result": result})

    def fail(self, name: str, code: int, message: str, method: str | None = None, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.says(name, {"id": self.servers[name].last(method)["id"], "error": error})

    def got(self) -> list[dict[str, Any]]:
        got, self.host[:] = list(self.host), []
        return got

    def one(self) -> dict[str, Any]:
        got = self.got()
        assert len(got) == 1, got
        return got[0]

    def handshake(self, capabilities: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        self.request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
                                       "clientInfo": {"name": "host", "version": "1"}})
        for name in self.servers:
            self.answer(name, {"protocolVersion": "2025-11-25",
                               "capabilities": (capabilities or {}).get(name, {"tools": {}, "prompts": {},
                                                                              "resources": {}}),
                               "serverInfo": {"name": name, "version": "1"}}, "initialize")
        answer = self.one()
        self.send({"method": "notifications/initialized"})
        return answer

    def listing(self, method: str, key: str, items: dict[str, list[dict[str, Any]]], request_id: int = 1) -> Any:
        self.request(request_id, method)
        for name, listed in items.items():
            self.answer(name, {key: listed}, method)
        return self.one()


# ---- the handshake -------------------------------------------------------------------------------


def test_initialize_goes_to_every_server_as_sent_and_the_host_gets_one_merged_answer() -> None:
    rig = Rig("a", "b")
    params = {"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": True}},
              "clientInfo": {"name": "Claude", "version": "1"}}
    rig.request("init", "initialize", params)
    sent_a, sent_b = rig.servers["a"].last(), rig.servers["b"].last()
    assert sent_a["params"] == params and sent_b["params"] == params
    assert sent_a["id"] != "init" and sent_a["id"] != sent_b["id"]  # fresh ids per server
    rig.answer("a", {"protocolVersion": "2025-06-18", "instructions": "A does things.",
                     "capabilities": {"tools": {"listChanged": False}, "logging": {},
                                      "experimental": {"x": {"on": True}}},
                     "serverInfo": {"name": "a", "version": "1"}})
    assert rig.got() == []  # one answer, once all answered
    rig.answer("b", {"protocolVersion": "2025-06-18",
                     "capabilities": {"resources": {"subscribe": True}, "completions": {},
                                      "experimental": {"y": {}}, "tasks": {"list": {}}},
                     "serverInfo": {"name": "b", "version": "2"}})
    answer = rig.one()
    assert answer["id"] == "init"
    result = answer["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["serverInfo"]["name"] == "elicitron"
    assert result["capabilities"] == {
        "tools": {"listChanged": True}, "logging": {}, "experimental": {"x": {"on": True}, "y": {}},
        "resources": {"subscribe": True, "listChanged": True}, "completions": {}, "tasks": {"list": {}}}
    assert "## a\nA does things." in result["instructions"] and "servers: a, b" in result["instructions"]
    rig.send({"method": "notifications/initialized"})
    assert rig.servers["a"].methods()[-1] == rig.servers["b"].methods()[-1] == "notifications/initialized"


def test_the_version_is_the_hosts_when_all_agree_else_the_one_most_servers_chose() -> None:
    rig = Rig("a", "b", "c")
    rig.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}})
    for name, version in (("a", "2025-06-18"), ("b", "2025-06-18"), ("c", "2025-11-25")):
        rig.answer(name, {"protocolVersion": version, "capabilities": {}, "serverInfo": {}})
    assert rig.one()["result"]["protocolVersion"] == "2025-06-18"


def test_a_server_that_fails_is_left_out_and_a_slow_one_joins_when_it_answers(
        caplog: pytest.LogCaptureFixture) -> None:
    rig = Rig("a", "broken", "slow")
    rig.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}})
    rig.answer("a", {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {}})
    rig.fail("broken", -32603, "cannot start")
    assert rig.got() == []
    with caplog.at_level(logging.WARNING):
        rig.clock.advance(HANDSHAKE_TIMEOUT_S)
    answer = rig.one()
    assert answer["result"]["capabilities"] == {"tools": {"listChanged": True}}
    assert "broken is left out" in caplog.text and "slow did not answer initialize" in caplog.text
    rig.send({"method": "notifications/initialized"})
    assert "notifications/initialized" not in rig.servers["broken"].methods()
    assert "notifications/initialized" not in rig.servers["slow"].methods()
    rig.request(2, "tools/list")
    assert "tools/list" not in rig.servers["slow"].methods()
    rig.answer("a", {"tools": []})
    rig.got()
    rig.answer("slow", {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {}},
               "initialize")  # late: it joins now
    assert rig.servers["slow"].methods()[-1] == "notifications/initialized"
    assert {m["method"] for m in rig.got()} == {"notifications/tools/list_changed", "notifications/prompts/list_changed",
                                               "notifications/resources/list_changed"}
    rig.request(3, "tools/list")
    assert rig.servers["slow"].methods()[-1] == "tools/list"


def test_messages_wait_until_the_servers_are_known_and_are_answered_if_main_is_unreachable() -> None:
    rig = Rig(known=False)
    rig.request(1, "tools/list")
    rig.merged.unreachable("Elicitron's main is not reachable: no main")
    assert rig.one() == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000,
                                                              "message": "Elicitron's main is not reachable: no main"}}
    rig.request(2, "ping")
    assert rig.got() == []
    rig.set("a", "gone", "off")
    rig.merged.set_servers([ServerInfo(name="a", status="ready", tools=[]),
                            ServerInfo(name="gone", status="failed", tools=[]),
                            ServerInfo(name="off", status="stopped", tools=[])])
    assert rig.merged.servers == ["a"]
    assert rig.one() == {"jsonrpc": "2.0", "id": 2, "result": {}}  # ping: answered here


def test_bad_messages_get_json_rpc_errors() -> None:
    rig = Rig("a")
    rig.merged.from_host(b"this is not json")
    rig.merged.from_host(b'{"jsonrpc": "2.0", "id": 7, "method": 12}')
    parse, invalid = rig.got()
    assert parse["id"] is None and parse["error"]["code"] == -32700 and "not strict JSON" in parse["error"]["message"]
    assert invalid["id"] == 7 and invalid["error"]["code"] == -32600
    assert rig.servers["a"].sent == []


# ---- lists -----------------------------------------------------------------------------------------


def test_lists_follow_every_servers_cursor_and_come_as_one_page_with_prefixed_names() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.request(1, "tools/list")
    rig.answer("a", {"tools": [{"name": "one", "inputSchema": {}}], "nextCursor": "p2"})
    assert rig.servers["a"].last()["params"] == {"cursor": "p2"}
    rig.answer("b", {"tools": [{"name": "three", "title": "Three"}]})
    assert rig.got() == []
    rig.answer("a", {"tools": [{"name": "two"}]})
    result = rig.one()["result"]
    assert result == {"tools": [{"name": "a__one", "inputSchema": {}}, {"name": "a__two"},
                                {"name": "b__three", "title": "Three"}]}
    listed = rig.listing("resources/list", "resources", {
        "a": [{"name": "greeting", "uri": "a://greeting"}], "b": []}, 2)
    assert listed["result"]["resources"] == [{"name": "a__greeting", "uri": "a://greeting"}]
    listed = rig.listing("resources/templates/list", "resourceTemplates", {
        "a": [], "b": [{"name": "item", "uriTemplate": "b://items/{id}"}]}, 3)
    assert listed["result"]["resourceTemplates"] == [{"name": "b__item", "uriTemplate": "b://items/{id}"}]
    rig.request(4, "prompts/list", {"cursor": "x"})
    assert rig.one()["error"]["code"] == -32602  # the merged page is the only one


def test_only_servers_that_offer_a_list_are_asked_and_a_failing_one_is_left_out() -> None:
    rig = Rig("a", "b", "c")
    rig.handshake({"a": {"prompts": {}}, "b": {"tools": {}}, "c": {"prompts": {}}})
    rig.request(1, "prompts/list")
    assert "prompts/list" not in rig.servers["b"].methods()
    rig.answer("a", {"prompts": [{"name": "greet"}]})
    rig.fail("c", -32603, "boom")
    assert rig.one()["result"] == {"prompts": [{"name": "a__greet"}]}


def test_a_name_two_servers_would_share_is_left_out_and_never_routed(caplog: pytest.LogCaptureFixture) -> None:
    rig = Rig("a", "a__b")
    rig.handshake()
    servers = {"a": [{"name": "b__c"}, {"name": "d"}], "a__b": [{"name": "c"}]}
    with caplog.at_level(logging.WARNING):
        rig.request(1, "tools/list")
        for name, listed in servers.items():
            rig.answer(name, {"tools": listed}, "tools/list")
        notice, listing = rig.got()
    assert [t["name"] for t in listing["result"]["tools"]] == ["a__d"]
    assert "a__b__c" in caplog.text and "leaves it out" in caplog.text
    assert notice["method"] == "notifications/message" and notice["params"]["level"] == "warning"
    assert "'b__c' of server 'a'" in notice["params"]["data"] and "--server a__b" in notice["params"]["data"]
    rig.request(2, "tools/call", {"name": "a__b__c", "arguments": {}})
    error = rig.one()["error"]
    assert error["code"] == -32602 and "ambiguous" in error["message"]
    assert "tools/call" not in rig.servers["a"].methods() + rig.servers["a__b"].methods()
    rig.request(3, "tools/list")  # told once a session
    for name, listed in servers.items():
        rig.answer(name, {"tools": listed}, "tools/list")
    assert "result" in rig.one()


def test_shared_names_are_found_whatever_the_order_of_the_servers() -> None:
    from shared.merged_names import name_clashes

    names = {"a": ["b__c", "d"], "a__b": ["c"], "x": ["y"]}
    assert name_clashes(names) == {"a__b__c": [("a", "b__c"), ("a__b", "c")]}
    assert name_clashes(dict(reversed(names.items()))) == {"a__b__c": [("a__b", "c"), ("a", "b__c")]}


def test_a_host_that_asked_for_errors_only_is_not_told_of_a_shared_name() -> None:
    rig = Rig("a", "a__b")
    rig.handshake({"a": {"tools": {}, "logging": {}}, "a__b": {"tools": {}, "logging": {}}})
    rig.request(1, "logging/setLevel", {"level": "error"})
    for name in rig.servers:
        rig.answer(name, {}, "logging/setLevel")
    rig.got()
    listed = rig.listing("tools/list", "tools", {"a": [{"name": "b__c"}], "a__b": [{"name": "c"}]}, 2)
    assert listed["result"]["tools"] == []


def test_a_page_limit_stops_a_server_that_pages_forever() -> None:
    rig = Rig("a")
    rig.handshake()
    rig.request(1, "tools/list")
    for n in range(200):
        if rig.host:
            break
        rig.answer("a", {"tools": [{"name": f"t{n}"}], "nextCursor": f"c{n}"})
    assert len(rig.one()["result"]["tools"]) == 100


# ---- routed requests ---------------------------------------------------------------------------


def test_a_tool_call_goes_to_its_server_without_the_prefix_under_the_hosts_id() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.listing("tools/list", "tools", {"a": [{"name": "echo"}], "b": [{"name": "echo"}]})
    rig.request(7, "tools/call", {"name": "b__echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 3}},
                headers={"mcp-method": "tools/call", "mcp-name": "b__echo"})
    sent = rig.servers["b"].last()
    assert sent == {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 3}}}
    assert rig.servers["b"].headers[-1] == {"mcp-method": "tools/call"}  # the server's own Mcp-Name is derived
    assert "tools/call" not in rig.servers["a"].methods()
    rig.says("b", {"method": "notifications/progress", "params": {"progressToken": 3, "progress": 1}})
    rig.says("b", {"id": 7, "result": {"content": [{"type": "text", "text": "hi"}]}})
    progress, answer = rig.got()
    assert progress["params"] == {"progressToken": 3, "progress": 1}
    assert answer == {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "hi"}]}}


def test_unknown_names_are_refused_naming_the_problem() -> None:
    rig = Rig("demo", "probe")
    rig.handshake()
    rig.listing("tools/list", "tools", {"demo": [{"name": "echo"}], "probe": [{"name": "pid"}]})
    for name, expected in (("echo", ("unknown tool 'echo': names here are <server>__<tool>, with <server> one of: "
                                     "demo, probe")),
                           ("nope__echo", "unknown tool 'nope__echo'"),
                           ("demo__nope", ("unknown tool 'demo__nope': server 'demo' has no tool 'nope' "
                                           "(its tools: demo__echo)"))):
        rig.request(9, "tools/call", {"name": name, "arguments": {}})
        error = rig.one()["error"]
        assert error["code"] == -32602 and error["message"].startswith(expected), error


def test_a_call_before_any_listing_lists_first_then_routes() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.request(5, "tools/call", {"name": "a__grown", "arguments": {}})
    assert "tools/call" not in rig.servers["a"].methods()
    rig.answer("a", {"tools": [{"name": "grown"}]}, "tools/list")
    rig.answer("b", {"tools": []}, "tools/list")
    assert rig.got() == []  # the merger's own listing: not the host's
    assert rig.servers["a"].last() == {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                       "params": {"name": "grown", "arguments": {}}}


def test_a_list_changed_makes_the_listing_stale_so_a_new_name_is_looked_up_again() -> None:
    rig = Rig("a")
    rig.handshake()
    rig.listing("tools/list", "tools", {"a": [{"name": "old"}]})
    rig.says("a", {"method": "notifications/tools/list_changed"})
    assert rig.one()["method"] == "notifications/tools/list_changed"
    rig.request(2, "tools/call", {"name": "a__new"})
    rig.answer("a", {"tools": [{"name": "old"}, {"name": "new"}]}, "tools/list")
    assert rig.servers["a"].last()["params"]["name"] == "new"


def test_prompts_go_by_prefix_and_errors_keep_code_message_and_data() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.listing("prompts/list", "prompts", {"a": [{"name": "greet"}], "b": []})
    rig.request("p", "prompts/get", {"name": "a__greet", "arguments": {"who": "Ada"}})
    assert rig.servers["a"].last()["params"] == {"name": "greet", "arguments": {"who": "Ada"}}
    rig.says("a", {"id": "p", "error": {"code": -32602, "message": "missing who", "data": {"field": "who"}}})
    assert rig.one() == {"jsonrpc": "2.0", "id": "p", "error": {"code": -32602, "message": "missing who",
                                                                "data": {"field": "who"}}}


def test_resources_go_to_the_server_that_listed_them_or_the_most_specific_template() -> None:
    rig = Rig("a", "b")
    rig.handshake({"a": {"resources": {"subscribe": True}}, "b": {"resources": {}}})
    rig.listing("resources/list", "resources", {"a": [{"name": "g", "uri": "x://greeting"}], "b": []})
    rig.listing("resources/templates/list", "resourceTemplates", {
        "a": [{"name": "any", "uriTemplate": "x://{path}"}],
        "b": [{"name": "item", "uriTemplate": "x://items/{id}"}]}, 2)
    rig.request(3, "resources/read", {"uri": "x://greeting"})
    assert rig.servers["a"].last() == {"jsonrpc": "2.0", "id": 3, "method": "resources/read",
                                       "params": {"uri": "x://greeting"}}
    rig.request(4, "resources/read", {"uri": "x://items/7"})
    assert rig.servers["b"].last()["id"] == 4  # the more specific template
    rig.request(5, "resources/read", {"uri": "x://other"})
    assert rig.servers["a"].last()["id"] == 5
    rig.request(6, "resources/subscribe", {"uri": "x://greeting"})
    assert rig.servers["a"].last()["method"] == "resources/subscribe"
    rig.request(7, "resources/read", {"uri": "y://nowhere"})
    error = rig.one()["error"]
    assert error["code"] == -32602 and "unknown resource 'y://nowhere'" in error["message"]


def test_completions_go_by_their_ref() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.listing("prompts/list", "prompts", {"a": [], "b": [{"name": "greet"}]})
    rig.listing("resources/list", "resources", {"a": [], "b": []}, 2)
    rig.listing("resources/templates/list", "resourceTemplates", {
        "a": [{"name": "file", "uriTemplate": "file:///{path}"}], "b": []}, 3)
    rig.request(4, "completion/complete", {"ref": {"type": "ref/prompt", "name": "b__greet"},
                                           "argument": {"name": "who", "value": "A"}})
    assert rig.servers["b"].last()["params"]["ref"] == {"type": "ref/prompt", "name": "greet"}
    rig.request(5, "completion/complete", {"ref": {"type": "ref/resource", "uri": "file:///{path}"},
                                           "argument": {"name": "path", "value": "R"}})
    assert rig.servers["a"].last()["id"] == 5
    rig.request(6, "completion/complete", {"argument": {}})
    assert rig.one()["error"]["code"] == -32602


def test_logging_level_goes_to_every_server_that_logs_and_is_answered_once() -> None:
    rig = Rig("a", "b", "c")
    rig.handshake({"a": {"logging": {}}, "b": {"logging": {}}, "c": {}})
    rig.request(1, "logging/setLevel", {"level": "debug"})
    assert "logging/setLevel" not in rig.servers["c"].methods()
    rig.answer("a", {})
    assert rig.got() == []
    rig.fail("b", -32603, "no")
    assert rig.one() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    rig.says("a", {"method": "notifications/message", "params": {"level": "info", "data": "hello"}})
    assert rig.one()["params"] == {"level": "info", "data": "hello"}


def test_an_unknown_method_goes_by_its_prefixed_name_or_to_every_server_first_result_winning() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.request(1, "x/do", {"name": "b__thing"})
    assert rig.servers["b"].last() == {"jsonrpc": "2.0", "id": 1, "method": "x/do", "params": {"name": "thing"}}
    rig.request(2, "x/other", {"v": 1})
    ids = {name: server.last("x/other")["id"] for name, server in rig.servers.items()}
    assert ids["a"] != ids["b"] and 2 not in ids.values()
    rig.fail("a", -32601, "Method not found", "x/other")
    rig.answer("b", {"ok": True}, "x/other")
    assert rig.one() == {"jsonrpc": "2.0", "id": 2, "result": {"ok": True}}
    rig.request(3, "x/none")
    rig.fail("a", -32601, "Method not found", "x/none", data={"m": "a"})
    rig.fail("b", -32601, "Method not found", "x/none")
    assert rig.one() == {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found",
                                                              "data": {"m": "a"}}}


# ---- ids both ways, cancellation -----------------------------------------------------------------


def test_server_requests_get_fresh_ids_and_the_hosts_answers_go_back_under_the_servers_own() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    sampling = {"messages": [], "maxTokens": 5}
    rig.says("a", {"id": 0, "method": "sampling/createMessage", "params": sampling})
    rig.says("b", {"id": 0, "method": "roots/list"})
    first, second = rig.got()
    assert first["method"] == "sampling/createMessage" and second["method"] == "roots/list"
    assert first["id"] != second["id"]
    rig.send({"id": second["id"], "result": {"roots": []}})
    rig.send({"id": first["id"], "result": {"role": "assistant"}})
    assert rig.servers["b"].last() == {"jsonrpc": "2.0", "id": 0, "result": {"roots": []}}
    assert rig.servers["a"].last() == {"jsonrpc": "2.0", "id": 0, "result": {"role": "assistant"}}
    rig.says("a", {"id": "e1", "method": "elicitation/create", "params": {"message": "?"}})
    asked = rig.one()
    rig.says("a", {"method": "notifications/cancelled", "params": {"requestId": "e1", "reason": "answered in Elicitron"}})
    assert rig.one() == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": asked["id"], "reason": "answered in Elicitron"}}
    before = len(rig.servers["a"].sent)
    rig.send({"id": asked["id"], "result": {"action": "accept"}})  # too late: dropped
    assert len(rig.servers["a"].sent) == before


def test_the_hosts_progress_on_a_servers_request_goes_to_that_server() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.says("b", {"id": 1, "method": "sampling/createMessage", "params": {"_meta": {"progressToken": "t"}}})
    rig.got()
    rig.send({"method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}})
    assert rig.servers["b"].last()["method"] == "notifications/progress"
    assert rig.servers["a"].last()["method"] != "notifications/progress"


def test_the_hosts_cancellation_reaches_the_server_that_has_the_request() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.listing("tools/list", "tools", {"a": [{"name": "block"}], "b": []})
    rig.request(4, "tools/call", {"name": "a__block"})
    rig.send({"method": "notifications/cancelled", "params": {"requestId": 4, "reason": "user"}})
    assert rig.servers["a"].last() == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": 4, "reason": "user"}}
    assert rig.servers["b"].last()["method"] != "notifications/cancelled"
    rig.says("a", {"id": 4, "error": {"code": -32800, "message": "cancelled"}})
    assert rig.got() == []  # the host expects no answer now
    rig.request(5, "x/slow")
    rig.send({"method": "notifications/cancelled", "params": {"requestId": 5}})
    for name in ("a", "b"):
        cancel = rig.servers[name].last()
        assert cancel["method"] == "notifications/cancelled"
        assert cancel["params"]["requestId"] == rig.servers[name].last("x/slow")["id"]
    rig.answer("a", {"late": True}, "x/slow")
    assert rig.got() == []


def test_a_request_that_times_out_at_one_server_is_answered_without_it_and_cancelled_there() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.request(1, "tools/list")
    rig.answer("a", {"tools": [{"name": "x"}]})
    rig.clock.advance(REQUEST_TIMEOUT_S)
    assert [t["name"] for t in rig.one()["result"]["tools"]] == ["a__x"]
    assert rig.servers["b"].last()["method"] == "notifications/cancelled"


def test_the_host_id_is_kept_unless_that_server_has_a_fresh_id_of_ours_with_it() -> None:
    rig = Rig("a")
    rig.handshake()
    rig.listing("tools/list", "tools", {"a": [{"name": "t"}]})
    rig.request(1, "x/pending")
    fresh = rig.servers["a"].last()["id"]
    rig.request(fresh, "tools/call", {"name": "a__t"})
    upstream = rig.servers["a"].last()["id"]
    assert upstream != fresh
    rig.says("a", {"id": upstream, "result": {"content": []}})
    assert rig.one() == {"jsonrpc": "2.0", "id": fresh, "result": {"content": []}}


# ---- servers come and go ---------------------------------------------------------------------------


def test_a_server_added_later_is_initialized_and_the_host_hears_the_lists_changed() -> None:
    rig = Rig("a")
    rig.handshake()
    rig.set("a", "b")
    assert rig.servers["b"].last()["method"] == "initialize"
    assert rig.servers["b"].last()["params"]["clientInfo"] == {"name": "host", "version": "1"}
    announced = {m["method"] for m in rig.got()}
    assert "notifications/tools/list_changed" in announced
    rig.answer("b", {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {}})
    assert rig.servers["b"].last()["method"] == "notifications/initialized"
    rig.got()
    rig.request(2, "tools/list")
    assert rig.servers["b"].last()["method"] == "tools/list"


def test_a_server_that_goes_away_fails_its_requests_and_is_closed() -> None:
    rig = Rig("a", "b")
    rig.handshake()
    rig.listing("tools/list", "tools", {"a": [], "b": [{"name": "slow"}]})
    rig.request(3, "tools/call", {"name": "b__slow"})
    rig.says("b", {"id": 9, "method": "roots/list"})
    asked = rig.one()
    rig.merged.set_servers([ServerInfo(name="a", status="ready", tools=[]),
                            ServerInfo(name="b", status="stopped", tools=[])])
    got = rig.got()
    assert {"jsonrpc": "2.0", "id": 3, "error": {
        "code": -32000, "message": "tools/call to 'b' was lost: server 'b' is no longer served (stopped, failed or "
                                   "removed)"}} in got
    assert any(m.get("method") == "notifications/cancelled" and m["params"]["requestId"] == asked["id"] for m in got)
    assert any(m.get("method") == "notifications/tools/list_changed" for m in got)
    assert rig.servers["b"].closed and rig.merged.servers == ["a"]


def test_mains_list_change_notice_reaches_the_host_and_makes_the_listing_stale() -> None:
    rig = Rig("a")
    rig.handshake()
    rig.listing("prompts/list", "prompts", {"a": [{"name": "p"}]})
    rig.merged.lists_changed("a", ["prompts"])
    assert rig.one() == {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed", "params": {}}
    rig.request(2, "prompts/get", {"name": "a__q"})
    assert rig.servers["a"].last()["method"] == "prompts/list"


def test_close_closes_every_servers_session() -> None:
    rig = Rig("a", "b")
    rig.merged.close()
    assert all(server.closed for server in rig.servers.values())


# ---- 2026-07-28 --------------------------------------------------------------------------------------


def modern(params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**(params or {}), "_meta": {**MODERN, **(params or {}).get("_meta", {})}}


def test_discover_merges_versions_capabilities_and_says_it_is_elicitron() -> None:
    rig = Rig("a", "b")
    rig.request(1, "server/discover", modern())
    assert rig.servers["a"].last()["params"]["_meta"] == MODERN
    rig.answer("a", {"supportedVersions": ["2025-11-25", "2026-07-28"], "capabilities": {"tools": {}},
                     "resultType": "complete", "ttlMs": 5000, "cacheScope": "public",
                     "_meta": {INFO: {"name": "a", "version": "1"}}})
    rig.answer("b", {"supportedVersions": ["2026-07-28"], "capabilities": {"prompts": {"listChanged": True}},
                     "instructions": "B.", "resultType": "complete", "ttlMs": 1000})
    result = rig.one()["result"]
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["capabilities"] == {"tools": {"listChanged": True}, "prompts": {"listChanged": True}}
    assert result["_meta"][INFO]["name"] == "elicitron" and result["resultType"] == "complete"
    assert result["ttlMs"] == 1000 and result["cacheScope"] == "private"
    assert "## b\nB." in result["instructions"]


def test_a_server_that_cannot_discover_makes_the_host_fall_back_to_the_handshake_era() -> None:
    rig = Rig("new", "old")
    rig.request(1, "server/discover", modern())
    rig.answer("new", {"supportedVersions": ["2025-11-25", "2026-07-28"], "capabilities": {}})
    rig.fail("old", -32601, "Method not found")
    assert "2026-07-28" not in rig.one()["result"]["supportedVersions"]


def test_a_host_that_gave_up_on_discover_gets_its_handshake_on_fresh_server_sessions() -> None:
    # mcp's Client waits 10 s for server/discover, then sends initialize on the same connection; a
    # server session that got the discover refuses an initialize ("serving the 2026-07-28 protocol").
    rig = Rig("slow", "quick")
    first = dict(rig.servers)
    rig.request(1, "server/discover", modern())
    rig.answer("quick", {"supportedVersions": ["2025-11-25", "2026-07-28"], "capabilities": {}})
    rig.request(2, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "host", "version": "1"}})
    assert first["slow"].closed and first["quick"].closed
    for name in ("slow", "quick"):
        fresh = rig.servers[name]
        assert fresh is not first[name] and fresh.methods() == ["initialize"]
        rig.answer(name, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                          "serverInfo": {"name": name, "version": "1"}})
    answers = {m["id"]: m for m in rig.got() if "id" in m}
    assert answers[2]["result"]["protocolVersion"] == "2025-11-25"
    rig.request(3, "tools/list")
    for name in ("slow", "quick"):
        rig.answer(name, {"tools": [{"name": "t"}]}, "tools/list")
    tools = [t["name"] for t in rig.one()["result"]["tools"]]
    assert sorted(tools) == ["quick__t", "slow__t"]


def test_modern_lists_say_result_type_and_cache_hints() -> None:
    rig = Rig("a")
    rig.request(1, "tools/list", modern())
    rig.answer("a", {"tools": [{"name": "t"}], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
    result = rig.one()["result"]
    assert result["tools"] == [{"name": "a__t"}] and result["resultType"] == "complete"
    assert result["_meta"][INFO]["name"] == "elicitron" and result["ttlMs"] == 0


def test_an_input_required_result_passes_as_it_is_and_the_retry_routes_by_name_again() -> None:
    rig = Rig("a", "b")
    rig.request(1, "tools/list", modern())
    rig.answer("a", {"tools": [{"name": "book"}]})
    rig.answer("b", {"tools": []})
    rig.got()
    rig.request(2, "tools/call", modern({"name": "a__book", "arguments": {}}))
    input_required = {"resultType": "input_required", "inputRequests": {"ask": {"method": "elicitation/create",
                                                                                "params": {"message": "?"}}},
                      "requestState": "s1"}
    rig.says("a", {"id": 2, "result": input_required})
    assert rig.one()["result"] == input_required
    rig.request(3, "tools/call", modern({"name": "a__book", "arguments": {}, "requestState": "s1",
                                         "inputResponses": {"ask": {"action": "accept", "content": {}}}}))
    retry = rig.servers["a"].last()
    assert retry["id"] == 3 and retry["params"]["name"] == "book" and retry["params"]["requestState"] == "s1"


def test_listen_goes_to_the_servers_that_can_honor_it_and_the_streams_merge() -> None:
    rig = Rig("a", "b", "c")
    rig.request(0, "server/discover", modern())
    rig.answer("a", {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": True}}})
    rig.answer("b", {"supportedVersions": ["2026-07-28"],
                     "capabilities": {"resources": {"subscribe": True, "listChanged": True}}})
    rig.answer("c", {"supportedVersions": ["2026-07-28"], "capabilities": {"prompts": {}}})
    rig.got()
    rig.request("L", "subscriptions/listen", modern({"notifications": {"toolsListChanged": True,
                                                                        "resourceSubscriptions": ["b://r"]}}))
    to_a, to_b = rig.servers["a"].last(), rig.servers["b"].last()
    assert to_a["params"]["notifications"] == {"toolsListChanged": True}
    assert to_b["params"]["notifications"] == {"resourceSubscriptions": ["b://r"]}
    assert "subscriptions/listen" not in rig.servers["c"].methods()
    rig.says("a", {"method": "notifications/subscriptions/acknowledged",
                   "params": {"notifications": {"toolsListChanged": True}, "_meta": {SUB: to_a["id"]}}})
    rig.says("a", {"method": "notifications/tools/list_changed", "params": {"_meta": {SUB: to_a["id"]}}})
    assert rig.got() == []  # the host's acknowledgement comes first, once
    rig.says("b", {"method": "notifications/subscriptions/acknowledged",
                   "params": {"notifications": {"resourceSubscriptions": ["b://r"]}, "_meta": {SUB: to_b["id"]}}})
    ack, event = rig.got()
    assert ack == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["b://r"]}, "_meta": {SUB: "L"}}}
    assert event == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: "L"}}}
    rig.says("b", {"method": "notifications/resources/updated", "params": {"uri": "b://r", "_meta": {SUB: to_b["id"]}}})
    assert rig.one()["params"] == {"uri": "b://r", "_meta": {SUB: "L"}}
    rig.merged.lists_changed("c", ["tools"])  # main's notice: the merger's own event on the stream
    assert rig.one() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: "L"}}}
    rig.send({"method": "notifications/cancelled", "params": {"requestId": "L"}})
    assert rig.servers["a"].last()["params"]["requestId"] == to_a["id"]
    assert rig.servers["b"].last()["params"]["requestId"] == to_b["id"]
    assert rig.got() == []


def test_listen_is_acknowledged_without_a_server_that_refuses_or_is_too_slow() -> None:
    rig = Rig("a", "b")
    rig.request("L", "subscriptions/listen", modern({"notifications": {"toolsListChanged": True}}))
    rig.fail("a", -32601, "Method not found", "subscriptions/listen")
    assert rig.got() == []
    rig.clock.advance(LISTEN_ACK_TIMEOUT_S)
    assert rig.one()["method"] == "notifications/subscriptions/acknowledged"
    to_b = rig.servers["b"].last("subscriptions/listen")["id"]
    rig.says("b", {"id": to_b, "result": {"_meta": {SUB: to_b}}})  # b's stream ends: so does the host's
    assert rig.one() == {"jsonrpc": "2.0", "id": "L", "result": {"_meta": {SUB: "L"}, "resultType": "complete"}}


def test_tasks_go_to_the_server_that_created_them() -> None:
    rig = Rig("a", "b")
    rig.request(1, "tools/list", modern())
    rig.answer("a", {"tools": []})
    rig.answer("b", {"tools": [{"name": "long"}]})
    rig.got()
    rig.request(2, "tools/call", modern({"name": "b__long", "arguments": {}}))
    rig.says("b", {"id": 2, "result": {"resultType": "task", "taskId": "T1", "status": "working"}})
    assert rig.one()["result"]["taskId"] == "T1"
    for n, method in enumerate(("tasks/get", "tasks/update", "tasks/cancel"), start=3):
        rig.request(n, method, modern({"taskId": "T1"}), headers={"mcp-name": "T1"})
        assert rig.servers["b"].last() == {"jsonrpc": "2.0", "id": n, "method": method,
                                           "params": modern({"taskId": "T1"})}
        assert rig.servers["b"].headers[-1] == {"mcp-name": "T1"}
    assert all(m.get("method") not in ("tasks/get", "tasks/update", "tasks/cancel") for m in rig.servers["a"].sent)


def test_what_the_host_sends_right_after_its_initialize_waits_for_the_handshake() -> None:
    rig = Rig("a")
    rig.request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}})
    rig.send({"method": "notifications/initialized"})
    rig.request(1, "tools/list")
    assert rig.servers["a"].methods() == ["initialize"]
    rig.answer("a", {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {}})
    assert rig.servers["a"].methods() == ["initialize", "notifications/initialized", "tools/list"]
    rig.answer("a", {"tools": [{"name": "t"}]})
    handshake, listing = rig.got()
    assert handshake["id"] == 0 and listing["result"]["tools"] == [{"name": "a__t"}]


def test_while_a_server_added_later_initializes_the_hosts_requests_wait_for_it() -> None:
    rig = Rig("a")
    rig.handshake()
    rig.set("a", "b")
    rig.got()
    rig.request(5, "tools/call", {"name": "b__t", "arguments": {}})
    assert "tools/call" not in rig.servers["b"].methods() and rig.got() == []
    rig.answer("b", {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {}})
    rig.got()
    rig.answer("a", {"tools": []}, "tools/list")
    rig.answer("b", {"tools": [{"name": "t"}]}, "tools/list")
    assert rig.servers["b"].last() == {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                       "params": {"name": "t", "arguments": {}}}


def test_while_main_is_away_the_hosts_messages_wait() -> None:
    rig = Rig("a")
    rig.handshake()
    rig.merged.offline()
    rig.request(2, "ping")
    assert rig.got() == []
    rig.set("a")
    assert rig.one() == {"jsonrpc": "2.0", "id": 2, "result": {}}
