"""shared/channels.py's topic table against what derives from it: every topic name has one row, the codec
decodes each topic as its row's body, the bodies are the wire unions, and every request a peer
builds goes on a topic main answers on its response channel."""

from typing import get_args

import msgspec
import pytest

from shared import channels, codec, messages
from shared import peer_requests as requests
from shared.errors import ProtocolError


def test_every_topic_name_has_exactly_one_row() -> None:
    names = [topic.name for topic in channels.TABLE]
    assert len(names) == len(set(names))
    declared = {value for name, value in vars(channels).items()
                if name.isupper() and isinstance(value, str) and value != channels.RESULT_CHANNEL_PREFIX}
    assert set(names) == declared


def test_the_wire_unions_are_the_tables_bodies() -> None:
    assert set(get_args(messages.PeerBody)) == {t.body for t in channels.TO_MAIN.values()} | {channels.RESULT_BODY}
    assert set(get_args(messages.MainBody)) == {t.body for t in channels.TO_PEER.values()} | {channels.REPLY_BODY}


def test_each_topic_a_peer_sends_has_a_body_type_of_its_own() -> None:
    assert len(channels.SENT_AS) == len(channels.TO_MAIN)
    assert all(channels.SENT_AS[topic.body] == name for name, topic in channels.TO_MAIN.items())


def test_a_topic_answered_on_a_response_channel_has_one_in_its_body() -> None:
    for topic in channels.TO_MAIN.values():
        if topic.reply:
            assert "response_channel" in topic.body.__struct_fields__, topic.name


@pytest.mark.parametrize("topic", channels.TABLE, ids=lambda topic: topic.name)
def test_the_codec_reads_each_topic_as_its_rows_body_and_no_other_way(topic: channels.Topic) -> None:
    # Every field left out: a body a field short is refused as bad-body (all but the empty ones).
    raw = msgspec.msgpack.encode({})
    required = [field for field in msgspec.structs.fields(topic.body) if field.required]
    for decode, way in ((codec.decode_from_peer, topic.to_main), (codec.decode_from_main, topic.to_peer)):
        frames = [topic.name.encode(), raw]
        if required and way:
            with pytest.raises(ProtocolError, match="does not match the contract"):
                decode(frames)
        elif way:
            assert decode(frames) == (topic.name, topic.body())
        elif decode is codec.decode_from_peer:
            with pytest.raises(ProtocolError, match="no channel named"):
                decode(frames)


def test_every_request_a_peer_builds_goes_on_a_topic_answered_on_its_channel() -> None:
    built = [requests.call_tool("s", "t", {}), requests.control_server("s", "stop"), requests.reload(),
             requests.sign_in_redirect("s", "e", "u"), requests.mcp_request("s", "tools/list", {}),
             requests.rules(), requests.revoke_rules([]), requests.status(), requests.rotate_http_token(),
             requests.auth("s", "status")]
    assert {request.topic for request in built} <= channels.REQUESTS
    for request in built:
        assert codec.decode_from_peer(codec.encode(request.topic, request.body)) == (request.topic, request.body)
        assert msgspec.to_builtins(request.body)["responseChannel"] == request.channel
