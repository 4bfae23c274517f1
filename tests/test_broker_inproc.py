"""The broker in-process over inproc:// sockets, with fake ports (what main's app gives it; jupyter_client test_session style):
hello and welcome, the 9 steps, replay, the limits that keep one peer from locking others out."""

import asyncio
import typing
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest
import zmq
import zmq.asyncio
from kit.fake_ports import FORM, TOKEN, FakePorts

from main_process.clock import SettableClock
from main_process.consent.pending import Elicitation, RequestOptions
from main_process.wire.broker import TOPICS, Broker
from main_process.wire.peers import PEER_SLOTS, RateLimiter
from main_process.wire.wire import Wire
from shared import channels
from shared.errors import UndeliverableRequestError


class Peer:
    """A contract-only DEALER on the test's loop."""

    def __init__(self, ctx: zmq.asyncio.Context, endpoint: str, role: str = "renderer", name: str = "") -> None:
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.role = role
        self.window = str(uuid.uuid4())
        self.name = name or role

    async def send(self, topic: str, body: Any) -> None:
        await self.sock.send_multipart([topic.encode(), msgspec.msgpack.encode(body)])

    async def expect(self, wanted: Callable[[str, Any], bool], timeout_s: float = 5.0) -> tuple[str, Any]:
        async with asyncio.timeout(timeout_s):
            while True:
                frames = await self.sock.recv_multipart()
                topic, body = frames[0].decode(), msgspec.msgpack.decode(frames[1])
                if wanted(topic, body):
                    return topic, body

    async def expect_topic(self, topic: str, timeout_s: float = 5.0) -> Any:
        return (await self.expect(lambda t, b: t == topic, timeout_s))[1]

    async def hello(self, token: str = TOKEN) -> tuple[str, Any]:
        await self.send("hello", {"protocol": 1, "token": token, "window": self.window, "name": self.name,
                                  "role": self.role})
        return await self.expect(lambda t, b: t in ("welcome", "error"))


def with_broker(test: Callable[..., Awaitable[None]], **broker_args: Any) -> None:
    """Run `test(broker, ports, new_peer)` against a started broker on an inproc endpoint."""

    async def body() -> None:
        ctx = zmq.asyncio.Context.shadow(zmq.Context.instance())
        endpoint = f"inproc://broker-{uuid.uuid4()}"
        ports = FakePorts()
        wire_args = {key: broker_args.pop(key) for key in ("clock", "peer_slots") if key in broker_args}
        wire = Wire(endpoint=endpoint, server_infos=ports.server_infos, **wire_args)
        wire.bind()
        broker = Broker(wire, token=TOKEN, session="session-1", unseen=ports.no_window_attached, **broker_args)
        broker.start(ports.receivers())
        peers: list[Peer] = []

        async def new_peer(role: str = "renderer", name: str = "", hello: bool = True) -> Peer:
            peer = Peer(ctx, endpoint, role, name)
            peers.append(peer)
            if hello:
                topic, body = await peer.hello()
                assert topic == "welcome", body
            return peer

        try:
            await test(broker, ports, new_peer)
        finally:
            for peer in peers:
                peer.sock.close()
            await broker.close()
            wire.close()

    asyncio.run(body())


def test_every_topic_a_peer_sends_has_one_route_whose_handler_takes_its_rows_body_and_reply() -> None:
    assert set(TOPICS) | {"hello"} == set(channels.TO_MAIN)
    for topic, route in TOPICS.items():
        hints = typing.get_type_hints(route.handle)
        assert hints["body"] is channels.TO_MAIN[topic].body, topic
        assert ("reply" in hints) == channels.TO_MAIN[topic].reply, topic


def test_a_topic_for_one_role_is_bad_body_from_another_and_the_sender_stays_attached() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        window, gateway = await new_peer("renderer"), await new_peer("host")
        call = {"server": "demo", "tool": "echo", "arguments": {}, "responseChannel": "c"}
        await gateway.send("msgMcpCallTool", call)  # a host calls in its relayed sessions (§14), past consent
        error = await gateway.expect_topic("error")
        assert error == {"code": "bad-body", "topic": "msgMcpCallTool",
                         "message": 'msgMcpCallTool is for peers with role "asker" or "controller" or "renderer"'}
        await gateway.send("msgHostInfo", {"name": "Claude Desktop"})  # §13's, gone: a topic main does not know
        assert (await gateway.expect_topic("error"))["code"] == "unknown-topic"
        await gateway.send("msgStatus", {"responseChannel": "s"})
        peers = {p["role"]: p["name"] for p in (await gateway.expect_topic("s"))["status"]["peers"]}
        assert peers == {"renderer": "renderer", "host": "host"}
        await window.send("msgMcpCallTool", call)
        assert "result" in await window.expect_topic("c")

    with_broker(test)


