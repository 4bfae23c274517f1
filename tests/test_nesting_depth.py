"""Nesting depth (PROTOCOL.md section 1). Across a real main: a body from a peer nested past the
contract's limit gets `bad-body` unread, main goes on serving, and the peer that sent it stays
attached (the bodies built here as raw msgpack, as any third-party peer would). In the window:
the one tree that recurses on what main relays takes the deepest body main may send."""

from typing import Any

from kit import contract, wire
from kit.main import RunningMain
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem
from pytestqt.qtbot import QtBot

from renderer_process.result_view import ResultView
from shared import codec, messages

LIMIT = contract.MAX_NESTING_DEPTH


def call_nested(depth: int, channel: str) -> bytes:
    """msgMcpCallTool to the demo's echo whose body nests `depth` levels: its own map, the
    arguments' map, then lists around `deep`'s value."""
    deep: Any = 0
    for _ in range(depth - 2):
        deep = [deep]
    return wire.encode({"server": "demo", "tool": "echo", "responseChannel": channel,
                        "arguments": {"text": "deep", "deep": deep}})


def test_a_body_nested_past_the_limit_is_bad_body_and_the_peer_stays_attached(demo_main: RunningMain) -> None:
    peer = demo_main.peer(name="deep-sender")

    peer.send_raw([contract.CALL_TOOL.encode(), call_nested(LIMIT + 1, "too-deep")])
    error = peer.expect_error(contract.CALL_TOOL)
    assert error["code"] == "bad-body"
    assert f"nested deeper than {LIMIT} levels" in error["message"]

    # Far deeper, and on a topic main otherwise takes silently: refused the same way.
    peer.send_raw([contract.HEARTBEAT.encode(), b"\x81\xa1k" + b"\x91" * 100_000 + b"\xc0"])
    assert peer.expect_error(contract.HEARTBEAT)["code"] == "bad-body"

    # At the limit the call goes through to the server and is answered on its channel.
    peer.send_raw([contract.CALL_TOOL.encode(), call_nested(LIMIT, "at-the-limit")])
    assert peer.expect_topic("at-the-limit")["result"]["content"][0]["text"] == "deep"

    # The same peer, still attached, gets its answer; main is alive and lists it.
    reply = peer.expect_topic(peer.call_tool("demo", "echo", {"text": "still here"}))
    assert reply["result"]["content"][0]["text"] == "still here"
    assert demo_main.proc.poll() is None
    assert any(p["name"] == "deep-sender" for p in demo_main.status()["peers"])
    assert not [topic for topic, _ in peer.received if topic == "too-deep"]  # the refused call never ran


def test_the_result_tree_shows_a_reply_as_deep_as_main_may_send(qtbot: QtBot) -> None:
    depth = codec.MAIN_MAX_NESTING_DEPTH  # the reply's map, result's map, then structuredContent's lists
    raw = b"\x81\xa6result\x81\xb1structuredContent" + b"\x91" * (depth - 2) + b"\xa4leaf"
    _, reply = codec.decode_from_main([b"call-1", raw])
    assert isinstance(reply, messages.ChannelReply)
    view = ResultView()
    qtbot.addWidget(view)
    view.show_reply("demo/deep", reply)
    tree = next(w for w in view.shown_widgets() if isinstance(w, QTreeWidget))
    item: QTreeWidgetItem | None = tree.invisibleRootItem()
    levels = 0
    while item is not None and item.childCount():
        item, levels = item.child(0), levels + 1
    assert item is not None and item.text(1) == '"leaf"'
    assert levels == depth - 2  # a row for each list inside the outermost (the tree itself), and the leaf
