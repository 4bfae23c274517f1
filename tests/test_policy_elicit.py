"""Policies on elicitations in process (action `elicit`, main_process/policy/hook.py): in a host's
relayed session a `forbid` declines a server's form request before any rule or card, audited with
the policy's id and reason; a `permit` changes nothing (a policy cannot fill a form); URL requests
are never answered by a policy; main's own session and programs' questions are not asked."""

import asyncio
from collections.abc import Callable
from pathlib import Path

from kit.consent_parts import AuditedPending, QuietConsentPorts

from main_process.config import StdioServerConfig
from main_process.consent.consent import Consent
from main_process.consent.elicitation_gate import Answered, Deliver, ElicitationGate, HostModes
from main_process.consent.pending import Elicitation, RequestOptions
from main_process.policy.live import Policies
from main_process.servers.server_identity import server_identity
from shared.elicit_params import ElicitParams
from shared.messages import CallError, ElicitationResult

POLICIES = """\
@id("no-asking")
@reason("the bank server asks nobody through an agent")
forbid(principal, action == Action::"elicit", resource == Server::"bank");

@id("cursor-may-ask")
permit(principal == Host::"Cursor", action == Action::"elicit", resource == Server::"demo");

@id("no-cursor-calls")
forbid(principal == Host::"Cursor", action == Action::"callTool", resource in Server::"demo");
"""
FORM = {"mode": "form", "message": "Name?", "requestedSchema": {"type": "object", "properties": {
    "name": {"type": "string"}}}}
URL = {"mode": "url", "message": "Sign in", "url": "https://bank.example/login", "elicitationId": "e1"}
HOST = HostModes(form=False, url=False, name="Claude Desktop")  # the host answers nothing itself: the windows


class _Config:
    elicitation_route = "windows"


class Server:
    config = _Config()

    def screen_elicitation(self, params: ElicitParams) -> ElicitationResult | CallError | None:
        return None


def with_gate(tmp_path: Path, body: Callable[[ElicitationGate, AuditedPending], None]) -> None:
    path = tmp_path / "team.cedar"
    path.write_text(POLICIES, encoding="utf-8")

    async def run() -> None:
        loop = asyncio.get_running_loop()
        pending = AuditedPending(loop)
        config = StdioServerConfig(name="bank", command="x")
        consent = Consent(QuietConsentPorts(pending), None, [], [], loop, {"bank": server_identity(config)},
                          Policies([path]))
        try:
            body(ElicitationGate(pending, consent), pending)
        finally:
            await consent.close()

    asyncio.run(run())


def test_a_forbid_declines_a_form_request_in_a_hosts_session_audited_with_the_policy(tmp_path: Path) -> None:
    def body(gate: ElicitationGate, pending: AuditedPending) -> None:
        request = Elicitation.read("bank", FORM)
        decided = gate.decide(request, Server(), host=HOST)
        assert decided == Answered(ElicitationResult(action="decline"), rule="policy:no-asking",
                                   reason="the bank server asks nobody through an agent")
        handed: list[str] = []
        gate.record(request, decided, RequestOptions(timeout_s=60), lambda: handed.append("declined"))
        assert pending.recorded == [("decline", "policy:no-asking", "the bank server asks nobody through an agent")]
        assert handed == ["declined"] and len(pending) == 0  # nothing opened

    with_gate(tmp_path, body)


def test_url_requests_main_own_session_and_permits_go_on_as_today(tmp_path: Path) -> None:
    def body(gate: ElicitationGate, pending: AuditedPending) -> None:
        # a sign-in or a URL to open: a person opens it or nobody does, never a policy
        assert isinstance(gate.decide(Elicitation.read("bank", URL), Server(), host=HOST), Deliver)
        # main's own session (a window or `elicitron call` called the tool): no host, no policy
        assert isinstance(gate.decide(Elicitation.read("bank", FORM), Server()), Deliver)
        # a permit cannot fill the form: the card shows as without it
        cursor = HostModes(form=False, url=False, name="Cursor")
        assert gate.decide(Elicitation.read("demo", FORM), Server(), host=cursor) == Deliver(
            to_host=False, to_windows=True)
        # a forbid of Cursor's calls is not a forbid of the server asking it something
        assert isinstance(gate.decide(Elicitation.read("demo", FORM), Server(), host=cursor), Deliver)
        assert pending.recorded == []

    with_gate(tmp_path, body)