def test_hello_token_and_attachment_rules() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        stranger = await new_peer(hello=False)
        await stranger.send("msgStatus", {"responseChannel": "s1"})
        assert (await stranger.expect_topic("error"))["code"] == "not-attached"
        topic, body = await stranger.hello(token="wrong")
        assert (topic, body["code"]) == ("error", "bad-token")
        window = await new_peer()
        await window.send("msgStatus", {"responseChannel": "s2"})
        status = (await window.expect_topic("s2"))["status"]
        assert [(p["name"], p["role"]) for p in status["peers"]] == [("renderer", "renderer")]
        assert status["servers"] == [{"name": "demo", "status": "ready", "tools": ["echo"]}]

    with_broker(test)


def test_liveness_on_a_settable_clock_silence_detaches_and_any_message_even_a_bad_one_counts() -> None:
    clock = SettableClock()

    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        beating, noisy = await new_peer(name="beating"), await new_peer(name="noisy")
        quiet = await new_peer(name="quiet")

        def attached() -> set[str]:
            return {peer.name for peer in broker.wire.peers()}

        for second in range(1, 8):
            await beating.send("heartbeat", {})
            await noisy.send("heartbeat", b"\xc1 not msgpack")  # refused, but it is a message
            assert (await noisy.expect_topic("error"))["topic"] == "heartbeat"
            await beating.send("msgStatus", {"responseChannel": f"s{second}"})
            await beating.expect_topic(f"s{second}")  # main has read both of its messages
            clock.advance(1.0)  # main's tick: silence checked, heartbeats sent
            # quiet said nothing after its hello: exactly 5 s of silence is allowed, more is not
            assert attached() == ({"beating", "noisy", "quiet"} if second <= 5 else {"beating", "noisy"}), second
        assert await quiet.expect_topic("heartbeat") == {}  # main's own heartbeats reached it meanwhile
        await quiet.send("msgStatus", {"responseChannel": "late"})
        assert (await quiet.expect_topic("error"))["code"] == "not-attached"

    with_broker(test, clock=clock)


def test_the_round_trip_through_the_broker() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        window = await new_peer()
        other = await new_peer()
        asked = asyncio.ensure_future(broker.server_ports.elicit(Elicitation.read("demo", FORM), RequestOptions(timeout_s=60)))
        invoke = await window.expect_topic("msgElicitationTransferInvoke")
        assert invoke["request"] == {"server": "demo", "params": FORM}
        await other.expect_topic("msgElicitationTransferInvoke")
        await window.send(invoke["responseChannel"], {"action": "accept", "content": {"name": "Ada"}})
        answer = await asyncio.wait_for(asked, 5)
        assert (answer.action, answer.content) == ("accept", {"name": "Ada"})
        dismiss = await other.expect_topic("msgElicitationTransferDismiss")
        assert dismiss == {"responseChannel": invoke["responseChannel"], "reason": "answered", "by": window.window}
        await other.send(invoke["responseChannel"], {"action": "decline"})
        assert (await other.expect_topic("error"))["code"] == "already-answered"

    with_broker(test)


def test_a_tool_call_is_answered_on_its_channel_and_a_confusing_channel_is_refused() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        controller = await new_peer("controller")
        await controller.send("msgMcpCallTool", {"server": "demo", "tool": "echo", "arguments": {},
                                                 "responseChannel": "call-1"})
        reply = await controller.expect_topic("call-1")
        assert reply["result"]["content"][0]["text"] == f"echo from {controller.window}"
        # Every main -> peer topic is refused as a channel: a reply on `bye` would read as main stopping.
        for channel in ("welcome", "bye", "msgMcpClose", "msgElicitationTransferResult-x", "has space", "nl\nx", "é"):
            await controller.send("msgMcpCallTool", {"server": "demo", "tool": "echo", "responseChannel": channel})
            error = await controller.expect_topic("error")
            assert (error["code"], error["topic"]) == ("bad-body", "msgMcpCallTool")

    with_broker(test)


