"""A host's call that waits on a card longer than the host waits (issue 36, item 4), in process: a
relayed session (`RelaySession`) with main's own progress (relay/progress.py) and the approval's
long waits (consent/long_wait.py) on a SettableClock, so a 50 s deadline takes no time. What is
checked is what the host reads: its progress notifications, the "still pending, retry" tool error,
the retry's answer; and how many cards the person sees.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from test_relay_core import FORM, Ports, decoded, req, resp

from main_process.clock import SettableClock
from main_process.config import parse_config
from main_process.consent.long_wait import HostWait, LongWaits, SharedCard, WaitSettings
from main_process.consent.tool_approval import _HostCall
from main_process.relay.host_tasks import HostTasks
from main_process.relay.progress import HostProgress
from main_process.relay.relay import RelaySession
from main_process.servers.servers import ManagedServer
from main_process.wire.peer_calls import Cancel
from main_process.wire.peers import Peer
from shared import jsonrpc
from shared.errors import ConfigError
from shared.messages import ChannelReply, ElicitationResult

SETTINGS = WaitSettings(progress_every_s=5.0, retry_after_s=50.0, kept_s=300.0, machine="desk")
DENIED = ChannelReply(result={"content": [{"type": "text", "text": "The user denied this call"}], "isError": True})


@dataclass
class _Config:
    elicitation_route: str = "windows"


@dataclass
class _Server:
    config: _Config = field(default_factory=_Config)
    name: str = "demo"

    def screen_elicitation(self, params: Any) -> None:
        return None


@dataclass
class ApprovalPorts(Ports):
    """Ports whose consent decision is tool_approval.py's card path: every call needs a card, and
    the call waits through `LongWaits` (the card is opened with the SharedCard, as `_ask` does)."""

    waits: LongWaits | None = None
    opened: list[SharedCard] = field(default_factory=list)
    withdrawn: list[SharedCard] = field(default_factory=list)

    def decide_call(self, session: RelaySession, tool: str, arguments: dict[str, Any], send_on: Callable[[], None],
                    reply: Callable[[ChannelReply], None], wait: HostWait | None) -> Cancel | None:
        if self.decision != "ask":
            return super().decide_call(session, tool, arguments, send_on, reply, wait)
        assert self.waits is not None and wait is not None
        call = _HostCall(session.server, tool, arguments, session.peer, reply, send_on, wait)
        self.waits.ask(call, self._open)
        return call.cancel

    def _open(self, card: SharedCard) -> None:
        self.opened.append(card)
        card.stage(lambda: self.withdrawn.append(card))


@dataclass
class Setup:
    clock: SettableClock
    waits: LongWaits
    ports: ApprovalPorts
    relay: RelaySession
    sent: list[bytes]

    def host_got(self) -> list[dict[str, Any]]:
        got = decoded(self.ports.host)
        self.ports.host.clear()
        return got

    def call(self, request_id: int, arguments: dict[str, Any], token: str | None = None) -> bytes:
        params: dict[str, Any] = {"name": "echo", "arguments": arguments}
        if token is not None:
            params["_meta"] = {"progressToken": token}
        raw = req(request_id, "tools/call", params)
        self.relay.from_host(raw)
        return raw


def setup(decision: str = "ask", name: str = "s1", waits: LongWaits | None = None,
          make_tasks: Callable[[SettableClock, Callable[[jsonrpc.Id], None]], HostTasks] | None = None) -> Setup:
    """`make_tasks(clock, cancel)`: the session's tasks, on the setup's clock (none by default)."""
    clock = SettableClock()
    waits = waits or LongWaits(SETTINGS, clock)
    ports = ApprovalPorts(decision=decision, waits=waits)
    sent: list[bytes] = []
    progress = HostProgress(lambda message: ports.to_host(relay, message), waits.clock, SETTINGS.progress_every_s,
                            SETTINGS.waiting_message)  # to the session made next
    relay = RelaySession(peer=Peer(b"r", "w1", "Claude", "host", 0.0), name=name,
                         server=cast(ManagedServer, _Server()), ports=ports, progress=progress,
                         make_tasks=None if make_tasks is None else
                         lambda cancel: make_tasks(cast(SettableClock, waits.clock), cancel))
    relay.to_server = lambda message, headers: sent.append(message)
    return Setup(cast(SettableClock, waits.clock), waits, ports, relay, sent)


def progress(token: str, value: float) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": value, "message": "waiting for approval on desk"}}


def text(message: dict[str, Any]) -> str:
    return "".join(item["text"] for item in message["result"]["content"])


# ---- progress --------------------------------------------------------------------------------------


def test_a_call_with_a_progress_token_hears_progress_every_interval_until_its_card_is_answered() -> None:
    s = setup()
    call = s.call(1, {"text": "hi"}, token="t1")
    s.clock.advance(4.9)
    assert s.host_got() == []
    s.clock.advance(0.1)
    assert s.host_got() == [progress("t1", 1)]
    s.clock.advance(120)  # no deadline for a host that hears progress: it waits as long as the person
    got = s.host_got()
    assert got == [progress("t1", n) for n in range(2, 26)]
    s.ports.opened[0].run()  # the person allowed it
    assert s.sent == [call]
    s.clock.advance(60)
    assert s.host_got() == []  # the card is answered: main says nothing more
    s.relay.from_server(jsonrpc.notification("notifications/progress", {"progressToken": "t1", "progress": 1,
                                                                        "total": 3}))
    s.relay.from_server(jsonrpc.notification("notifications/progress", {"progressToken": "t1", "progress": 30,
                                                                        "total": 100}))
    first, second = s.host_got()
    assert first["params"]["progress"] == 26 and "total" not in first["params"]  # values never go back
    assert second["params"] == {"progressToken": "t1", "progress": 30, "total": 100}  # as the server wrote it
    s.relay.from_server(resp(1, {"content": []}))
    assert s.host_got() == [{"jsonrpc": "2.0", "id": 1, "result": {"content": []}}]


def test_a_call_the_host_cancels_while_it_hears_progress_hears_no_more_and_its_card_goes() -> None:
    s = setup()
    s.call(1, {"text": "hi"}, token="t1")
    s.clock.advance(5)
    s.host_got()
    s.relay.from_host(jsonrpc.notification("notifications/cancelled", {"requestId": 1}))
    assert s.ports.withdrawn == s.ports.opened
    s.clock.advance(60)
    assert s.host_got() == [] and s.sent == []


def test_while_the_servers_elicitation_waits_on_a_card_its_calls_with_a_token_hear_progress() -> None:
    s = setup(decision="allow")  # no approval: the call is at the server, which asks the person
    s.call(1, {"text": "hi"}, token="t1")
    s.call(2, {"text": "no token"})
    s.relay.from_server(req(7, "elicitation/create", FORM))
    s.clock.advance(10)
    assert s.host_got() == [progress("t1", 1), progress("t1", 2)]
    s.ports.cards[0].resolve(ElicitationResult(action="accept", content={"name": "Ann"}))
    s.clock.advance(60)
    assert s.host_got() == []


def test_a_host_that_sent_no_token_never_gets_progress() -> None:
    s = setup()
    s.call(1, {"text": "hi"})
    s.clock.advance(49)
    assert s.host_got() == []


# ---- the retry path --------------------------------------------------------------------------------


def still_pending(s: Setup, request_id: int) -> None:
    s.clock.advance(SETTINGS.retry_after_s)
    (answer,) = s.host_got()
    assert answer["id"] == request_id and answer["result"]["isError"] is True
    assert "still pending" in text(answer) and "desk" in text(answer) and "same arguments" in text(answer)


def test_without_a_token_the_call_is_told_to_retry_and_the_retry_gets_the_persons_decision() -> None:
    s = setup()
    s.call(1, {"text": "hi"})
    s.clock.advance(49.9)
    assert s.host_got() == []
    still_pending(s, 1)
    assert s.ports.withdrawn == []  # the card stays open
    s.ports.opened[0].run()  # the person allows it, after the host was told to retry
    assert s.sent == []  # the first call was answered already: nothing runs until the retry
    retry = s.call(2, {"text": "hi"})
    assert s.sent == [retry] and len(s.ports.opened) == 1  # it runs, and no second card
    s.call(3, {"text": "hi"})
    assert len(s.ports.opened) == 2  # the decision answered one retry: another call asks again


def test_a_denial_answers_the_retry_with_the_denial() -> None:
    s = setup()
    s.call(1, {"text": "rm"})
    still_pending(s, 1)
    s.ports.opened[0].reply(DENIED)
    s.call(2, {"text": "rm"})
    (answer,) = s.host_got()
    assert answer["id"] == 2 and text(answer) == "The user denied this call" and s.sent == []


def test_a_retry_while_the_card_is_open_waits_on_that_card() -> None:
    s = setup()
    s.call(1, {"text": "hi"})
    still_pending(s, 1)
    retry = s.call(2, {"text": "hi"})
    assert len(s.ports.opened) == 1
    still_pending(s, 2)  # it too is told to retry when the person takes longer still
    retry = s.call(3, {"text": "hi"})
    s.clock.advance(10)
    s.ports.opened[0].run()
    assert s.sent == [retry] and len(s.ports.opened) == 1


def test_the_decision_is_for_that_exact_call_only() -> None:
    s = setup()
    s.call(1, {"text": "hi", "n": 1})
    still_pending(s, 1)
    s.ports.opened[0].run()
    s.call(2, {"text": "other"})
    assert len(s.ports.opened) == 2 and s.sent == []  # other arguments: a card of their own
    other_session = setup(name="s2", waits=s.waits)
    other_session.call(3, {"n": 1, "text": "hi"})
    assert other_session.sent == []  # the same call from another session of the host: asked again
    same = s.call(4, {"n": 1, "text": "hi"})  # the same arguments in another key order
    assert s.sent == [same]


def test_the_kept_decision_lapses() -> None:
    s = setup()
    s.call(1, {"text": "hi"})
    still_pending(s, 1)
    s.ports.opened[0].run()
    s.clock.advance(SETTINGS.kept_s)
    s.call(2, {"text": "hi"})
    assert s.sent == [] and len(s.ports.opened) == 2


def test_the_session_ending_takes_back_a_card_its_call_was_told_to_retry_on() -> None:
    s = setup()
    s.call(1, {"text": "hi"})
    still_pending(s, 1)
    s.relay.close()
    s.waits.session_ended((b"r", "s1"))  # (Relay._end does this after the session's close)
    assert s.ports.withdrawn == s.ports.opened


def test_two_identical_calls_not_told_to_retry_each_get_a_card() -> None:
    s = setup()
    s.call(1, {"text": "hi"})
    s.call(2, {"text": "hi"})
    assert len(s.ports.opened) == 2  # "allow once" on one card never lets two calls through


# ---- the config --------------------------------------------------------------------------------------


def test_the_waits_come_from_the_config_with_defaults() -> None:
    config = parse_config({"mcpServers": {}}, "mcp.json")
    assert (config.wait_progress_s, config.wait_retry_s, config.wait_retry_kept_s) == (5.0, 50.0, 300.0)
    config = parse_config({"mcpServers": {}, "elicitron": {"waitProgressSeconds": 1, "waitRetrySeconds": 2.5}},
                          "mcp.json")
    assert (config.wait_progress_s, config.wait_retry_s) == (1.0, 2.5)
    with pytest.raises(ConfigError, match="elicitron.waitRetrySeconds must be a number of seconds above 0"):
        parse_config({"mcpServers": {}, "elicitron": {"waitRetrySeconds": 0}}, "mcp.json")
