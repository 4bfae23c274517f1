"""main's core driven with plain values (issue 34; jupyter_client's test_session is the model): the
wire's FrameSockets is a list (kit/plain_frames.py), time is a SettableClock, and every frame a test
delivers is handled before `deliver` returns, so these tests read what main sent as plain topics and
bodies, with no socket, no wait and no timeout. test_broker_inproc.py runs the same broker over
inproc ZeroMQ sockets."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kit.fake_ports import FORM, TOKEN, FakePorts
from kit.plain_frames import PlainFrames

from main_process.clock import SettableClock
from main_process.consent.pending import Elicitation, RequestOptions
from main_process.wire.attachments import PEERS_COALESCE_S
from main_process.wire.broker import Broker
from main_process.wire.wire import Wire

WINDOW, OTHER, HOST = b"\x00window", b"\x00other", b"\x00host"


def hello(window: str, role: str = "renderer", token: str = TOKEN) -> dict[str, Any]:
    return {"protocol": 1, "token": token, "window": window, "name": window, "role": role}


def with_core(test: Callable[[Broker, PlainFrames, SettableClock], Awaitable[None]]) -> None:
    """Run `test(broker, frames, clock)` against a started broker on plain frames."""
    async def body() -> None:
        frames, clock, ports = PlainFrames(), SettableClock(), FakePorts()
        wire = Wire(endpoint="ipc:///nowhere/plain-frames", server_infos=ports.server_infos, clock=clock,
                    sockets=frames)
        broker = Broker(wire, token=TOKEN, session="session-1", unseen=ports.no_window_attached)
        broker.start(ports.receivers())
        try:
            await test(broker, frames, clock)
        finally:
            await broker.close()
            wire.close()

    asyncio.run(body())


def test_a_hello_is_welcomed_at_once_and_the_others_hear_of_it_on_the_clock() -> None:
    async def test(broker: Broker, frames: PlainFrames, clock: SettableClock) -> None:
        frames.deliver(WINDOW, "hello", hello("window"))
        (topic, welcome), (topic_after, peers) = frames.take(WINDOW)
        assert topic == "welcome"
        assert (welcome["session"], welcome["pending"], welcome["pendingChannels"]) == ("session-1", [], [])
        assert welcome["servers"] == [{"name": "demo", "status": "ready", "tools": ["echo"]}]
        assert (topic_after, peers["peers"]) == ("peers", welcome["peers"])  # for a v1 window: the list too
        frames.deliver(OTHER, "hello", hello("other"))
        (_, welcome), (_, peers) = frames.take(OTHER)
        assert sorted(p["name"] for p in peers["peers"]) == ["other", "window"]
        # The others hear of an attach coalesced, when the clock says so and not before; the
        # newcomer, whose list is current, not again.
        clock.advance(PEERS_COALESCE_S / 2)
        assert frames.take(WINDOW) == []
        clock.advance(PEERS_COALESCE_S)
        assert frames.take(WINDOW) == [("peers", peers)]
        assert frames.take(OTHER) == []

    with_core(test)


def test_a_wrong_token_a_stranger_and_bad_frames_each_get_their_named_error() -> None:
    async def test(broker: Broker, frames: PlainFrames, clock: SettableClock) -> None:
        frames.deliver(WINDOW, "hello", hello("window", token="wrong"))
        assert [(t, b["code"]) for t, b in frames.take(WINDOW)] == [("error", "bad-token")]
        frames.deliver(OTHER, "msgStatus", {"responseChannel": "s"})
        assert [(t, b["code"]) for t, b in frames.take(OTHER)] == [("error", "not-attached")]
        frames.deliver(WINDOW, "hello", hello("window"))
        frames.take(WINDOW)
        frames.deliver_raw([WINDOW, b"heartbeat", b"\xc1 not msgpack"])
        frames.deliver(WINDOW, "msgNoSuchTopic", {})
        assert [(t, b["code"], b.get("topic")) for t, b in frames.take(WINDOW)] == [
            ("error", "bad-body", "heartbeat"), ("error", "unknown-topic", "msgNoSuchTopic")]
        assert [peer.name for peer in broker.wire.peers()] == ["window"]  # refused messages never detach

    with_core(test)


def test_the_nine_steps_first_answer_wins_and_the_other_window_is_dismissed() -> None:
    async def test(broker: Broker, frames: PlainFrames, clock: SettableClock) -> None:
        for routing_id, name in ((WINDOW, "window"), (OTHER, "other")):
            frames.deliver(routing_id, "hello", hello(name))
        clock.advance(PEERS_COALESCE_S)
        frames.take(WINDOW), frames.take(OTHER)
        asked = asyncio.ensure_future(broker.server_ports.elicit(Elicitation.read("demo", FORM),
                                                                 RequestOptions(timeout_s=60)))
        await asyncio.sleep(0)  # one loop turn: the server's request opens
        ((topic, invoke),) = frames.take(WINDOW)
        assert topic == "msgElicitationTransferInvoke"
        assert invoke["request"] == {"server": "demo", "params": FORM}
        assert frames.take(OTHER) == [("msgElicitationTransferInvoke", invoke)]
        channel = invoke["responseChannel"]
        frames.deliver(WINDOW, channel, {"action": "accept", "content": {"name": "Ada"}})
        answer = await asyncio.wait_for(asked, 1)
        assert (answer.action, answer.content) == ("accept", {"name": "Ada"})
        assert frames.take(OTHER) == [("msgElicitationTransferDismiss",
                                       {"responseChannel": channel, "reason": "answered", "by": "window"})]
        frames.deliver(OTHER, channel, {"action": "decline"})  # too late: the channel is spent
        assert [(t, b["code"]) for t, b in frames.take(OTHER)] == [("error", "already-answered")]

    with_core(test)


def test_silence_detaches_on_the_clock_and_an_unreachable_peer_on_its_next_send() -> None:
    async def test(broker: Broker, frames: PlainFrames, clock: SettableClock) -> None:
        for routing_id, name in ((WINDOW, "window"), (OTHER, "other"), (HOST, "host")):
            frames.deliver(routing_id, "hello", hello(name))

        def attached() -> list[str]:
            return sorted(peer.name for peer in broker.wire.peers())

        for _ in range(5):  # window keeps talking; other says nothing after its hello
            frames.deliver(WINDOW, "heartbeat", {})
            clock.advance(1.0)
        assert attached() == ["host", "other", "window"]  # exactly 5 s of silence is allowed
        assert ("heartbeat", {}) in frames.take(OTHER)  # main's own heartbeats meanwhile
        frames.gone.add(HOST)  # ZeroMQ can no longer route to it: the next send detaches it
        frames.deliver(WINDOW, "heartbeat", {})
        clock.advance(1.0)
        assert attached() == ["window"]
        frames.deliver(OTHER, "msgStatus", {"responseChannel": "late"})
        assert [(t, b["code"]) for t, b in frames.take(OTHER)][-1] == ("error", "not-attached")

    with_core(test)