def test_replay_in_the_welcome_and_after_it_and_a_poison_request_never_pending() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        poison = {**FORM, "requestedSchema": {"type": "object", "properties": {
            "n": {"type": "integer", "maximum": 2**70}}}}
        with pytest.raises(UndeliverableRequestError):
            await broker.server_ports.elicit(Elicitation.read("demo", poison), RequestOptions(timeout_s=60))
        asks = [asyncio.ensure_future(broker.server_ports.elicit(Elicitation.read("demo", {**FORM, "message": str(i) * 3000}),
                                                    RequestOptions(timeout_s=60)))
                for i in range(3)]
        await asyncio.sleep(0)  # one loop turn: the three requests open
        assert ports.unseen == 3  # nobody attached: the auto-open hook heard of each
        late = Peer(zmq.asyncio.Context.shadow(zmq.Context.instance()), broker.endpoint)
        topic, welcome = await late.hello()
        assert topic == "welcome"
        channels = [p.channel for p in broker.pending.all()]
        assert welcome["pendingChannels"] == channels
        followers = [(await late.expect_topic("msgElicitationTransferInvoke"))["responseChannel"]
                     for _ in range(3 - len(welcome["pending"]))]
        assert [i["responseChannel"] for i in welcome["pending"]] + followers == channels
        await late.send(channels[2], {"action": "decline"})
        assert (await asyncio.wait_for(asks[2], 5)).action == "decline"
        late.sock.close()
        for ask in asks[:2]:
            ask.cancel()

    with_broker(test, welcome_pending_bytes=7000)  # two of the three 3 kB requests fit; one follows


def test_a_flooding_peer_is_rate_limited_and_the_others_are_served() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        flooder = await new_peer(name="flooder")
        window = await new_peer(name="window")
        for _ in range(200):
            await flooder.send("heartbeat", {})
        error = await flooder.expect_topic("error")
        assert error["code"] == "rate-limited"
        await window.send("msgStatus", {"responseChannel": "s"})
        names = {p["name"] for p in (await window.expect_topic("s"))["status"]["peers"]}
        assert names == {"flooder", "window"}  # still attached: dropped messages never detach

    with_broker(test, limiter=RateLimiter(messages_per_s=50, burst_messages=50))


def test_the_peer_limit_refuses_a_hello_with_a_named_code() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        await new_peer()
        await new_peer()
        third = await new_peer(hello=False)
        topic, body = await third.hello()
        assert (topic, body["code"], body["topic"]) == ("error", "too-many-peers", "hello")
        assert body["message"] == "main has its limit of 2 attached windows"

    with_broker(test, peer_slots={**PEER_SLOTS, "renderer": 2})


def test_hosts_and_askers_in_all_their_slots_leave_windows_and_controllers_theirs() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        for role in ("host", "host", "asker"):
            await new_peer(role=role)
        for role in ("host", "asker"):
            topic, body = await (await new_peer(hello=False, role=role)).hello()
            assert (topic, body["code"]) == ("error", "too-many-peers")
        window = await new_peer(name="window")
        controller = await new_peer(role="controller")
        await controller.send("msgStatus", {"responseChannel": "s"})
        roles = sorted(p["role"] for p in (await controller.expect_topic("s"))["status"]["peers"])
        assert roles == ["asker", "controller", "host", "host", "renderer"]
        assert window is not None

    with_broker(test, peer_slots={"renderer": 1, "controller": 1, "host": 2, "asker": 1})


def test_peers_lists_are_coalesced_not_sent_per_attach_to_everyone() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        first = await new_peer(name="first")
        assert [p["name"] for p in (await first.expect_topic("peers"))["peers"]] == ["first"]
        crowd = [await new_peer(name=f"crowd-{i}") for i in range(20)]
        for peer in crowd:  # each newcomer gets the list right after its welcome
            listed = (await peer.expect_topic("peers"))["peers"]
            assert peer.name in {p["name"] for p in listed}
        lists: list[int] = []

        def counted(topic: str, body: Any) -> bool:
            if topic != "peers":
                return False
            lists.append(len(body["peers"]))
            return lists[-1] == 21

        await first.expect(counted)
        assert len(lists) < 10, lists  # 20 attaches reached `first` as a few lists, not one each

    with_broker(test)


def test_rules_go_to_every_window_and_list_changes_to_every_host_and_no_one_else() -> None:
    async def test(broker: Broker, ports: FakePorts, new_peer: Any) -> None:
        window, gateway, controller = await new_peer("renderer"), await new_peer("host"), await new_peer("controller")
        broker.wire.publisher.publish_rules([])
        broker.wire.publisher.publish_list_changed("demo", ["tools"])
        broker.wire.publisher.publish_notice("info", "after both", None)  # to every peer, so sent after them
        for peer, wanted in ((window, ["rules"]), (gateway, ["msgListChanged"]), (controller, [])):
            seen: list[str] = []

            def until_notice(topic: str, body: Any, seen: list[str] = seen) -> bool:
                seen.append(topic)
                return topic == "notice"

            await peer.expect(until_notice)
            assert [topic for topic in seen if topic in ("rules", "msgListChanged")] == wanted, peer.role

    with_broker(test)
