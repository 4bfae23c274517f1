"""The pending lifecycle on its own (no sockets): open -> delivered -> answered | expired |
cancelled | server-closed, each closed through the same path: dismissed, audited, resolved."""

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from main_process.audit import format_entries
from main_process.clock import SettableClock
from main_process.consent.audit_writer import AuditWriter
from main_process.consent.pending import Elicitation, PendingRequests, RequestOptions
from main_process.store.factory import open_store
from shared import channels
from shared.errors import ProtocolError, UndeliverableRequestError, WireCode
from shared.messages import ElicitationResult

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}, "required": ["name"]}
FORM = {"mode": "form", "message": "Your name?", "requestedSchema": SCHEMA}
WINDOW_A, WINDOW_B, ASKER = b"\x00a", b"\x00b", b"\x00asker"
MINUTE = RequestOptions(timeout_s=60)


class Outbox:
    """Two attached windows; records every message sent, decoded."""

    def __init__(self) -> None:
        self.attached = [WINDOW_A, WINDOW_B]
        self.sent: list[tuple[bytes, str, dict[str, Any]]] = []

    def renderers(self) -> list[bytes]:
        return list(self.attached)

    def send(self, routing_ids: Iterable[bytes], frames: list[bytes]) -> list[bytes]:
        reached = [rid for rid in routing_ids if rid in self.attached]
        for rid in reached:
            self.sent.append((rid, frames[0].decode(), msgspec.msgpack.decode(frames[1])))
        return reached

    def topics(self, topic: str) -> list[tuple[bytes, dict[str, Any]]]:
        return [(rid, body) for rid, t, body in self.sent if t == topic]


def request(params: dict[str, Any] | None = None) -> Elicitation:
    return Elicitation.read("demo", params or FORM)


def result(action: str, content: Any = None) -> bytes:
    body: dict[str, Any] = {"action": action}
    if content is not None:
        body["content"] = content
    return msgspec.msgpack.encode(body)


def run(test: Any) -> Any:
    return asyncio.run(test())


def test_an_answer_dismisses_everywhere_audits_and_resolves_once(tmp_path: Path) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        store = open_store(None, audit_path=tmp_path / "audit.sqlite3", record_values=True)
        outbox = Outbox()
        pending = PendingRequests(outbox, loop, audit=AuditWriter(store.audit, loop))
        answers: list[ElicitationResult] = []
        opened = pending.open(request(), MINUTE, answers.append)
        assert [rid for rid, _ in outbox.topics(channels.INVOKE)] == [WINDOW_A, WINDOW_B]
        pending.answer(WINDOW_B, "window-b", opened.channel, result("accept", {"name": "Ada"}))
        assert answers == [ElicitationResult(action="accept", content={"name": "Ada"})]
        dismissals = outbox.topics(channels.DISMISS)
        assert sorted(rid for rid, _ in dismissals) == [WINDOW_A, WINDOW_B]
        assert dismissals[0][1] == {"responseChannel": opened.channel, "reason": "answered", "by": "window-b"}
        entry = (await store.audit.entries())[0]
        assert (entry.outcome, entry.window, entry.content) == ("accept", "window-b", {"name": "Ada"})
        with pytest.raises(ProtocolError) as late:
            pending.answer(WINDOW_A, "window-a", opened.channel, result("decline"))
        assert late.value.code == WireCode.ALREADY_ANSWERED
        assert answers == [ElicitationResult(action="accept", content={"name": "Ada"})] and len(pending) == 0
        await store.close()

    run(body)


