"""shared.codec: what a peer or main sees when frames become messages and back (wire contract v1)."""

import random
from typing import Any, get_args

import msgspec
import pytest
from kit.contract import CONTRACT_CODES

from shared import channels, codec
from shared import messages as m
from shared.errors import ProtocolError, UndeliverableRequestError

WINDOW = "01a22b02-fba8-71af-9157-ee5ced2b0d0b"
RESULT_CHANNEL = channels.RESULT_CHANNEL_PREFIX + "01a22b02-fba8-71af-9157-ee5ced2b0d0c"

PARAMS = {
    "mode": "form",
    "message": "Book a table?",
    "requestedSchema": {
        "type": "object",
        "properties": {"guests": {"type": "integer", "minimum": 1}},
        "required": ["guests"],
    },
}
INVOKE = m.ElicitationInvoke(
    request=m.ElicitationRequest(server="demo", params=PARAMS),
    response_channel=RESULT_CHANNEL,
    created_at=1_700_000_000_000,
    expires_at=1_700_000_600_000,
    origin=WINDOW,
)
INVOKE_NULLS = m.ElicitationInvoke(
    request=m.ElicitationRequest(
        server="demo", params={"mode": "url", "url": "https://x.test/", "elicitationId": "e1"}
    ),
    response_channel=RESULT_CHANNEL,
    created_at=1,
    expires_at=None,
    origin=None,
)
SERVERS = [
    m.ServerInfo(name="demo", status="ready", tools=["book", "ask"]),
    m.ServerInfo(name="broken", status="failed", tools=[], error="exited with 1"),
    m.ServerInfo(name="slow", status="starting", tools=[]),
]

