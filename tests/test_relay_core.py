"""The relayed session's logic in process, with plain values: main's side (`RelaySession`, consent on
the way) and the gateway's (`RelayPump`, nothing lost while main is away). No sockets, no processes.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from main_process.consent.elicitation_gate import Answered, Decision, HostModes, Read, decide
from main_process.consent.long_wait import HostWait
from main_process.consent.pending import Elicitation, PendingRequest, Unanswered
from main_process.relay.host_tasks import HostTasks
from main_process.relay.relay import RelaySession
from main_process.servers.servers import ManagedServer
from main_process.wire.peer_calls import Cancel
from main_process.wire.peers import Peer
from shared import jsonrpc
from shared.elicit_params import ElicitParams
from shared.messages import ChannelReply, ElicitationResult
from shared.relay_pump import RelayPump

MakeTasks = Callable[[Callable[[jsonrpc.Id], None]], HostTasks]  # RelaySession's make_tasks
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
          "io.modelcontextprotocol/clientInfo": {"name": "host", "version": "1"}}
FORM = {"mode": "form", "message": "Name?", "requestedSchema": {"type": "object", "properties": {
    "name": {"type": "string"}}, "required": ["name"]}}


def raw(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def req(request_id: int | str, method: str, params: dict[str, Any] | None = None) -> bytes:
    return raw({"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params is not None else {})})


def resp(request_id: int | str, result: dict[str, Any]) -> bytes:
    return raw({"jsonrpc": "2.0", "id": request_id, "result": result})


@dataclass
class _Config:
    elicitation_route: str = "windows"


@dataclass
class _Server:
    config: _Config = field(default_factory=_Config)
    name: str = "demo"

    def screen_elicitation(self, params: ElicitParams) -> None:
        return None


@dataclass(eq=False)
class _Card:
    params: dict[str, Any]
    resolve: Callable[[ElicitationResult], None]
    for_host: bool = False
    withdrawn: str | None = None  # why it was withdrawn
    answered_by_host: ElicitationResult | None = None


@dataclass
class Ports:
    """RelayPorts that record: what the host got, the cards, the consent decisions."""

    host: list[bytes] = field(default_factory=list)
    cards: list[_Card] = field(default_factory=list)
    decision: str = "allow"  # "allow" | "deny" | "hold"
    held: list[tuple[Callable[[], None], Callable[[ChannelReply], None]]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    calls: int = 0
    hosts: list[Any] = field(default_factory=list)

    def to_host(self, session: RelaySession, message: bytes) -> None:
        self.host.append(message)

    def needs_decision(self, session: RelaySession) -> bool:
        return self.decision != "allow"

    def decide_call(self, session: RelaySession, tool: str, arguments: dict[str, Any], send_on: Callable[[], None],
                    reply: Callable[[ChannelReply], None], wait: HostWait | None) -> Cancel | None:
        if self.decision == "allow":
            send_on()
            return None
        if self.decision == "deny":
            reply(ChannelReply(result={"content": [{"type": "text", "text": "denied"}], "isError": True}))
            return None
        self.held.append((send_on, reply))
        return lambda: self.cancelled.append(tool)

    def decide(self, session: RelaySession, read: Read, host: HostModes) -> Decision:
        return decide(None, read, cast(_Server, session.server), host=host)  # main's gate, no rules

    def record(self, session: RelaySession, elicitation: Elicitation, answered: Answered,
               then: Callable[[], None]) -> None:
        then()

    def ask_windows(self, session: RelaySession, elicitation: Elicitation,
                    resolve: Callable[[ElicitationResult], None]) -> PendingRequest:
        card = _Card(elicitation.request.params, resolve)
        self.cards.append(card)
        return cast(PendingRequest, card)

    def record_for_host(self, session: RelaySession, elicitation: Elicitation) -> PendingRequest | None:
        card = _Card(elicitation.request.params, lambda _answer: None, for_host=True)
        self.cards.append(card)
        return cast(PendingRequest, card)

    def answered_by_host(self, session: RelaySession, pending: PendingRequest, answer: ElicitationResult) -> None:
        cast(_Card, pending).answered_by_host = answer

    def withdraw(self, pending: PendingRequest, reason: Unanswered) -> None:
        cast(_Card, pending).withdrawn = reason

    def calls_changed(self, session: RelaySession, delta: int) -> None:
        self.calls += delta

    def elicitation_complete(self, session: RelaySession, elicitation_id: str) -> None:
        pass

    def note_host(self, session: RelaySession, client_info: Any) -> None:
        self.hosts.append(client_info)


def session(route: str = "windows", make_tasks: MakeTasks | None = None,
            ) -> tuple[RelaySession, Ports, list[bytes]]:
    ports = Ports()
    sent: list[bytes] = []
    relay = RelaySession(peer=Peer(b"r", "w1", "Claude", "host", 0.0), name="s1",
                         server=cast(ManagedServer, _Server(_Config(route))), ports=ports, make_tasks=make_tasks)
    relay.to_server = lambda message, headers: sent.append(message)
    return relay, ports, sent


def decoded(messages: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(m) for m in messages]


def initialize(relay: RelaySession, capabilities: dict[str, Any]) -> dict[str, Any]:
    sent: list[bytes] = []
    before = relay.to_server
    relay.to_server = lambda message, headers: sent.append(message)
    relay.from_host(req(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                                          "clientInfo": {"name": "Claude", "version": "1"}}))
    relay.to_server = before
    return cast(dict[str, Any], json.loads(sent[0]))


# ---- what needs no decision passes through as the bytes it is ------------------------------------


def test_everything_but_consent_passes_byte_for_byte_both_ways() -> None:
    relay, ports, sent = session()
    host_side = [req(1, "tools/list", {"cursor": "x"}), req(2, "logging/setLevel", {"level": "debug"}),
                 req(3, "completion/complete", {"ref": {"type": "ref/prompt", "name": "p"}}),
                 raw({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
                 req(4, "vendor/unknown", {"a": [1, {"b": None}]}), b'{"jsonrpc": "2.0",  "id": 5, "method": "ping"}',
                 resp(7, {"roots": [{"uri": "file:///x"}]})]
    for message in host_side:
        relay.from_host(message)
    assert sent == host_side
    server_side = [resp(1, {"tools": []}), req(7, "roots/list"), req(8, "sampling/createMessage", {"messages": []}),
                   raw({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}}),
                   raw({"jsonrpc": "2.0", "id": 4, "error": {"code": -32099, "message": "m", "data": {"k": [1]}}})]
    for message in server_side:
        relay.from_server(message)
    assert ports.host == server_side


def test_initialize_tells_the_server_its_client_answers_elicitation_and_keeps_the_rest() -> None:
    relay, _, _ = session()
    seen = initialize(relay, {"roots": {"listChanged": True}, "sampling": {}})
    assert seen["params"]["capabilities"] == {"roots": {"listChanged": True}, "sampling": {},
                                              "elicitation": {"form": {}, "url": {}}}
    assert seen["params"]["clientInfo"] == {"name": "Claude", "version": "1"} and seen["id"] == 0
    assert (relay.host_form, relay.host_url) == (False, False)
    assert relay.ports.hosts == [{"name": "Claude", "version": "1"}]  # type: ignore[attr-defined]
    relay2, _, _ = session()
    initialize(relay2, {"elicitation": {}})  # the 2025-06-18 shape: form mode
    assert (relay2.host_form, relay2.host_url) == (True, False)


# ---- tools/call: the consent layer first --------------------------------------------------------------


def test_a_call_waits_for_its_decision_then_goes_as_it_was_sent() -> None:
    relay, ports, sent = session()
    ports.decision = "hold"
    call = req(9, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    relay.from_host(call)
    assert sent == [] and ports.calls == 0
    send_on, _ = ports.held[0]
    send_on()
    assert sent == [call] and ports.calls == 1
    relay.from_server(resp(9, {"content": []}))
    assert ports.calls == 0 and ports.host == [resp(9, {"content": []})]


def test_a_denied_call_is_answered_to_the_host_in_its_era() -> None:
    relay, ports, sent = session()
    ports.decision = "deny"
    relay.from_host(req("a", "tools/call", {"name": "rm", "arguments": {}}))
    relay.from_host(req("b", "tools/call", {"name": "rm", "arguments": {}, "_meta": MODERN}))
    assert sent == []
    legacy, modern = decoded(ports.host)
    assert legacy == {"jsonrpc": "2.0", "id": "a", "result": {"content": [{"type": "text", "text": "denied"}],
                                                              "isError": True}}
    assert modern["id"] == "b" and modern["result"]["resultType"] == "complete" and modern["result"]["isError"]


def test_a_call_the_host_cancels_while_it_waits_never_reaches_the_server() -> None:
    relay, ports, sent = session()
    ports.decision = "hold"
    relay.from_host(req(3, "tools/call", {"name": "echo", "arguments": {}}))
    relay.from_host(raw({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}))
    assert ports.cancelled == ["echo"] and sent == []
    _, reply = ports.held[0]
    reply(ChannelReply(result={"content": []}))  # the decision's late answer: the host expects none
    assert ports.host == []


# ---- a server's elicitation/create, by elicitationRoute --------------------------------------------------


def test_windows_route_the_host_never_sees_it_and_the_server_gets_the_windows_answer() -> None:
    relay, ports, sent = session("windows")
    initialize(relay, {"elicitation": {"form": {}}})
    relay.from_server(req(1, "elicitation/create", FORM))
    assert ports.host == [] and ports.cards[0].params == FORM
    ports.cards[0].resolve(ElicitationResult(action="accept", content={"name": "Ann"}))
    assert decoded(sent) == [{"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "content": {"name": "Ann"}}}]


def test_host_route_passes_the_request_and_the_hosts_own_answer_untouched() -> None:
    relay, ports, sent = session("host")
    initialize(relay, {"elicitation": {"form": {}}})
    asked = req(1, "elicitation/create", FORM)
    relay.from_server(asked)
    assert ports.host == [asked] and ports.cards[0].for_host
    answer = resp(1, {"action": "accept", "content": {"name": 42}})  # the server judges it, as direct
    relay.from_host(answer)
    assert sent == [answer]
    assert ports.cards[0].answered_by_host == ElicitationResult(action="accept", content={"name": 42})


def test_host_route_for_a_mode_the_host_did_not_declare_goes_to_the_windows() -> None:
    relay, ports, _ = session("host")
    initialize(relay, {"elicitation": {"form": {}}})
    relay.from_server(req(2, "elicitation/create", {"mode": "url", "url": "https://x.test/", "message": "m",
                                                    "elicitationId": "e1"}))
    assert ports.host == [] and not ports.cards[0].for_host


def test_params_main_cannot_read_are_refused_to_the_server_unless_the_host_answers_them_itself() -> None:
    unreadable = {"mode": "url", "message": "m"}  # a URL request without its url
    relay, ports, sent = session("windows")
    initialize(relay, {"elicitation": {"form": {}}})
    relay.from_server(req(3, "elicitation/create", unreadable))
    [refusal] = decoded(sent)
    assert refusal["id"] == 3 and refusal["error"]["code"] == -32602
    assert "request not shown" in refusal["error"]["message"] and ports.cards == [] and ports.host == []
    relay, ports, sent = session("host")
    initialize(relay, {"elicitation": {"form": {}}})
    passed = req(4, "elicitation/create", {"message": "m", "requestedSchema": "not a schema"})
    relay.from_server(passed)
    assert ports.host == [passed] and ports.cards == [] and sent == []  # the host's to judge; nothing audited


def test_first_route_a_window_first_cancels_the_hosts_copy_and_drops_its_late_answer() -> None:
    relay, ports, sent = session("first")
    initialize(relay, {"elicitation": {"form": {}}})
    relay.from_server(req(5, "elicitation/create", FORM))
    assert len(ports.host) == 1
    ports.cards[0].resolve(ElicitationResult(action="decline"))
    assert decoded(sent) == [{"jsonrpc": "2.0", "id": 5, "result": {"action": "decline"}}]
    assert decoded(ports.host[1:]) == [{"jsonrpc": "2.0", "method": "notifications/cancelled",
                                        "params": {"requestId": 5, "reason": "answered in Elicitron"}}]
    relay.from_host(resp(5, {"action": "accept", "content": {"name": "late"}}))
    assert len(sent) == 1


def test_first_route_the_host_first_goes_to_the_server_and_closes_the_card() -> None:
    relay, ports, sent = session("first")
    initialize(relay, {"elicitation": {"form": {}}})
    relay.from_server(req(5, "elicitation/create", FORM))
    answer = resp(5, {"action": "accept", "content": {"name": "Bo"}})
    relay.from_host(answer)
    assert sent == [answer]
    assert ports.cards[0].answered_by_host == ElicitationResult(action="accept", content={"name": "Bo"})


# ---- 2026-07-28: input rounds -------------------------------------------------------------------


def input_required(requests: dict[str, Any], state: str | None = "s-1") -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required", "inputRequests": requests}
    if state is not None:
        result["requestState"] = state
    return result


def test_a_modern_request_declares_elicitation_and_the_windows_answer_rounds_main_retries_itself() -> None:
    relay, ports, sent = session("windows")
    relay.from_host(req(11, "tools/call", {"name": "book", "arguments": {}, "_meta": MODERN}))
    seen = decoded(sent)[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert seen == {"sampling": {}, "elicitation": {"form": {}, "url": {}}}
    relay.from_server(resp(11, input_required({"k": {"method": "elicitation/create", "params": FORM}})))
    assert ports.host == []  # the host waits on its call; the windows answer
    ports.cards[0].resolve(ElicitationResult(action="accept", content={"name": "Ann"}))
    retry = decoded(sent)[1]
    assert retry["id"] == 11 and retry["method"] == "tools/call"
    assert retry["params"]["inputResponses"] == {"k": {"action": "accept", "content": {"name": "Ann"}}}
    assert retry["params"]["requestState"] == "s-1" and retry["params"]["name"] == "book"
    assert ports.calls == 1
    relay.from_server(resp(11, {"resultType": "complete", "content": []}))
    assert decoded(ports.host) == [{"jsonrpc": "2.0", "id": 11, "result": {"resultType": "complete", "content": []}}]
    assert ports.calls == 0


def test_a_mixed_round_gives_the_host_its_keys_and_merges_the_windows_answers_into_its_retry() -> None:
    relay, ports, sent = session("windows")
    relay.from_host(req(1, "tools/call", {"name": "t", "arguments": {}, "_meta": MODERN}))
    sampling = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    relay.from_server(resp(1, input_required({"s": sampling, "e": {"method": "elicitation/create", "params": FORM}})))
    to_host = decoded(ports.host)[0]["result"]
    assert to_host["inputRequests"] == {"s": sampling} and to_host["requestState"] == "s-1"
    # The host retries before the window answered: held until it has.
    relay.from_host(req(2, "tools/call", {"name": "t", "arguments": {}, "_meta": MODERN, "requestState": "s-1",
                                          "inputResponses": {"s": {"role": "assistant"}}}))
    assert len(sent) == 1
    ports.cards[0].resolve(ElicitationResult(action="decline"))
    retry = decoded(sent)[1]
    assert retry["id"] == 2 and retry["params"]["inputResponses"] == {"s": {"role": "assistant"},
                                                                      "e": {"action": "decline"}}
    assert retry["params"]["requestState"] == "s-1"


def test_a_round_that_is_all_the_hosts_passes_and_its_retry_is_not_decided_again() -> None:
    relay, ports, sent = session("windows")
    ports.decision = "hold"
    relay.from_host(req(1, "tools/call", {"name": "t", "arguments": {}, "_meta": MODERN}))
    ports.held[0][0]()  # allowed
    round_result = resp(1, input_required({"r": {"method": "roots/list"}}, state="opaque"))
    relay.from_server(round_result)
    assert ports.host == [round_result]
    relay.from_host(req(2, "tools/call", {"name": "t", "arguments": {}, "_meta": MODERN, "requestState": "opaque",
                                          "inputResponses": {"r": {"roots": []}}}))
    assert len(ports.held) == 1 and len(sent) == 2  # went on without a second approval


def test_a_round_without_request_state_gets_one_for_the_host_that_the_server_never_sees() -> None:
    relay, ports, sent = session("windows")
    relay.from_host(req(1, "prompts/get", {"name": "p", "_meta": MODERN}))
    relay.from_server(resp(1, input_required({"s": {"method": "sampling/createMessage", "params": {}},
                                              "e": {"method": "elicitation/create", "params": FORM}}, state=None)))
    token = decoded(ports.host)[0]["result"]["requestState"]
    ports.cards[0].resolve(ElicitationResult(action="cancel"))
    relay.from_host(req(2, "prompts/get", {"name": "p", "_meta": MODERN, "requestState": token,
                                           "inputResponses": {"s": {"x": 1}}}))
    retry = decoded(sent)[1]["params"]
    assert "requestState" not in retry and retry["inputResponses"] == {"s": {"x": 1}, "e": {"action": "cancel"}}


# ---- the end -----------------------------------------------------------------------------------


def test_closing_withdraws_every_open_card_and_the_calls_in_flight() -> None:
    relay, ports, _ = session("windows")
    relay.from_host(req(1, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_server(req(1, "elicitation/create", FORM))
    assert ports.calls == 1
    relay.close()
    assert ports.cards[0].withdrawn == "host-gone" and ports.calls == 0
    ports.cards[0].resolve(ElicitationResult(action="accept", content={"name": "x"}))  # too late: nothing sent
    assert ports.host == []


def test_a_session_whose_server_ended_closes_its_cards_as_server_closed() -> None:
    relay, ports, _ = session("windows")
    relay.from_server(req(1, "elicitation/create", FORM))
    relay.close("server-closed")
    assert ports.cards[0].withdrawn == "server-closed"


def test_the_host_cancelling_its_only_call_closes_that_calls_card_as_host_gone() -> None:
    relay, ports, sent = session("windows")
    relay.from_host(req(1, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_server(req(7, "elicitation/create", FORM))
    cancel = jsonrpc.notification("notifications/cancelled", {"requestId": 1, "reason": "timeout"})
    relay.from_host(cancel)
    assert ports.cards[0].withdrawn == "host-gone" and sent[-1] == cancel and ports.calls == 0
    relay.from_server(jsonrpc.notification("notifications/cancelled", {"requestId": 7}))
    assert ports.host == []  # the host never saw the server's request, nor hears of its cancel


def test_with_two_calls_in_flight_the_servers_cancel_after_the_hosts_closes_the_card_as_host_gone() -> None:
    relay, ports, _ = session("windows")
    relay.from_host(req(1, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_host(req(2, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_server(req(7, "elicitation/create", FORM))
    relay.from_server(req(8, "elicitation/create", FORM))
    relay.from_host(jsonrpc.notification("notifications/cancelled", {"requestId": 1}))
    assert [card.withdrawn for card in ports.cards] == [None, None]  # whose it is: the server's cancel tells
    relay.from_server(jsonrpc.notification("notifications/cancelled", {"requestId": 7}))
    assert [card.withdrawn for card in ports.cards] == ["host-gone", None]
    relay.from_server(jsonrpc.notification("notifications/cancelled", {"requestId": 8}))
    assert ports.cards[1].withdrawn == "cancelled"  # one cancelled call explains one withdrawal


def test_a_card_made_while_only_cancelled_calls_were_at_the_server_closes_at_once() -> None:
    relay, ports, _ = session("windows")
    relay.from_host(req(1, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_server(req(7, "elicitation/create", FORM))  # while only call 1 was at the server
    relay.from_host(req(2, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_server(req(8, "elicitation/create", FORM))  # call 1's or call 2's
    relay.from_host(jsonrpc.notification("notifications/cancelled", {"requestId": 1}))
    assert [card.withdrawn for card in ports.cards] == ["host-gone", None]
    relay.from_server(jsonrpc.notification("notifications/cancelled", {"requestId": 7}))
    relay.from_server(jsonrpc.notification("notifications/cancelled", {"requestId": 8}))
    assert ports.cards[1].withdrawn == "cancelled"  # call 1's card is known: this is not its
    assert ports.host == []  # the host never saw the server's requests, nor hears of their cancels


def test_a_servers_cancel_with_no_cancel_of_the_host_before_it_stays_cancelled() -> None:
    relay, ports, _ = session("windows")
    relay.from_host(req(1, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_host(req(2, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_server(req(7, "elicitation/create", FORM))
    relay.from_server(jsonrpc.notification("notifications/cancelled", {"requestId": 7}))
    assert ports.cards[0].withdrawn == "cancelled"


def test_a_request_made_after_the_hosts_cancel_is_not_that_calls() -> None:
    relay, ports, _ = session("windows")
    relay.from_host(req(1, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_host(req(2, "tools/call", {"name": "t", "arguments": {}}))
    relay.from_host(jsonrpc.notification("notifications/cancelled", {"requestId": 1}))
    relay.from_server(req(7, "elicitation/create", FORM))
    relay.from_server(jsonrpc.notification("notifications/cancelled", {"requestId": 7}))
    assert ports.cards[0].withdrawn == "cancelled"


# ---- the gateway's pump ------------------------------------------------------------------------


@dataclass
class Pump:
    main: list[bytes] = field(default_factory=list)
    host: list[bytes] = field(default_factory=list)
    refuse: str | None = None

    def to_main(self, message: bytes, headers: dict[str, str] | None) -> str | None:
        if self.refuse is not None:
            return self.refuse
        self.main.append(message)
        return None

    def make(self) -> RelayPump:
        return RelayPump(server="demo", session="s", to_main=self.to_main, to_host=self.host.append)


def test_messages_wait_in_order_while_main_is_away_and_go_when_it_answers() -> None:
    wire = Pump()
    pump = wire.make()
    pump.from_host(req(0, "initialize", {}))
    pump.from_host(raw({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert wire.main == [] and pump.waiting == 2
    pump.attached()
    assert [json.loads(m).get("method") for m in wire.main] == ["initialize", "notifications/initialized"]


def test_main_unreachable_answers_each_waiting_request_with_why() -> None:
    wire = Pump()
    pump = wire.make()
    pump.from_host(req(1, "tools/list"))
    pump.from_host(raw({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    pump.unreachable("Elicitron's main is not reachable: no main is running")
    assert decoded(wire.host) == [{"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32000, "message": "Elicitron's main is not reachable: no main is running"}}]


def test_a_lost_session_fails_open_requests_and_the_next_message_replays_the_handshake() -> None:
    wire = Pump()
    pump = wire.make()
    pump.attached()
    pump.from_host(req(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}))
    pump.from_main(resp(0, {"protocolVersion": "2025-11-25"}))
    pump.from_host(raw({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    pump.from_host(req(1, "tools/call", {"name": "slow"}))
    pump.lost("server 'demo': the server exited (code 1)")
    assert decoded(wire.host)[1] == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32000, "message": "tools/call to 'demo' was lost: server 'demo': the server exited (code 1)"}}
    wire.main.clear()
    pump.from_host(req(2, "tools/list"))
    replay, initialized, listing = decoded(wire.main)
    assert replay["method"] == "initialize" and replay["params"] == {"protocolVersion": "2025-11-25", "capabilities": {}}
    assert initialized["method"] == "notifications/initialized" and listing["id"] == 2
    pump.from_main(resp(replay["id"], {"protocolVersion": "2025-11-25"}))  # the replay's answer stays here
    assert len(wire.host) == 2


def test_an_initialize_the_server_refused_is_not_replayed_on_the_next_session() -> None:
    """A host in `auto` mode whose `server/discover` timed out sends `initialize`; the server, locked
    to the 2026-07-28 era by the late discover, refuses it and the host goes on in that era. A
    replayed `initialize` would lock the next session to the handshake era and refuse the host."""
    wire = Pump()
    pump = wire.make()
    watcher = pump.watcher = Watcher(wire.host)
    pump.attached()
    pump.from_host(req(0, "server/discover", {}))
    pump.from_host(req(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}))
    pump.from_main(resp(0, {"supportedVersions": ["2026-07-28"]}))  # too late: the host gave up on it
    pump.from_main(raw({"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "modern only"}}))
    pump.from_host(req(2, "server/discover", {}))
    pump.from_main(resp(2, {"supportedVersions": ["2026-07-28"]}))
    pump.lost("Elicitron's main went away")
    wire.main.clear()
    pump.from_host(req(3, "tools/call", {"name": "pid"}))
    assert [json.loads(m).get("id") for m in wire.main] == [3]  # no handshake goes first
    assert ("handshake", "initialize") not in watcher.seen  # nor would serve replay one, taking over


def test_a_message_main_cannot_take_is_answered_at_once() -> None:
    wire = Pump()
    pump = wire.make()
    pump.attached()
    wire.refuse = "Elicitron cannot pass this message on: it is 2,000,000 bytes, over the limit"
    pump.from_host(req(4, "tools/call", {"name": "big"}))
    assert decoded(wire.host)[0]["error"]["message"].startswith("Elicitron cannot pass")


class Watcher:
    """What main's host pipes tell serve, as a list."""

    def __init__(self, host: list[bytes]) -> None:
        self.host = host
        self.seen: list[tuple[str, object]] = []

    def opened(self, request_id: object, method: str) -> None:
        self.seen.append(("open", request_id))

    def done(self, request_id: object) -> None:
        answered = any(json.loads(m).get("id") == request_id for m in self.host)
        self.seen.append(("done" if answered else "done, unanswered", request_id))

    def handshake(self, raw_message: bytes) -> None:
        self.seen.append(("handshake", json.loads(raw_message).get("method")))