def test_refusals_leave_the_request_open_and_never_read_a_stranger_s_body() -> None:
    async def body() -> None:
        outbox = Outbox()
        pending = PendingRequests(outbox, asyncio.get_running_loop())
        answers: list[ElicitationResult] = []
        opened = pending.open(request(), MINUTE, answers.append)
        garbage = b"\xc1 not msgpack"
        with pytest.raises(ProtocolError) as stranger:
            pending.answer(b"\x00stranger", "x", opened.channel, garbage)
        assert stranger.value.code == WireCode.NOT_RECIPIENT  # not bad-body: the body was never read
        with pytest.raises(ProtocolError) as unknown:
            pending.answer(WINDOW_A, "a", channels.new_result_channel(), garbage)
        assert unknown.value.code == WireCode.UNKNOWN_CHANNEL
        with pytest.raises(ProtocolError) as bad:
            pending.answer(WINDOW_A, "a", opened.channel, garbage)
        assert bad.value.code == WireCode.BAD_BODY
        with pytest.raises(ProtocolError) as invalid:
            pending.answer(WINDOW_A, "a", opened.channel, result("accept", {"name": ""}))
        assert invalid.value.code == WireCode.INVALID_CONTENT
        assert answers == [] and pending.get(opened.channel) is opened
        pending.answer(WINDOW_A, "a", opened.channel, result("decline", {"name": "dropped"}))
        assert answers == [ElicitationResult(action="decline")]

    run(body)


def test_expiry_cancels_the_asker_and_dismisses_expired(tmp_path: Path) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        store = open_store(None, audit_path=tmp_path / "audit.sqlite3")
        outbox = Outbox()
        clock = SettableClock()
        pending = PendingRequests(outbox, loop, audit=AuditWriter(store.audit, loop), clock=clock)
        asked = asyncio.ensure_future(pending.ask(request(), RequestOptions(timeout_s=600)))
        await asyncio.sleep(0)  # the request opens
        clock.advance(599.9)
        assert len(pending) == 1 and not outbox.topics(channels.DISMISS)
        clock.advance(0.1)  # ten minutes, on the dot
        answer = await asyncio.wait_for(asked, 5)
        assert answer == ElicitationResult(action="cancel") and len(pending) == 0
        channel = outbox.topics(channels.INVOKE)[0][1]["responseChannel"]
        with pytest.raises(ProtocolError) as late:  # an answer after expiry is refused, the asker untouched
            pending.answer(WINDOW_A, "a", channel, result("accept", {"name": "Ada"}))
        assert (late.value.code, late.value.message) == (WireCode.ALREADY_ANSWERED, "request is expired")
        assert {body["reason"] for _, body in outbox.topics(channels.DISMISS)} == {"expired"}
        assert (await store.audit.entries())[0].outcome == "expired"
        await store.close()

    run(body)


def test_a_cancelled_asker_withdraws_with_the_reason_it_gives() -> None:
    async def body() -> None:
        outbox = Outbox()
        pending = PendingRequests(outbox, asyncio.get_running_loop())
        task = asyncio.ensure_future(pending.ask(request(), MINUTE, cancel_reason=lambda: "server-closed"))
        while not outbox.topics(channels.INVOKE):
            await asyncio.sleep(0)  # one loop turn: the task opens its request
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [body["reason"] for _, body in outbox.topics(channels.DISMISS)] == ["server-closed"] * 2
        channel = outbox.topics(channels.INVOKE)[0][1]["responseChannel"]
        assert pending.closed_reason(channel) == "server-closed"

    run(body)


def test_a_server_closing_and_an_owner_leaving_withdraw_only_their_own() -> None:
    async def body() -> None:
        outbox = Outbox()
        pending = PendingRequests(outbox, asyncio.get_running_loop())
        answers: dict[str, list[ElicitationResult]] = {"server": [], "other": [], "asked": []}
        from_server = pending.open(request(), MINUTE, answers["server"].append)
        other = pending.open(Elicitation.read("other", FORM), MINUTE, answers["other"].append)
        asked = pending.open(Elicitation.read("deploy.sh", FORM),
                             RequestOptions(timeout_s=60, owner=ASKER, kind="question"), answers["asked"].append)
        pending.withdraw_server("demo")
        pending.withdraw_owner(ASKER)
        assert answers == {"server": [ElicitationResult(action="cancel")], "other": [],
                           "asked": [ElicitationResult(action="cancel")]}
        assert pending.closed_reason(from_server.channel) == "server-closed"
        assert pending.closed_reason(asked.channel) == "cancelled"
        assert pending.all() == [other]

    run(body)