PEER_MESSAGES: list[tuple[str, m.Body]] = [
    (channels.HELLO, m.Hello(protocol=1, token="ab" * 16, window=WINDOW, name="w1", role="renderer")),
    (channels.HELLO, m.Hello(protocol=1, token="ab" * 16, window=WINDOW, name="cli", role="controller")),
    (channels.HEARTBEAT, m.Heartbeat()),
    (channels.BYE, m.Bye()),
    (RESULT_CHANNEL, m.ElicitationResult(action="accept", content={"guests": 2, "name": "Ann"})),
    (RESULT_CHANNEL, m.ElicitationResult(action="decline")),
    (RESULT_CHANNEL, m.ElicitationResult(action="cancel")),
    (
        channels.CALL_TOOL,
        m.CallTool(server="demo", tool="book", response_channel="r1", arguments={"n": [1, 2]}),
    ),
    (channels.CALL_TOOL, m.CallTool(server="demo", tool="ping", response_channel="r2")),
    (channels.STATUS, m.StatusRequest(response_channel="status-1")),
    (channels.SHUTDOWN, m.Shutdown()),
    (channels.SERVER_CONTROL, m.ServerControl(server="demo", action="start", response_channel="c1")),
    (channels.SERVER_CONTROL, m.ServerControl(server="demo", action="stop", response_channel="c2")),
    (channels.SERVER_CONTROL, m.ServerControl(server="demo", action="restart", response_channel="c3")),
    (channels.RELOAD, m.Reload(response_channel="reload-1")),
    (channels.ROTATE_HTTP_TOKEN, m.RotateHttpToken(response_channel="rotate-1")),
    (channels.SERVER_POLICY, m.ServerPolicy(server="demo", decline_all=True)),
    (channels.SERVER_POLICY, m.ServerPolicy(server="demo", decline_all=False)),
    (channels.MCP_REQUEST, m.McpRequest(server="demo", method="tools/list", response_channel="t1")),
    (channels.MCP_REQUEST, m.McpRequest(server="demo", method="prompts/get", response_channel="t2",
                                        params={"name": "greet", "arguments": {"who": "Ada"}})),
    # sign-in extension
    (channels.AUTH, m.AuthRequest(server="github", action="login", response_channel="auth-1")),
    (channels.SIGN_IN_REDIRECT, m.SignInRedirect(server="github", elicitation_id="sign-in-1",
                                                 url="http://127.0.0.1:5555/callback?code=c&state=s",
                                                 response_channel="paste-1")),
    # consent memory (issue 11)
    (RESULT_CHANNEL, m.ElicitationResult(action="accept", content={"guests": 2},
                                         remember=m.Remember(scope="until", until=1_900_000_000_000))),
    (RESULT_CHANNEL, m.ElicitationResult(action="decline", remember=m.Remember(scope="always"))),
    (channels.RULES, m.RulesRequest(response_channel="rules-1")),
    (channels.REVOKE_RULES, m.RevokeRules(response_channel="revoke-1", ids=["r-0a1b2c3d"])),
    (channels.REVOKE_RULES, m.RevokeRules(response_channel="revoke-2", revoke_all=True, server="demo")),
    (channels.AUDIT, m.AuditRequest(response_channel="audit-1")),
    (channels.AUDIT, m.AuditRequest(response_channel="audit-2", limit=10_000, server="demo")),
    (channels.HELLO, m.Hello(protocol=1, token="ab" * 16, window=WINDOW, name="deploy.sh", role="asker")),
    (channels.ASK, m.Ask(response_channel="ask-1", params=PARAMS, timeout_seconds=900.0,
                         asker=m.AskerInfo(name="deploy.sh", pid=4242, machine="build-7"))),
    (channels.ASK, m.Ask(response_channel="ask-2", asker=m.AskerInfo(name="agent"),
                         params={"mode": "url", "message": "Sign in", "url": "https://x.test/"})),
    (channels.WITHDRAW, m.Withdraw(response_channel="ask-1")),
    # extension: a call with progress, and its cancel
    (channels.CALL_TOOL, m.CallTool(server="demo", tool="slow", response_channel="r3", progress=True)),
    (channels.CANCEL_CALL, m.CancelCall(response_channel="r3")),
    # extension: relayed MCP sessions
    (channels.MCP_RELAY, m.McpRelay(session="s1", server="demo",
                                    message=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')),
    (channels.MCP_RELAY, m.McpRelay(session="s1", message=b'{"jsonrpc":"2.0","method":"notifications/x"}')),
    (channels.MCP_CLOSE, m.McpClose(session="s1")),
]

RULES = [
    m.RuleInfo(id="r-0a1b2c3d", source="user", kind="answer", server="demo", scope="always", created_at=1,
               created_by="w1 (window)", message="Book a table?", fields=["guests"], action="accept"),
    m.RuleInfo(id="config-1", source="config", kind="tool", server="files", scope="always", created_at=2,
               created_by="config /x/mcp.json", tool="read_*", decision="allow"),
    m.RuleInfo(id="r-00000001", source="user", kind="answer", server="demo", scope="until", created_at=3,
               created_by="w1", expires_at=4, message="Sure?", fields=[], action="decline"),
]

MAIN_MESSAGES: list[tuple[str, m.Body]] = [
    (channels.MCP_RELAY, m.McpRelay(session="s1", message=b'{"jsonrpc":"2.0","id":1,"result":{}}')),
    (channels.MCP_CLOSE, m.McpClose(session="s1", reason="server 'demo': the server exited (code 1)")),
    (
        channels.WELCOME,
        m.Welcome(session=WINDOW, window=WINDOW, servers=SERVERS, pending=[INVOKE, INVOKE_NULLS]),
    ),
    (
        channels.WELCOME,
        m.Welcome(session=WINDOW, window=WINDOW, servers=SERVERS, pending=[INVOKE],
                  pending_channels=[INVOKE.response_channel, INVOKE_NULLS.response_channel]),
    ),
    (channels.WELCOME, m.Welcome(session=WINDOW, window="any-id", servers=[], pending=[])),
    (channels.HEARTBEAT, m.Heartbeat()),
    (channels.BYE, m.Bye()),  # extension: main is stopping
    (channels.INVOKE, INVOKE),
    (channels.INVOKE, INVOKE_NULLS),
    (channels.DISMISS, m.ElicitationDismiss(response_channel=RESULT_CHANNEL, reason="answered", by=WINDOW)),
    (channels.DISMISS, m.ElicitationDismiss(response_channel=RESULT_CHANNEL, reason="cancelled")),
    (channels.DISMISS, m.ElicitationDismiss(response_channel=RESULT_CHANNEL, reason="expired")),
    (channels.DISMISS, m.ElicitationDismiss(response_channel=RESULT_CHANNEL, reason="server-closed")),
    (channels.COMPLETE, m.ElicitationComplete(server="demo", elicitation_id="e1")),
    (channels.SERVERS, m.ServersUpdate(servers=SERVERS)),
    (channels.ERROR, m.ErrorNotice(code="bad-body", message="nope", topic="msgMcpCallTool")),
    (channels.ERROR, m.ErrorNotice(code="not-attached", message="say hello first")),
    (
        channels.PEERS,
        m.PeersUpdate(
            peers=[
                m.PeerInfo(window=WINDOW, name="w1", role="renderer"),
                m.PeerInfo(window="c", name="cli", role="controller"),
            ]
        ),
    ),
    (channels.PEERS, m.PeersUpdate(peers=[])),
    (channels.NOTICE, m.Notice(level="warning", message="schema refused", server="demo")),
    (channels.NOTICE, m.Notice(level="info", message="hi")),
    (channels.NOTICE, m.Notice(level="error", message="rate limited")),
    ("r1", m.ChannelReply(result={"content": [{"type": "text", "text": "ok"}], "isError": False})),
    ("r1", m.ChannelReply(error=m.CallError(code=-32602, message="unknown server 'x'"))),
    ("auth-1", m.ChannelReply(auth=m.AuthReport(server="github", status="needs-sign-in", signed_in=False,
                                                store="file", scopes=["repo"], message="declined"))),
    (
        "status-1",
        m.ChannelReply(
            status=m.StatusReport(
                session=WINDOW,
                pid=1234,
                endpoint="ipc:///run/elicitron/main.sock",
                servers=SERVERS,
                peers=[m.PeerInfo(window=WINDOW, name="w1", role="renderer")],
                pending=[m.PendingSummary(response_channel=RESULT_CHANNEL, server="demo", mode="form",
                                          message="Book?", created_at=1, expires_at=None, origin=None, sent_to=2)],
            )
        ),
    ),
    ("control-1", m.ChannelReply(control=m.ServerControlReport(server="demo", status="ready"))),
    ("reload-1", m.ChannelReply(reload=m.ReloadReport(added=["a"], removed=[], changed=["b"], unchanged=["c"]))),
    # consent memory (issue 11)
    (channels.DISMISS, m.ElicitationDismiss(response_channel=RESULT_CHANNEL, reason="answered", rule="r-0a1b2c3d")),
    (channels.RULES_UPDATE, m.RulesUpdate(rules=RULES)),
    (channels.RULES_UPDATE, m.RulesUpdate(rules=[])),
    ("rules-1", m.ChannelReply(rules=RULES)),
    ("revoke-1", m.ChannelReply(revoked=m.RevokeReport(revoked=["r-0a1b2c3d"], refused=["config-1: read-only"]))),
    ("ask-1", m.ChannelReply(answer=m.QuestionAnswer(action="accept", outcome="accept",
                                                      content={"guests": 2}))),
    ("ask-1", m.ChannelReply(answer=m.QuestionAnswer(action="cancel", outcome="expired"))),
    ("ask-1", m.ChannelReply(answer=m.QuestionAnswer(action="cancel", outcome="withdrawn"))),
    ("audit-1", m.ChannelReply(audit=[m.AuditEntry(  # nulls stay: --json prints them from main as from a file
        channel=RESULT_CHANNEL, server="demo", mode="form", message="Book?", fields=["guests"], url=None,
        origin=None, created_at=1, expires_at=None, outcome=None, window=None, decided_at=None, content=None)])),
    (channels.INVOKE, m.ElicitationInvoke(
        request=m.ElicitationRequest(server="deploy.sh", params=PARAMS), response_channel=RESULT_CHANNEL,
        created_at=1, expires_at=2, origin=None, kind="question",
        asker=m.AskerInfo(name="deploy.sh", pid=4242, machine="build-7"))),
    # extension: a call with progress, and its cancel
    (channels.PROGRESS, m.Progress(response_channel="r3", progress=0.5, total=1.0, message="half")),
    (channels.PROGRESS, m.Progress(response_channel="r3", progress=3)),
    (channels.LIST_CHANGED, m.ListChanged(server="demo", lists=["tools", "resources", "prompts"])),
    (channels.INVOKE, m.ElicitationInvoke(request=m.ElicitationRequest(server="demo", params=PARAMS),
                                          response_channel=RESULT_CHANNEL, created_at=1, expires_at=2,
                                          origin=WINDOW, via="Claude Desktop", call="r3")),
    (channels.PEERS, m.PeersUpdate(peers=[m.PeerInfo(window="h", name="Cursor", role="host", calls=2)])),
    (channels.WELCOME, m.Welcome(session=WINDOW, window=WINDOW, servers=[
        m.ServerInfo(name="demo", status="ready", tools=["echo"], instructions="Use echo.")], pending=[],
        max_message_bytes=1 << 20)),
]


def _ids(cases: list[tuple[str, m.Body]]) -> list[str]:
    return [f"{topic[:30]}:{type(body).__name__}" for topic, body in cases]


def _wire(body: m.Body) -> Any:
    return msgspec.msgpack.decode(codec.encode("t", body)[1])


def test_the_round_trip_cases_cover_every_message_type() -> None:
    assert {type(b) for _, b in PEER_MESSAGES} == set(get_args(m.PeerBody))
    assert {type(b) for _, b in MAIN_MESSAGES} == set(get_args(m.MainBody))


def test_the_round_trip_cases_cover_every_fixed_topic() -> None:
    fixed = {
        value
        for name, value in vars(channels).items()
        if name.isupper() and isinstance(value, str) and name != "RESULT_CHANNEL_PREFIX"
    }
    covered = {t for t, _ in PEER_MESSAGES + MAIN_MESSAGES}
    assert fixed <= covered, fixed - covered


def _raw(obj: Any) -> bytes:
    return msgspec.msgpack.encode(obj)


# ---- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize(("topic", "body"), PEER_MESSAGES, ids=_ids(PEER_MESSAGES))
def test_every_peer_message_round_trips(topic: str, body: m.Body) -> None:
    frames = codec.encode(topic, body)
    assert len(frames) == 2
    assert frames[0] == topic.encode("ascii")
    assert codec.decode_from_peer(frames) == (topic, body)


@pytest.mark.parametrize(("topic", "body"), MAIN_MESSAGES, ids=_ids(MAIN_MESSAGES))
def test_every_main_message_round_trips(topic: str, body: m.Body) -> None:
    frames = codec.encode(topic, body)
    assert len(frames) == 2
    assert frames[0] == topic.encode("ascii")
    assert codec.decode_from_main(frames) == (topic, body)


def test_frames_are_bytes_and_the_body_is_a_msgpack_map() -> None:
    for topic, body in PEER_MESSAGES + MAIN_MESSAGES:
        frames = codec.encode(topic, body)
        assert all(isinstance(f, bytes) for f in frames)
        assert isinstance(msgspec.msgpack.decode(frames[1]), dict)


def test_a_fresh_result_channel_decodes_as_an_elicitation_result() -> None:
    topic = channels.new_result_channel()
    assert topic.startswith("msgElicitationTransferResult-")
    got_topic, body = codec.decode_from_peer(
        [topic.encode(), _raw({"action": "accept", "content": {"a": 1}})]
    )
    assert got_topic == topic
    assert body == m.ElicitationResult(action="accept", content={"a": 1})


def test_result_channels_differ_each_time() -> None:
    assert len({channels.new_result_channel() for _ in range(100)}) == 100


def test_accept_without_content_decodes_with_no_content() -> None:
    _, body = codec.decode_from_peer([RESULT_CHANNEL.encode(), _raw({"action": "accept"})])
    assert body == m.ElicitationResult(action="accept", content=None)


def test_unknown_topics_from_main_decode_as_channel_replies() -> None:
    topic, body = codec.decode_from_main([b"my-private-reply-channel", _raw({"result": {"isError": True}})])
    assert topic == "my-private-reply-channel"
    assert body == m.ChannelReply(result={"isError": True})


def test_unknown_body_keys_are_ignored_for_forward_compatibility() -> None:
    _, from_peer = codec.decode_from_peer([b"heartbeat", _raw({"future": 1})])
    assert from_peer == m.Heartbeat()
    _, from_main = codec.decode_from_main(
        [b"msgElicitationComplete", _raw({"server": "s", "elicitationId": "e", "extra": [1]})]
    )
    assert from_main == m.ElicitationComplete(server="s", elicitation_id="e")


def test_hello_defaults_name_and_role_when_a_peer_leaves_them_out() -> None:
    _, body = codec.decode_from_peer([b"hello", _raw({"protocol": 1, "token": "t", "window": WINDOW})])
    assert body == m.Hello(protocol=1, token="t", window=WINDOW, name="", role="renderer")


# ---- camelCase on the wire ------------------------------------------------------------------


def test_invoke_keys_are_camel_case_and_nulls_are_sent() -> None:
    wire = _wire(INVOKE_NULLS)
    assert set(wire) == {"request", "responseChannel", "createdAt", "expiresAt", "origin"}
    assert wire["expiresAt"] is None
    assert wire["origin"] is None
    assert wire["createdAt"] == 1
    # MCP's own JSON shape inside is untouched.
    assert wire["request"] == {"server": "demo", "params": INVOKE_NULLS.request.params}


def test_invoke_params_keep_mcp_key_spelling() -> None:
    wire = _wire(INVOKE)
    assert "requestedSchema" in wire["request"]["params"]
    assert wire["expiresAt"] == 1_700_000_600_000


def test_call_tool_keys_are_camel_case() -> None:
    wire = _wire(m.CallTool(server="s", tool="t", response_channel="r", arguments={"snake_case": 1}))
    assert wire == {"server": "s", "tool": "t", "responseChannel": "r", "arguments": {"snake_case": 1}}


def test_dismiss_and_complete_keys_are_camel_case() -> None:
    assert _wire(m.ElicitationDismiss(response_channel="c", reason="answered", by="w")) == {
        "responseChannel": "c",
        "reason": "answered",
        "by": "w",
    }
    # `by?` is optional in the contract and left out when there is none.
    assert _wire(m.ElicitationDismiss(response_channel="c", reason="expired")) == {
        "responseChannel": "c",
        "reason": "expired",
    }
    assert _wire(m.ElicitationComplete(server="s", elicitation_id="e")) == {
        "server": "s",
        "elicitationId": "e",
    }


def test_extension_keys_are_camel_case() -> None:
    assert _wire(m.ServerPolicy(server="s", decline_all=False)) == {"server": "s", "declineAll": False}
    assert _wire(m.ServerControl(server="s", action="stop", response_channel="r")) == {
        "server": "s",
        "action": "stop",
        "responseChannel": "r",
    }
    assert _wire(m.Reload(response_channel="r")) == {"responseChannel": "r"}
    assert _wire(m.Notice(level="info", message="m")) == {"level": "info", "message": "m"}


def test_status_request_and_error_notice_keys() -> None:
    assert _wire(m.StatusRequest(response_channel="r")) == {"responseChannel": "r"}
    assert _wire(m.ErrorNotice(code="bad-body", message="x", topic="hello")) == {
        "code": "bad-body",
        "message": "x",
        "topic": "hello",
    }


def test_welcome_keys_match_the_contract() -> None:
    wire = _wire(m.Welcome(session="s", window="w", servers=SERVERS, pending=[INVOKE]))
    assert set(wire) == {"session", "window", "servers", "pending"}
    assert set(wire["pending"][0]) == {"request", "responseChannel", "createdAt", "expiresAt", "origin"}
    assert wire["servers"][0] == {"name": "demo", "status": "ready", "tools": ["book", "ask"]}
    assert wire["servers"][1]["error"] == "exited with 1"
    assert "error" not in wire["servers"][0]  # `error?` is optional and left out when there is none


def test_channel_reply_carries_only_the_field_that_is_set() -> None:
    assert _wire(m.ChannelReply(result={"content": []})) == {"result": {"content": []}}
    assert _wire(m.ChannelReply(error=m.CallError(code=-1, message="x"))) == {
        "error": {"code": -1, "message": "x"}
    }


def test_server_info_always_carries_tools() -> None:
    wire = _wire(m.ServersUpdate(servers=[m.ServerInfo(name="slow", status="starting", tools=[])]))
    assert wire["servers"][0]["tools"] == []


# ---- refusals -------------------------------------------------------------------------------


def _refused(decode: Any, frames: list[Any], code: str) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode(frames)
    assert info.value.code == code
    assert str(info.value).startswith(code)
    return info.value


DECODERS = [codec.decode_from_peer, codec.decode_from_main]
DECODER_IDS = ["from_peer", "from_main"]


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
@pytest.mark.parametrize("count", [0, 1, 3, 4])
def test_wrong_frame_counts_are_bad_body(decode: Any, count: int) -> None:
    frames = [b"heartbeat", _raw({}), b"", b"x"][:count]
    _refused(decode, frames, "bad-body")


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
def test_an_empty_delimiter_frame_is_not_allowed(decode: Any) -> None:
    _refused(decode, [b"", b"heartbeat", _raw({})], "bad-body")


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
@pytest.mark.parametrize(
    "topic",
    ["héllo".encode(), b"\xff\xfe", "msgElicitationTransferResult-ü".encode()],
    ids=["utf8", "binary", "result"],
)
def test_non_ascii_topics_are_unknown(decode: Any, topic: bytes) -> None:
    _refused(decode, [topic, _raw({})], "unknown-topic")


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
def test_an_empty_topic_is_unknown(decode: Any) -> None:
    _refused(decode, [b"", _raw({})], "unknown-topic")


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
def test_an_overlong_topic_is_unknown(decode: Any) -> None:
    _refused(decode, [b"r" * 201, _raw({})], "unknown-topic")


@pytest.mark.parametrize(
    "topic",
    ["welcome", "msgElicitationTransferInvoke", "servers", "error", "peers", "notice", "nope", "Hello"],
)
def test_topics_a_peer_may_not_send_are_unknown(topic: str) -> None:
    err = _refused(codec.decode_from_peer, [topic.encode(), _raw({})], "unknown-topic")
    assert err.topic == topic


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
@pytest.mark.parametrize("body", [b"", b"\xc1", b"\x81", b"\xdf\xff\xff\xff\xff", b"not msgpack at all"])
def test_garbage_bodies_are_bad_body(decode: Any, body: bytes) -> None:
    err = _refused(decode, [b"heartbeat", body], "bad-body")
    assert err.topic == "heartbeat"


@pytest.mark.parametrize(
    ("topic", "body"),
    [
        ("heartbeat", [1, 2]),
        ("heartbeat", None),
        ("heartbeat", 7),
        ("hello", {"protocol": "1", "token": "t", "window": "w"}),
        ("hello", {"token": "t", "window": "w"}),
        ("hello", {"protocol": 1, "token": "t", "window": "w", "role": "admin"}),
        ("msgMcpCallTool", {"server": "s", "tool": "t"}),
        ("msgMcpCallTool", {"server": "s", "tool": "t", "response_channel": "r"}),
        ("msgMcpCallTool", {"server": "s", "tool": "t", "responseChannel": "r", "arguments": [1]}),
        ("msgMcpCallTool", {"server": "s", "tool": "t", "responseChannel": "r", "arguments": {1: "int key"}}),
        (RESULT_CHANNEL, {"action": "maybe"}),
        (RESULT_CHANNEL, {}),
        (RESULT_CHANNEL, {"action": "accept", "content": "yes"}),
        ("msgStatus", {}),
        ("msgServerControl", {"server": "s", "action": "pause", "responseChannel": "r"}),
        ("msgReload", {}),
        ("msgServerPolicy", {"server": "s", "declineAll": "yes"}),
        ("msgServerPolicy", {"server": "s", "decline_all": True}),
    ],
)
def test_valid_msgpack_of_the_wrong_shape_from_a_peer_is_bad_body(topic: str, body: Any) -> None:
    err = _refused(codec.decode_from_peer, [topic.encode(), _raw(body)], "bad-body")
    assert err.topic == topic


@pytest.mark.parametrize(
    ("topic", "body"),
    [
        ("welcome", {"session": "s", "window": "w", "servers": []}),
        (
            "welcome",
            {"session": "s", "window": "w", "servers": [{"name": "a", "status": "odd"}], "pending": []},
        ),
        ("msgElicitationTransferInvoke", {"request": {"server": "s", "params": {}}, "responseChannel": "c"}),
        (
            "msgElicitationTransferInvoke",
            {
                "request": {"server": "s", "params": {}},
                "responseChannel": "c",
                "createdAt": "now",
                "expiresAt": None,
                "origin": None,
            },
        ),
        ("msgElicitationTransferDismiss", {"responseChannel": "c", "reason": "bored"}),
        ("msgElicitationComplete", {"server": "s", "elicitation_id": "e"}),
        ("servers", {"servers": {}}),
        ("error", {"code": 3, "message": "x"}),
        ("peers", {"peers": [{"window": "w", "name": "n", "role": "admin"}]}),
        ("notice", {"level": "debug", "message": "m"}),
        ("some-reply", {"error": {"code": "x", "message": "m"}}),
        ("some-reply", [1]),
    ],
)
def test_valid_msgpack_of_the_wrong_shape_from_main_is_bad_body(topic: str, body: Any) -> None:
    err = _refused(codec.decode_from_main, [topic.encode(), _raw(body)], "bad-body")
    assert err.topic == topic


def test_invoke_requires_expires_at_and_origin_keys_even_if_null() -> None:
    body = {"request": {"server": "s", "params": {}}, "responseChannel": "c", "createdAt": 1}
    _refused(codec.decode_from_main, [b"msgElicitationTransferInvoke", _raw(body)], "bad-body")
    body |= {"expiresAt": None, "origin": None}
    _, got = codec.decode_from_main([b"msgElicitationTransferInvoke", _raw(body)])
    assert got == m.ElicitationInvoke(
        request=m.ElicitationRequest(server="s", params={}),
        response_channel="c",
        created_at=1,
        expires_at=None,
        origin=None,
    )


def test_an_oversize_body_from_a_peer_is_too_large_before_it_is_parsed() -> None:
    err = _refused(
        codec.decode_from_peer, [b"heartbeat", b"\x00" * (codec.DEFAULT_MAX_BODY_BYTES + 1)], "too-large"
    )
    assert err.topic == "heartbeat"


def test_the_size_limit_is_inclusive() -> None:
    frames = codec.encode("hello", m.Hello(protocol=1, token="t" * 100, window=WINDOW))
    size = len(frames[1])
    assert codec.decode_from_peer(frames, max_body_bytes=size)[0] == "hello"
    _refused(lambda f: codec.decode_from_peer(f, max_body_bytes=size - 1), frames, "too-large")
    assert codec.decode_from_main(frames[:1] + [_raw({})], max_body_bytes=1)[0] == "hello"
    _refused(lambda f: codec.decode_from_main(f, max_body_bytes=0), frames[:1] + [_raw({})], "too-large")


def test_main_accepts_larger_bodies_than_a_peer_may_send() -> None:
    big = m.ChannelReply(
        result={"content": [{"type": "text", "text": "x" * (2 * codec.DEFAULT_MAX_BODY_BYTES)}]}
    )
    frames = codec.encode("reply", big)
    assert codec.decode_from_main(frames) == ("reply", big)
    _refused(codec.decode_from_peer, [RESULT_CHANNEL.encode(), frames[1]], "too-large")


# ---- never anything but ProtocolError -------------------------------------------------------

_TOPICS = [
    b"hello",
    b"heartbeat",
    b"bye",
    b"msgMcpCallTool",
    b"msgStatus",
    b"msgShutdown",
    b"msgServerControl",
    b"msgReload",
    b"msgServerPolicy",
    b"peers",
    b"notice",
    RESULT_CHANNEL.encode(),
    b"welcome",
    b"msgElicitationTransferInvoke",
    b"msgElicitationTransferDismiss",
    b"msgElicitationComplete",
    b"servers",
    b"error",
    b"reply-1",
    b"",
    b"\xff",
]
_VALID_BODIES = [codec.encode(t, b)[1] for t, b in PEER_MESSAGES + MAIN_MESSAGES]


def _random_frames(rng: random.Random) -> list[bytes]:
    choice = rng.random()
    if choice < 0.1:
        return [rng.randbytes(rng.randrange(0, 20)) for _ in range(rng.randrange(0, 5))]
    topic = rng.choice(_TOPICS) if rng.random() < 0.9 else rng.randbytes(rng.randrange(0, 30))
    if choice < 0.5:
        body = rng.randbytes(rng.randrange(0, 64))
    else:
        mutated = bytearray(rng.choice(_VALID_BODIES))
        for _ in range(rng.randrange(1, 4)):
            mutation = rng.randrange(3)
            if mutation == 0 and mutated:
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            elif mutation == 1:
                del mutated[rng.randrange(len(mutated) + 1) :]
            else:
                at = rng.randrange(len(mutated) + 1)
                mutated[at:at] = rng.randbytes(rng.randrange(1, 8))
        body = bytes(mutated)
    return [topic, body]


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
def test_random_frames_never_raise_anything_but_protocol_error(decode: Any) -> None:
    rng = random.Random(0)
    decoded = refused = 0
    for _ in range(3000):
        frames = _random_frames(rng)
        try:
            decode(frames)
        except ProtocolError as exc:
            assert exc.code in CONTRACT_CODES
            refused += 1
        else:
            decoded += 1
    assert refused > 1000  # the loop really exercises refusals
    assert decoded > 0  # ... and some mutations still decode


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
def test_every_protocol_error_carries_a_contract_code(decode: Any) -> None:
    for frames in ([], [b"", b""], [b"x" * 300, b""], [b"heartbeat", b"\xc1"], [b"\xff", b"\x80"]):
        with pytest.raises(ProtocolError) as info:
            decode(frames)
        assert info.value.code in CONTRACT_CODES


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
def test_deeply_nested_bodies_are_bad_body_not_recursion_error(decode: Any) -> None:
    body = b"\x82\xa6action\xa6accept\xa7content\x81\xa1a" + b"\x91" * 5000 + b"\xc0"
    _refused(decode, [RESULT_CHANNEL.encode(), body], "bad-body")


# ---- nesting depth ---------------------------------------------------------------------------

# One level of each container kind: the bytes before the value it holds (a map's key included).
_LEVELS = {
    "fixarray": b"\x91",
    "array16": b"\xdc\x00\x01",
    "array32": b"\xdd\x00\x00\x00\x01",
    "fixmap": b"\x81\xa1k",
    "map16": b"\xde\x00\x01\xa1k",
    "map32": b"\xdf\x00\x00\x00\x01\xa1k",
}
_RESULT_HEAD = b"\x82\xa6action\xa6accept\xa7content\x81\xa1k"  # {"action": "accept", "content": {"k": ...}}
_REPLY_HEAD = b"\x81\xa6result\x81\xa1k"  # {"result": {"k": ...}}


def _nested_body(head: bytes, depth: int, level: bytes = b"\x91") -> bytes:
    """A body nested `depth` levels: the two maps of `head` (the body's own, one inside it), then
    levels of one kind around a nil."""
    return head + level * (depth - 2) + b"\xc0"


def _depth(value: Any) -> int:
    """The reference: levels of lists, tuples and dicts in a Python value (keys included)."""
    if isinstance(value, list | tuple):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max((max(_depth(k), _depth(v)) for k, v in value.items()), default=0)
    return 0


@pytest.mark.parametrize("kind", list(_LEVELS))
def test_a_body_from_a_peer_may_nest_to_the_limit_and_not_one_level_more(kind: str) -> None:
    limit = codec.MAX_NESTING_DEPTH
    at_limit = _nested_body(_RESULT_HEAD, limit, _LEVELS[kind])
    _, body = codec.decode_from_peer([RESULT_CHANNEL.encode(), at_limit])
    assert isinstance(body, m.ElicitationResult) and body.content is not None
    assert 1 + _depth(body.content) == limit
    err = _refused(codec.decode_from_peer, [RESULT_CHANNEL.encode(), _nested_body(_RESULT_HEAD, limit + 1,
                                                                                    _LEVELS[kind])], "bad-body")
    assert err.topic == RESULT_CHANNEL
    assert f"nested deeper than {limit} levels" in err.message


@pytest.mark.parametrize("kind", list(_LEVELS))
def test_main_bodies_may_nest_deeper_than_peer_bodies_up_to_their_own_limit(kind: str) -> None:
    limit = codec.MAIN_MAX_NESTING_DEPTH
    _, body = codec.decode_from_main([b"reply-1", _nested_body(_REPLY_HEAD, limit, _LEVELS[kind])])
    assert isinstance(body, m.ChannelReply) and 1 + _depth(body.result) == limit
    err = _refused(codec.decode_from_main, [b"reply-1", _nested_body(_REPLY_HEAD, limit + 1, _LEVELS[kind])],
                   "bad-body")
    assert f"nested deeper than {limit} levels" in err.message
    # What main reads from a peer has the tighter limit, for every topic it decodes.
    for topic in (b"heartbeat", b"hello", b"msgMcpCallTool", RESULT_CHANNEL.encode()):
        err = _refused(codec.decode_from_peer, [topic, _nested_body(_REPLY_HEAD, codec.MAX_NESTING_DEPTH + 1)],
                       "bad-body")
        assert "nested deeper" in err.message


def test_split_then_decode_is_checked_like_decode_from_peer() -> None:
    """main's own path: split first, decode the body later."""
    topic, raw = codec.split_from_peer([b"heartbeat", _nested_body(_REPLY_HEAD, codec.MAX_NESTING_DEPTH + 1)])
    with pytest.raises(ProtocolError, match="nested deeper") as info:
        codec.decode_peer_body(topic, raw)
    assert info.value.code == "bad-body" and info.value.topic == "heartbeat"
    assert codec.decode_peer_body(topic, _nested_body(_REPLY_HEAD, codec.MAX_NESTING_DEPTH)) == m.Heartbeat()


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
@pytest.mark.parametrize("depth", [5000, 100_000, codec.DEFAULT_MAX_BODY_BYTES - 100])
def test_bodies_nested_far_past_the_limit_are_refused_by_the_limit(decode: Any, depth: int) -> None:
    """Whatever msgspec's recursion would make of them on this Python (3.13 decodes 5,000 levels)."""
    err = _refused(decode, [RESULT_CHANNEL.encode(), _nested_body(_RESULT_HEAD, depth)], "bad-body")
    limit = codec.MAX_NESTING_DEPTH if decode is codec.decode_from_peer else codec.MAIN_MAX_NESTING_DEPTH
    assert f"nested deeper than {limit} levels" in err.message


def test_container_bytes_inside_strings_bins_and_exts_are_not_levels() -> None:
    payload = b"\x91\xdc\xdd\xde\xdf\x81" * 2000
    content = {
        "fixstr": "\x91" * 15,  # UTF-8 c2 91: a container byte in every character
        "str8": "\x91" * 100,
        "str16": "\x91" * 20_000,
        "str32": "\u07df" * 40_000,  # df 9f
        "bin": payload,
        "ext": msgspec.msgpack.Ext(5, payload),
        "fixext": msgspec.msgpack.Ext(1, b"\x91" * 16),
        "numbers": [0x9191, 0x91919191, 0x9191919191919191, -0x6e6e6e6f, 1.5e-300, 2.0**-1000],
    }
    raw = _raw({"action": "accept", "content": content})
    assert len(raw) - len(raw.translate(None, codec._CONTAINER_BYTES)) > 100_000
    assert not codec.nested_deeper_than(raw, 3)
    assert codec.nested_deeper_than(raw, 2)  # the body, content, the numbers list
    _, body = codec.decode_from_peer([RESULT_CHANNEL.encode(), raw])
    assert isinstance(body, m.ElicitationResult) and body.content == content


def test_every_body_in_the_round_trips_is_cleared_without_walking(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path: an ordinary body costs one byte count, or less, never the walk."""

    def walked(*args: Any) -> bool:
        raise AssertionError("walked an ordinary body")

    monkeypatch.setattr(codec, "_walk", walked)
    for topic, body in PEER_MESSAGES + MAIN_MESSAGES:
        frames = codec.encode(topic, body)
        assert not codec.nested_deeper_than(frames[1], codec.MAX_NESTING_DEPTH)
    call = next((topic, body) for topic, body in PEER_MESSAGES if isinstance(body, m.CallTool))
    assert codec.decode_from_peer(codec.encode(*call)) == call


def test_a_big_body_of_long_strings_is_read_by_its_headers_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    budgets: list[int] = []
    walk = codec._walk

    def recorded(raw: bytes, limit: int, max_values: int) -> bool | None:
        budgets.append(max_values)
        return walk(raw, limit, max_values)

    monkeypatch.setattr(codec, "_walk", recorded)
    text = "\u0091" * (codec.DEFAULT_MAX_BODY_BYTES // 2 - 100)  # every other byte a container byte
    frames = codec.encode(channels.CALL_TOOL, m.CallTool(server="s", tool="write", response_channel="r",
                                                         arguments={"path": "/x", "text": text}))
    assert codec.decode_from_peer(frames)[1] == m.CallTool(server="s", tool="write", response_channel="r",
                                                           arguments={"path": "/x", "text": text})
    assert budgets == [len(frames[1]) >> 8]  # one walk on a budget, which sufficed
    # Many small values: the budget runs out, the byte count decides, and here it is low.
    budgets.clear()
    flat = _raw({"server": "s", "tool": "t", "responseChannel": "r", "arguments": {"n": ["ab"] * 2000}})
    assert not codec.nested_deeper_than(flat, codec.MAX_NESTING_DEPTH)
    assert budgets == [len(flat) >> 8]


def test_arrays_of_one_fixed_size_format_are_skipped_whole() -> None:
    for items in ([1.5] * 1000, list(range(100)), [None, True, False, -3] * 100, [2**40 + i for i in range(500)],
                  [300] * 70_000):
        raw = _raw([[items], {"a": items}])
        start = raw.index(b"\xdc") + 3 if len(items) < 65536 else raw.index(b"\xdd") + 5  # after the header
        assert codec._scalar_run(raw, start, len(items))
        assert codec.nested_deeper_than(raw, 2) and not codec.nested_deeper_than(raw, 3)
    mixed = _raw([[1.5] * 99 + [[[[0]]]]])  # the run breaks at the last item, 3 levels deep
    assert codec._scalar_run(mixed, 4, 100) == 0
    assert codec.nested_deeper_than(mixed, 4) and not codec.nested_deeper_than(mixed, 5)


def _random_value(rng: random.Random, depth: int) -> Any:
    choice = rng.randrange(10)
    if depth <= 0 or choice < 4:
        return rng.choice([None, True, -1, 7, 200, 70_000, 2**40, -2**40, 0.25, "", "\x91" * rng.randrange(40),
                           "a" * 300, b"\xdc" * rng.randrange(300),
                           msgspec.msgpack.Ext(2, b"\x91" * rng.randrange(20))])
    size = rng.choice([0, 1, 2, 3, 16, 17])
    if choice < 7:
        return [_random_value(rng, depth - 1 if i == 0 else min(depth - 1, 1)) for i in range(size)]
    return {f"k{i}": _random_value(rng, depth - 1 if i == 0 else min(depth - 1, 1)) for i in range(size)}


def test_the_depth_check_agrees_with_the_nesting_of_random_values() -> None:
    rng = random.Random(7)
    for _ in range(400):
        value = _random_value(rng, rng.choice([3, 8, 40, 140]))
        raw = _raw(value)
        depth = _depth(value)
        for limit in {0, 1, depth - 1, depth, depth + 1, codec.MAX_NESTING_DEPTH}:
            if limit >= 0:
                assert codec.nested_deeper_than(raw, limit) is (depth > limit), (depth, limit)


@pytest.mark.parametrize("decode", DECODERS, ids=DECODER_IDS)
def test_truncated_and_malformed_bodies_are_left_to_the_decoder(decode: Any) -> None:
    valid = _raw({"action": "accept", "content": {"a": [[1, 2.5, "x" * 40]] * 30, "b": b"\x91" * 300}})
    for cut in range(1, len(valid)):
        err = _refused(decode, [RESULT_CHANNEL.encode(), valid[:cut]], "bad-body")
        assert "nested deeper" not in err.message
    for body in (b"\x82\xa6action\xa6accept\xa7content\xdd\xff\xff\xff\xff" + b"\x00" * 300,  # 4G items announced
                 b"\x82\xa6action\xa6accept\xa7content\xdb\xff\xff\xff\xff" + b"\x91" * 300,  # a str past the end
                 b"\x82\xa6action\xa6accept\xa7content\x81\xc1" + b"\x91" * 300):  # a never-used byte
        assert not codec.nested_deeper_than(body, 8)
        assert "nested deeper" not in _refused(decode, [RESULT_CHANNEL.encode(), body], "bad-body").message
    # What was read before the body breaks off still counts.
    assert codec.nested_deeper_than(b"\x91" * 300, codec.MAX_NESTING_DEPTH)
    trailing = _raw({"action": "accept"}) + b"\x91" * 300  # a complete value, then bytes after it
    assert not codec.nested_deeper_than(trailing, 3)
    _refused(decode, [RESULT_CHANNEL.encode(), trailing], "bad-body")


def test_a_decoder_that_runs_out_of_recursion_still_gives_bad_body() -> None:
    class Exhausted:
        def decode(self, raw: bytes) -> Any:
            raise RecursionError

    with pytest.raises(ProtocolError, match="nested too deeply") as info:
        codec._decode_body(Exhausted(), "heartbeat", b"\x80", codec.MAX_NESTING_DEPTH)  # type: ignore[arg-type]
    assert info.value.code == "bad-body"


def _nested_arguments(depth: int) -> dict[str, Any]:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return {"deep": value}


def test_encode_request_refuses_what_main_would_refuse_from_a_peer() -> None:
    # CallTool's map, its arguments' map, then the list levels: 2 + depth.
    limit = codec.MAX_NESTING_DEPTH
    ok = m.CallTool(server="s", tool="t", response_channel="r", arguments=_nested_arguments(limit - 2))
    frames = codec.encode_request(channels.CALL_TOOL, ok, codec.DEFAULT_MAX_BODY_BYTES)
    assert codec.decode_from_peer(frames) == (channels.CALL_TOOL, ok)
    deep = m.CallTool(server="s", tool="t", response_channel="r", arguments=_nested_arguments(limit - 1))
    with pytest.raises(UndeliverableRequestError, match=f"nested deeper than {limit} levels"):
        codec.encode_request(channels.CALL_TOOL, deep, codec.DEFAULT_MAX_BODY_BYTES)
    too_deep_to_encode = m.CallTool(server="s", tool="t", response_channel="r",
                                    arguments=_nested_arguments(100_000))
    with pytest.raises(UndeliverableRequestError, match="cannot carry"):
        codec.encode_request(channels.CALL_TOOL, too_deep_to_encode, 64 * codec.DEFAULT_MAX_BODY_BYTES)


def test_a_welcome_around_the_deepest_invoke_main_sends_is_within_what_peers_accept() -> None:
    params = {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {}},
              "_meta": _nested_arguments(codec.MAX_NESTING_DEPTH - 4)}  # invoke, request, params, _meta: 4
    invoke = m.ElicitationInvoke(request=m.ElicitationRequest(server="s", params=params),
                                 response_channel=RESULT_CHANNEL, created_at=1, expires_at=None, origin=None)
    encoded = codec.encode_request(channels.INVOKE, invoke, codec.DEFAULT_MAX_BODY_BYTES)[1]
    assert codec.nested_deeper_than(encoded, codec.MAX_NESTING_DEPTH - 1)  # exactly at the limit
    welcome = codec.encode_welcome(m.Welcome(session="s", window="w", servers=[], pending=[invoke]), [encoded])
    assert codec.nested_deeper_than(welcome[1], codec.MAX_NESTING_DEPTH)  # the welcome adds its own levels
    assert codec.decode_from_main(welcome)[1] == m.Welcome(session="s", window="w", servers=[], pending=[invoke])


def test_server_json_that_main_relays_nests_less_than_what_peers_accept_from_main() -> None:
    """main passes servers' results on as they come; the MCP SDK's JSON parser refuses a message
    nested 200 levels or more, so a reply (`{result}`, as deep as the JSON-RPC response) fits."""
    import mcp_types
    import pydantic

    def response(depth: int) -> bytes:  # the response's map, result's map, then lists
        return b'{"jsonrpc": "2.0", "id": 1, "result": {"a": ' + b"[" * (depth - 2) + b"]" * (depth - 2) + b"}}"

    mcp_types.jsonrpc_message_adapter.validate_json(response(150), by_name=False)
    with pytest.raises(pydantic.ValidationError, match="recursion"):
        mcp_types.jsonrpc_message_adapter.validate_json(response(codec.MAIN_MAX_NESTING_DEPTH - 1), by_name=False)