def test_the_watcher_hears_every_open_request_and_its_end_after_the_host_has_its_answer() -> None:
    wire = Pump()
    pump = wire.make()
    watcher = pump.watcher = Watcher(wire.host)
    pump.attached()
    pump.from_host(req(0, "initialize", {"capabilities": {}}))
    pump.from_main(resp(0, {"protocolVersion": "2025-11-25"}))
    pump.from_host(raw({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    pump.from_host(req(1, "tools/call", {"name": "slow"}))
    pump.from_host(req(2, "tools/call", {"name": "cancelled"}))
    pump.from_host(raw({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}))
    pump.from_host(req(3, "tools/list"))
    pump.lost("main is stopping")
    assert watcher.seen == [("open", 0), ("handshake", "initialize"), ("done", 0), ("handshake",
                            "notifications/initialized"), ("open", 1), ("open", 2), ("done, unanswered", 2),
                            ("open", 3), ("done", 1), ("done", 3)]  # a cancelled request expects no answer


def test_a_pump_taking_over_answers_what_was_open_and_replays_the_handshake() -> None:
    wire = Pump()
    pump = wire.make()
    pump.restore([req(0, "initialize", {"capabilities": {"x": {}}}),
                  raw({"jsonrpc": "2.0", "method": "notifications/initialized"})], {5: "tools/call"})
    pump.detached("Elicitron's main went away")
    assert decoded(wire.host) == [{"jsonrpc": "2.0", "id": 5, "error": {
        "code": -32000, "message": "tools/call to 'demo' was lost: Elicitron's main went away"}}]
    pump.from_host(req(6, "tools/list"))
    pump.attached()
    replay, initialized, listing = decoded(wire.main)
    assert replay["method"] == "initialize" and replay["params"] == {"capabilities": {"x": {}}}
    assert initialized["method"] == "notifications/initialized" and listing["id"] == 6


def test_a_loss_while_messages_wait_for_main_answers_only_what_was_sent() -> None:
    wire = Pump()
    pump = wire.make()
    pump.attached()
    pump.from_host(req(1, "tools/call", {"name": "sent"}))
    pump.detached("Elicitron's main went away")
    pump.from_host(req(2, "tools/list"))  # waits for the next main
    pump.lost("Elicitron's main went away (its pid is gone)")
    assert [m["id"] for m in decoded(wire.host)] == [1]
    wire.main.clear()
    pump.attached()
    assert [m.get("id") for m in decoded(wire.main)] == [2]
