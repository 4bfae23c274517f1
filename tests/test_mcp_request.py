"""Extension msgMcpRequest: read-only MCP requests (tools/list, prompts, resources) through main."""

from kit.main import RunningMain


def test_tools_list_carries_every_tool_with_its_input_schema(demo_main: RunningMain) -> None:
    peer = demo_main.peer(role="controller")
    peer.send("msgMcpRequest", {"server": "demo", "method": "tools/list", "params": {}, "responseChannel": "r1"})
    tools = {tool["name"]: tool for tool in peer.expect_topic("r1")["result"]["tools"]}
    assert "book_table" in tools
    assert tools["book_table"]["inputSchema"]["type"] == "object"


def test_bad_params_and_unknown_server_are_named_errors(demo_main: RunningMain) -> None:
    peer = demo_main.peer(role="controller")
    peer.send("msgMcpRequest", {"server": "demo", "method": "prompts/get", "params": {}, "responseChannel": "r2"})
    error = peer.expect_topic("r2")["error"]
    assert error["code"] == -32602 and "prompts/get" in error["message"]
    peer.send("msgMcpRequest", {"server": "nope", "method": "tools/list", "responseChannel": "r3"})
    error = peer.expect_topic("r3")["error"]
    assert error["code"] == -32602 and "unknown server 'nope'" in error["message"]


def test_a_method_outside_the_read_only_set_is_refused(demo_main: RunningMain) -> None:
    peer = demo_main.peer(role="controller")
    peer.send("msgMcpRequest", {"server": "demo", "method": "tools/call", "responseChannel": "r4"})
    assert peer.expect_error("msgMcpRequest")["code"] == "bad-body"