def test_a_host_that_stopped_waiting_is_a_cancel_with_its_cause_and_an_audit_row_saying_so(tmp_path: Path) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        store = open_store(None, audit_path=tmp_path / "audit.sqlite3")
        outbox = Outbox()
        pending = PendingRequests(outbox, loop, audit=AuditWriter(store.audit, loop))
        answered: asyncio.Future[ElicitationResult] = loop.create_future()
        host = b"\x00host"
        card = pending.open(request(), RequestOptions(timeout_s=60, owner=host, via="Claude", kind="approval"),
                            answered.set_result)
        pending.withdraw_owner(host, "host-gone")
        dismissals = outbox.topics(channels.DISMISS)
        # A v1 window reads a plain "cancelled"; the extension `cause` says the host stopped waiting.
        assert [body for _, body in dismissals] == [{"responseChannel": card.channel, "reason": "cancelled",
                                                     "cause": "host-gone"}] * 2
        # The asker hears once the outcome is committed.
        assert await asyncio.wait_for(answered, 5) == ElicitationResult(action="cancel")
        assert pending.closed_reason(card.channel) == "host-gone"
        entries = await store.audit.entries()
        assert entries[0].outcome == "host-gone" and "host stopped waiting" in format_entries(entries)
        await store.close()

    run(body)


def test_nothing_that_cannot_be_carried_ever_becomes_pending() -> None:
    async def body() -> None:
        outbox = Outbox()
        pending = PendingRequests(outbox, asyncio.get_running_loop(), max_pending_bytes=7_000)
        poison = {**FORM, "requestedSchema": {"type": "object", "properties": {
            "n": {"type": "integer", "maximum": 2**70}}}}
        with pytest.raises(UndeliverableRequestError, match="cannot carry"):
            pending.open(request(poison), MINUTE, print)
        huge = {**FORM, "message": "x" * 5000}
        with pytest.raises(UndeliverableRequestError, match="maxRequestBytes"):
            pending.open(request(huge), RequestOptions(timeout_s=60, max_bytes=4096), print)
        for _ in range(2):
            pending.open(request({**FORM, "message": "y" * 3000}), MINUTE, print)
        with pytest.raises(UndeliverableRequestError, match="already wait"):
            pending.open(request({**FORM, "message": "y" * 3000}), MINUTE, print)
        assert len(pending) == 2 and outbox.topics(channels.INVOKE) and len(outbox.topics(channels.INVOKE)) == 4

    run(body)


def test_a_window_that_attaches_gets_what_fits_in_its_welcome_and_the_rest_after() -> None:
    async def body() -> None:
        outbox = Outbox()
        outbox.attached = []
        unseen: list[int] = []
        pending = PendingRequests(outbox, asyncio.get_running_loop(), welcome_pending_bytes=5000,
                                  unseen=lambda _requests: unseen.append(1))
        opened = [pending.open(request({**FORM, "message": f"{i}" * 2000}), MINUTE, print)
                  for i in range(4)]
        only_host = pending.open(request(), RequestOptions(timeout_s=60, record_only=True), print)
        assert len(unseen) == 4  # no window saw those meant for windows: the auto-open hook ran
        in_welcome, after, open_channels = pending.deliver_on_attach(WINDOW_A)
        assert [msgspec.msgpack.decode(raw)["responseChannel"] for raw in in_welcome] == \
            [p.channel for p in opened[:2]]
        assert after == opened[2:]
        assert open_channels == [p.channel for p in opened]  # not the request a host answers
        assert all(WINDOW_A in p.sent_to for p in opened) and WINDOW_A not in only_host.sent_to

    run(body)
