"""MainBridge against a real ZeroMQ ROUTER standing in for main.

Every test runs twice: over ipc:// in tmp_path, and over tcp:// with CURVE (mandatory on tcp).
"""

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from pytestqt.qtbot import QtBot

from renderer_process.bridge import MainBridge
from renderer_process.connection_status import CONNECTED, CONNECTING, RECONNECTING
from shared import channels, codec, messages
from shared.connection_file import ConnectionInfo, ensure_private_dir, write_connection_file

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


class FakeMainRouter:
    """A ROUTER plus the connection file pointing at it; never blocks the Qt loop."""

    def __init__(self, connection_path: Path, token: str, socket_name: str, transport: str) -> None:
        ensure_private_dir(connection_path.parent)
        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        server_key: str | None = None
        client: tuple[str, str] | tuple[None, None] = (None, None)
        if transport == "tcp":  # a paired file: main's key and the client's keypair
            public, secret = zmq.curve_keypair()
            self.sock.setsockopt(zmq.CURVE_SERVER, 1)
            self.sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
            server_key = public.decode("ascii")
            client = tuple(key.decode("ascii") for key in zmq.curve_keypair())  # type: ignore[assignment]
            self.sock.bind("tcp://127.0.0.1:*")
        else:
            self.sock.bind(f"ipc://{connection_path.parent / socket_name}")
        self.endpoint: str = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.token = token
        info = ConnectionInfo(
            protocol=1, endpoint=self.endpoint, token=token, pid=os.getpid(), server_key=server_key,
            client_public_key=client[0], client_secret_key=client[1],
        )
        write_connection_file(connection_path, info)
        self.received: list[tuple[bytes, str, Any]] = []

    def pump(self) -> None:
        while self.sock.poll(0):
            identity, *frames = self.sock.recv_multipart()
            topic, body = codec.decode_from_peer(frames)
            self.received.append((identity, topic, body))

    def topics(self) -> list[str]:
        self.pump()
        return [topic for _, topic, _ in self.received]

    def wait_for(self, qtbot: QtBot, topic: str, timeout: int = 3000) -> tuple[bytes, Any]:
        """The first message on `topic` not yet taken, waiting (with the Qt loop running)."""
        qtbot.waitUntil(lambda: topic in self.topics(), timeout=timeout)
        index = self.topics().index(topic)
        identity, _, body = self.received.pop(index)
        return identity, body

    def send(self, identity: bytes, topic: str, body: messages.Body) -> None:
        self.sock.send_multipart([identity, *codec.encode(topic, body)])

    def welcome(
        self, identity: bytes, window: str, pending: list[messages.ElicitationInvoke] | None = None
    ) -> None:
        servers = [messages.ServerInfo(name="demo", status="ready", tools=["ask"])]
        body = messages.Welcome(
            session=channels.new_uuid7(), window=window, servers=servers, pending=pending or []
        )
        self.send(identity, channels.WELCOME, body)

    def close(self) -> None:
        self.sock.close(linger=0)


@pytest.fixture
def connection_path(tmp_path: Path) -> Path:
    return tmp_path / "run" / "connection.json"


