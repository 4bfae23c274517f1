"""The ElicitationGate in process, with plain values: rules first (whatever the route), then the
route of a relayed session's request, then the screening of what goes to the windows."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from kit.consent_parts import AuditedPending

from main_process.consent.elicitation_gate import (
    Answered,
    Deliver,
    ElicitationGate,
    HostModes,
    Refused,
    decide,
    route,
)
from main_process.consent.pending import Elicitation, RequestOptions
from shared.elicit_params import ElicitParams
from shared.errors import UndeliverableRequestError
from shared.messages import CallError, ElicitationResult

FORM = {"mode": "form", "message": "Name?", "requestedSchema": {"type": "object", "properties": {
    "name": {"type": "string"}}, "required": ["name"]}}
URL = {"mode": "url", "message": "Sign the form", "url": "https://example.com/form", "elicitationId": "e1"}
ALICE = ElicitationResult(action="accept", content={"name": "Alice"})
BOTH_MODES, NEITHER = HostModes(form=True, url=True), HostModes(form=False, url=False)


@dataclass
class _Config:
    elicitation_route: str = "windows"


@dataclass
class Server:
    """A server as the gate sees it: its route, and what its screening says (None: show it)."""

    route: str = "windows"
    screened: ElicitationResult | CallError | None = None
    seen: list[str] = field(default_factory=list)

    @property
    def config(self) -> _Config:
        return _Config(self.route)

    def screen_elicitation(self, params: ElicitParams) -> ElicitationResult | CallError | None:
        self.seen.append(params.message)
        return self.screened


@dataclass
class Rules:
    """A consent layer with one rule: it answers the server's (or the asker's) "Name?"."""

    looked_up: list[str] = field(default_factory=list)

    def answer_for(self, elicitation: Elicitation) -> tuple[str, ElicitationResult] | None:
        self.looked_up.append(f"server {elicitation.server}")
        return ("r-1", ALICE) if elicitation.params.message == "Name?" else None

    def answer_asker(self, asker: str, params: ElicitParams) -> tuple[str, ElicitationResult] | None:
        self.looked_up.append(f"asker {asker}")
        return ("r-2", ALICE) if asker == "deploy.sh" else None

    def policy_declines(self, server: str, host: str) -> tuple[str, str | None] | None:
        self.looked_up.append(f"policies {host}")
        return None


def read(params: dict[str, Any]) -> Elicitation:
    return Elicitation.read("demo", params)


@pytest.mark.parametrize("server_route", ["windows", "host", "first"])
def test_a_rule_answers_first_whatever_the_route_and_nothing_is_screened(server_route: str) -> None:
    server = Server(server_route)
    assert decide(Rules(), read(FORM), server, host=BOTH_MODES) == Answered(ALICE, rule="r-1")
    assert server.seen == []  # "Decline all" or the burst limit never see what a rule answered


def test_url_requests_are_never_answered_by_a_rule_nor_looked_up() -> None:
    rules = Rules()
    assert decide(rules, read(URL), Server()) == Deliver(to_host=False, to_windows=True)
    assert rules.looked_up == []


def test_a_question_is_answered_by_its_askers_rules_only_and_goes_to_the_windows_unscreened() -> None:
    rules = Rules()
    assert decide(rules, read(FORM), asker="deploy.sh") == Answered(ALICE, rule="r-2")
    assert decide(rules, read(FORM), asker="other") == Deliver(to_host=False, to_windows=True)
    assert rules.looked_up == ["asker deploy.sh", "asker other"]  # never a server's rule


def test_the_route_of_a_relayed_sessions_request_by_the_hosts_declared_modes() -> None:
    form, url = read({**FORM, "message": "Other?"}), read(URL)
    assert route("windows", form, BOTH_MODES) == Deliver(False, True)
    assert route("host", form, BOTH_MODES) == Deliver(True, False)
    assert route("first", url, BOTH_MODES) == Deliver(True, True)
    assert route("host", form, NEITHER) == Deliver(False, True)  # a host that cannot answer: the windows
    assert route("host", url, HostModes(form=True, url=False)) == Deliver(False, True)
    unreadable = UndeliverableRequestError("params.message must be a string")
    assert route("host", unreadable, HostModes(form=True, url=False)) == Deliver(True, False)  # as a form


def test_the_host_alone_gets_the_servers_own_request_unscreened_even_one_main_cannot_read() -> None:
    server = Server("host", screened=ElicitationResult(action="decline"))
    unreadable = UndeliverableRequestError("params.message must be a string")
    assert decide(Rules(), unreadable, server, host=BOTH_MODES) == Deliver(to_host=True, to_windows=False)
    assert decide(None, read({**FORM, "message": "Other?"}), server, host=BOTH_MODES) == Deliver(True, False)
    assert server.seen == []


def test_what_goes_to_the_windows_is_screened_after_the_rules_and_the_route() -> None:
    unreadable = UndeliverableRequestError("params.message must be a string")
    refused = decide(Rules(), unreadable, Server("first"), host=BOTH_MODES)
    assert isinstance(refused, Refused) and refused.error.code == -32602
    assert refused.error.message == "request not shown: params.message must be a string"
    schema = CallError(code=-32602, message="unsupported requestedSchema: ...")
    assert decide(None, read(FORM), Server(screened=schema)) == Refused(schema)
    declined = Server("first", screened=ElicitationResult(action="decline"))  # "Decline all from this server"
    assert decide(None, read(FORM), declined, host=BOTH_MODES) == Answered(ElicitationResult(action="decline"))
    shown = Server("first")
    assert decide(None, read(FORM), shown, host=BOTH_MODES) == Deliver(to_host=True, to_windows=True)
    assert shown.seen == ["Name?"]


def test_a_rules_answer_is_audited_with_its_id_before_it_is_handed_on_and_the_screenings_at_once() -> None:
    async def body() -> None:
        pending = AuditedPending(asyncio.get_running_loop())
        gate = ElicitationGate(pending, Rules())
        handed: list[str] = []
        decided = gate.decide(read(FORM), Server())
        assert isinstance(decided, Answered)
        gate.record(read(FORM), decided, RequestOptions(timeout_s=60), lambda: handed.append("rule"))
        gate.record(read(FORM), Answered(ElicitationResult(action="decline")), RequestOptions(timeout_s=60),
                    lambda: handed.append("screening"))
        assert pending.recorded == [("accept", "r-1", None)] and handed == ["rule", "screening"]
        assert len(pending) == 0  # nothing opened

    asyncio.run(body())