@pytest.fixture(params=["ipc", "tcp"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def router(connection_path: Path, transport: str) -> Iterator[FakeMainRouter]:
    fake = FakeMainRouter(connection_path, token="a1" * 16, socket_name="main.sock", transport=transport)
    yield fake
    fake.close()


MakeBridge = Callable[..., MainBridge]


@pytest.fixture
def make_bridge(qtbot: QtBot, connection_path: Path) -> Iterator[MakeBridge]:
    made: list[MainBridge] = []

    def make(**kwargs: Any) -> MainBridge:
        bridge = MainBridge(connection_path, "test window", **kwargs)
        made.append(bridge)
        return bridge

    yield make
    for bridge in made:
        bridge.close()


def attach(qtbot: QtBot, router: FakeMainRouter, bridge: MainBridge) -> bytes:
    """Start the bridge, answer its hello, and wait until it is connected."""
    with qtbot.waitSignal(bridge.welcomed, timeout=3000):
        bridge.start()
        identity, _hello = router.wait_for(qtbot, channels.HELLO)
        router.welcome(identity, bridge.window_id)
    return identity


def invoke(channel: str) -> messages.ElicitationInvoke:
    params = {"mode": "form", "message": "hi", "requestedSchema": {"type": "object", "properties": {}}}
    return messages.ElicitationInvoke(
        request=messages.ElicitationRequest(server="demo", params=params),
        response_channel=channel,
        created_at=1_700_000_000_000,
        expires_at=None,
        origin=None,
    )


def test_hello_carries_protocol_token_window_name_and_role(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge
) -> None:
    bridge = make_bridge()
    states: list[str] = []
    bridge.state_changed.connect(states.append)
    bridge.start()
    _identity, hello = router.wait_for(qtbot, channels.HELLO)
    assert isinstance(hello, messages.Hello)
    assert hello.protocol == 1
    assert hello.token == router.token
    assert hello.window == bridge.window_id and UUID7.match(hello.window)
    assert hello.name == "test window"
    assert hello.role == "renderer"
    assert states == [CONNECTING]


def test_welcome_connects_and_main_messages_become_signals(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge
) -> None:
    bridge = make_bridge()
    identity = attach(qtbot, router, bridge)
    assert bridge.state == CONNECTED

    with qtbot.waitSignal(bridge.invoked, timeout=2000) as got:
        router.send(identity, channels.INVOKE, invoke("msgElicitationTransferResult-1"))
    assert got.args[0].response_channel == "msgElicitationTransferResult-1"

    dismiss = messages.ElicitationDismiss(
        response_channel="msgElicitationTransferResult-1", reason="answered", by="w"
    )
    with qtbot.waitSignal(bridge.dismissed, timeout=2000) as got:
        router.send(identity, channels.DISMISS, dismiss)
    assert got.args[0] == dismiss

    servers = [messages.ServerInfo(name="demo", status="failed", tools=[], error="boom")]
    with qtbot.waitSignal(bridge.servers_changed, timeout=2000) as got:
        router.send(identity, channels.SERVERS, messages.ServersUpdate(servers=servers))
    assert got.args[0] == servers

    with qtbot.waitSignal(bridge.completed, timeout=2000) as got:
        router.send(
            identity, channels.COMPLETE, messages.ElicitationComplete(server="demo", elicitation_id="e1")
        )
    assert got.args[0].elicitation_id == "e1"

    notice = messages.ErrorNotice(code="unknown-channel", message="no such channel", topic="x")
    with qtbot.waitSignal(bridge.refused, timeout=2000) as got:
        router.send(identity, channels.ERROR, notice)
    assert got.args[0] == notice


def test_a_garbage_frame_is_skipped_and_the_loop_goes_on(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge
) -> None:
    bridge = make_bridge()
    identity = attach(qtbot, router, bridge)
    seen: list[str] = []
    bridge.invoked.connect(lambda body: seen.append(body.response_channel))
    with qtbot.waitSignal(bridge.invoked, timeout=2000):
        router.sock.send_multipart([identity, channels.INVOKE.encode(), b"\xc1 not msgpack"])
        router.sock.send_multipart([identity, b"only-one-frame"])
        router.sock.send_multipart([identity, b"\xff\xfe", b"\x80"])
        router.send(identity, channels.INVOKE, invoke("msgElicitationTransferResult-ok"))
    assert seen == ["msgElicitationTransferResult-ok"]
    assert bridge.state == CONNECTED


def test_results_and_tool_calls_reach_main_and_replies_come_back(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge
) -> None:
    bridge = make_bridge()
    identity = attach(qtbot, router, bridge)

    assert bridge.send_result("msgElicitationTransferResult-9", "accept", {"age": 3})
    _, result = router.wait_for(qtbot, "msgElicitationTransferResult-9")
    assert result == messages.ElicitationResult(action="accept", content={"age": 3})

    assert bridge.send_result("msgElicitationTransferResult-10", "decline", {"ignored": True})
    _, result = router.wait_for(qtbot, "msgElicitationTransferResult-10")
    assert result == messages.ElicitationResult(action="decline", content=None)

    channel = bridge.call_tool("demo", "ask", {"x": 1})
    assert channel.startswith("call-")
    _, call = router.wait_for(qtbot, channels.CALL_TOOL)
    assert call == messages.CallTool(server="demo", tool="ask", response_channel=channel, arguments={"x": 1})

    reply = messages.ChannelReply(result={"content": [{"type": "text", "text": "done"}], "isError": False})
    with qtbot.waitSignal(bridge.replied, timeout=2000) as got:
        router.send(identity, channel, reply)
    assert got.args == [channel, reply]


def test_heartbeat_is_sent_when_idle(qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge) -> None:
    bridge = make_bridge()  # contract defaults: heartbeat after 1 s of sending nothing
    identity = attach(qtbot, router, bridge)
    router.send(identity, channels.HEARTBEAT, messages.Heartbeat())  # main's own heartbeat keeps us attached
    got_identity, body = router.wait_for(qtbot, channels.HEARTBEAT, timeout=2500)
    assert got_identity == identity
    assert body == messages.Heartbeat()
    assert bridge.state == CONNECTED


def test_reconnects_to_a_restarted_main_with_a_new_token(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge, connection_path: Path, transport: str
) -> None:
    bridge = make_bridge(silence_limit=0.6, retry_every=0.3, tick_ms=50)  # the contract's timing, scaled down
    attach(qtbot, router, bridge)
    window = bridge.window_id

    with qtbot.waitSignal(bridge.state_changed, timeout=3000, check_params_cb=lambda s: s == RECONNECTING):
        router.close()  # main is gone: silence

    second = FakeMainRouter(connection_path, token="b2" * 16, socket_name="main2.sock", transport=transport)
    try:
        identity, hello = second.wait_for(qtbot, channels.HELLO, timeout=3000)
        assert hello.token == second.token
        assert hello.window == window  # the same window, re-attaching
        with qtbot.waitSignal(bridge.welcomed, timeout=3000):
            second.welcome(identity, window, pending=[invoke("msgElicitationTransferResult-p")])
        qtbot.waitUntil(lambda: bridge.state == CONNECTED, timeout=1000)
    finally:
        second.close()


def test_missing_connection_file_reports_reconnecting_then_connects(
    qtbot: QtBot, make_bridge: MakeBridge, connection_path: Path, transport: str
) -> None:
    bridge = make_bridge(retry_every=0.2, tick_ms=50)
    with qtbot.waitSignal(bridge.state_changed, timeout=1000, check_params_cb=lambda s: s == RECONNECTING):
        bridge.start()
    late = FakeMainRouter(connection_path, token="c3" * 16, socket_name="main.sock", transport=transport)
    try:
        identity, hello = late.wait_for(qtbot, channels.HELLO, timeout=3000)
        assert hello.token == late.token
        with qtbot.waitSignal(bridge.state_changed, timeout=2000, check_params_cb=lambda s: s == CONNECTED):
            late.welcome(identity, bridge.window_id)
    finally:
        late.close()


def test_sending_while_not_connected_reports_instead_of_queueing(
    qtbot: QtBot, make_bridge: MakeBridge
) -> None:
    bridge = make_bridge()  # never started: nothing to send through
    with qtbot.waitSignal(bridge.refused, timeout=1000) as refused:
        assert not bridge.send_result("msgElicitationTransferResult-1", "cancel", None)
    assert refused.args[0].code == "not-sent"
    assert refused.args[0].topic == "msgElicitationTransferResult-1"
    with qtbot.waitSignal(bridge.replied, timeout=1000) as replied:
        channel = bridge.call_tool("demo", "ask", {})
    assert replied.args[0] == channel
    assert replied.args[1].error is not None and "not connected" in replied.args[1].error.message


def test_close_says_bye(qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge) -> None:
    bridge = make_bridge()
    identity = attach(qtbot, router, bridge)
    bridge.close()
    got_identity, body = router.wait_for(qtbot, channels.BYE)
    assert got_identity == identity and body == messages.Bye()


def test_peers_and_notices_become_signals(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge
) -> None:
    bridge = make_bridge()
    identity = attach(qtbot, router, bridge)
    peers = [
        messages.PeerInfo(window=bridge.window_id, name="test window", role="renderer"),
        messages.PeerInfo(window="w-2", name="cli", role="controller"),
    ]
    with qtbot.waitSignal(bridge.peers_changed, timeout=2000) as got:
        router.send(identity, channels.PEERS, messages.PeersUpdate(peers=peers))
    assert got.args[0] == peers

    notice = messages.Notice(level="warning", message="unsupported requestedSchema: x", server="demo")
    with qtbot.waitSignal(bridge.noticed, timeout=2000) as got:
        router.send(identity, channels.NOTICE, notice)
    assert got.args[0] == notice


def test_server_control_reload_and_policy_reach_main_and_replies_come_back(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge
) -> None:
    bridge = make_bridge()
    identity = attach(qtbot, router, bridge)

    channel = bridge.control_server("demo", "restart")
    _, control = router.wait_for(qtbot, channels.SERVER_CONTROL)
    assert control == messages.ServerControl(server="demo", action="restart", response_channel=channel)
    reply = messages.ChannelReply(result={"ok": True})
    with qtbot.waitSignal(bridge.replied, timeout=2000) as got:
        router.send(identity, channel, reply)
    assert got.args == [channel, reply]

    reload_channel = bridge.reload()
    _, reload = router.wait_for(qtbot, channels.RELOAD)
    assert reload == messages.Reload(response_channel=reload_channel)
    assert reload_channel != channel

    assert bridge.set_server_policy("demo", True)
    _, policy = router.wait_for(qtbot, channels.SERVER_POLICY)
    assert policy == messages.ServerPolicy(server="demo", decline_all=True)
    assert bridge.set_server_policy("demo", False)
    _, policy = router.wait_for(qtbot, channels.SERVER_POLICY)
    assert policy == messages.ServerPolicy(server="demo", decline_all=False)


def test_extension_requests_while_not_connected_are_answered_locally(
    qtbot: QtBot, make_bridge: MakeBridge
) -> None:
    bridge = make_bridge()  # never started
    with qtbot.waitSignal(bridge.replied, timeout=1000) as replied:
        channel = bridge.control_server("demo", "stop")
    assert replied.args[0] == channel
    assert replied.args[1].error is not None and "stop demo was not sent" in replied.args[1].error.message
    with qtbot.waitSignal(bridge.replied, timeout=1000) as replied:
        channel = bridge.reload()
    assert replied.args[0] == channel and replied.args[1].error is not None
    with qtbot.waitSignal(bridge.refused, timeout=1000) as refused:
        assert not bridge.set_server_policy("demo", True)
    assert (refused.args[0].code, refused.args[0].topic) == ("not-sent", channels.SERVER_POLICY)


def test_not_attached_refusal_re_sends_hello_at_once(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge
) -> None:
    # main detached us (e.g. we were stopped with SIGSTOP); our own silence timer is far away.
    bridge = make_bridge(silence_limit=60.0, retry_every=60.0)
    identity = attach(qtbot, router, bridge)
    refusals: list[messages.ErrorNotice] = []
    bridge.refused.connect(refusals.append)
    states: list[str] = []
    bridge.state_changed.connect(states.append)

    not_attached = messages.ErrorNotice(
        code="not-attached", message="send a valid hello first", topic="heartbeat"
    )
    router.send(identity, channels.ERROR, not_attached)
    router.send(identity, channels.ERROR, not_attached)  # a burst of refusals costs one hello
    again, hello = router.wait_for(qtbot, channels.HELLO, timeout=1000)
    assert again == identity and hello.window == bridge.window_id and hello.token == router.token
    assert states == [RECONNECTING]
    with qtbot.waitSignal(bridge.welcomed, timeout=2000):
        router.welcome(identity, bridge.window_id)
    assert bridge.state == CONNECTED
    assert channels.HELLO not in router.topics()
    assert refusals == []  # an internal matter, not something the user must read


def test_tools_list_reaches_main_as_mcp_request_and_its_answer_comes_back(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge
) -> None:
    bridge = make_bridge()
    identity = attach(qtbot, router, bridge)
    channel = bridge.mcp_request("demo", "tools/list", {"cursor": "p2"})
    _, request = router.wait_for(qtbot, channels.MCP_REQUEST)
    assert request == messages.McpRequest(
        server="demo", method="tools/list", response_channel=channel, params={"cursor": "p2"}
    )
    reply = messages.ChannelReply(result={"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]})
    with qtbot.waitSignal(bridge.replied, timeout=2000) as got:
        router.send(identity, channel, reply)
    assert got.args == [channel, reply]


def test_main_missing_says_when_the_connection_file_goes_and_comes_back(
    qtbot: QtBot, router: FakeMainRouter, make_bridge: MakeBridge, connection_path: Path
) -> None:
    bridge = make_bridge(silence_limit=0.5, retry_every=0.2, tick_ms=50)
    seen: list[bool] = []
    bridge.main_missing.connect(seen.append)
    attach(qtbot, router, bridge)
    assert seen == [False]
    saved = connection_path.read_bytes()
    connection_path.unlink()  # main stopped cleanly: it removes its file
    with qtbot.waitSignal(bridge.main_missing, timeout=3000) as missing:
        pass  # main falls silent; the bridge looks for the file again
    assert missing.args == [True] and bridge.state == RECONNECTING
    with qtbot.waitSignal(bridge.main_missing, timeout=3000) as back:
        connection_path.write_bytes(saved)
        connection_path.chmod(0o600)
    assert back.args == [False]


def test_a_tcp_file_without_a_client_keypair_is_a_connection_problem_naming_pair(
    qtbot: QtBot, make_bridge: MakeBridge, connection_path: Path
) -> None:
    ensure_private_dir(connection_path.parent)
    public, _secret = zmq.curve_keypair()
    write_connection_file(connection_path, ConnectionInfo(
        protocol=1, endpoint="tcp://127.0.0.1:9", token="t", pid=os.getpid(), server_key=public.decode("ascii")))
    bridge = make_bridge()
    with qtbot.waitSignal(bridge.connection_problem, timeout=2000) as problem:
        bridge.start()
    assert str(connection_path) in problem.args[0] and "elicitron pair" in problem.args[0]
    assert bridge.state == RECONNECTING
