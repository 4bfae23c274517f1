"""The gateway's pure parts, one unit each: naming, the stdio line reader, a peer's calls in main, the
config key, and the window's host texts."""

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway_process.http_app import parse_listen, security_settings
from gateway_process.http_hosts import route_addresses, served_names
from gateway_process.http_logs import MAX_CHARS, RepeatFilter
from gateway_process.http_sessions import EVICT_IDLE_S, OWN_IDLE_S, SessionBudget
from main_process.config import parse_config
from main_process.http_gateway import check_exposure, check_listen, forget_old_token_file, new_token
from main_process.wire.peer_calls import PeerCalls
from main_process.wire.peers import Peer
from renderer_process.hosts import hosts_text, via_text
from shared import messages
from shared.errors import ConfigError
from shared.lines import LineSplitter, LineWriter, Oversized
from shared.merged_names import Exposure, combined_instructions

SERVERS = {
    "demo": messages.ServerInfo(name="demo", status="ready", tools=["echo", "book_table"], instructions="Demo."),
    "demo__x": messages.ServerInfo(name="demo__x", status="ready", tools=["echo"]),
    "slow": messages.ServerInfo(name="slow", status="starting", tools=[]),
}


def test_one_server_alone_keeps_its_own_instructions() -> None:
    assert combined_instructions(Exposure(only="demo"), SERVERS) == "Demo."


def test_combined_instructions_name_each_server() -> None:
    text = combined_instructions(Exposure(), SERVERS) or ""
    assert text.startswith("Tools and prompts of 3 MCP servers through Elicitron, each named <server>__<name>")
    assert text.endswith("## demo\nDemo.")


def test_the_stdio_reader_splits_lines_and_skips_an_oversized_one_unread() -> None:
    splitter = LineSplitter(limit=10)
    assert splitter.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert splitter.feed(b":2}\n") == [b'{"b":2}']
    out = splitter.feed(b'{"id": 42, "method": "x"')
    assert len(out) == 1 and isinstance(out[0], Oversized) and out[0].request_id() == 42
    assert splitter.feed(b", more and more") == []  # still the same line: dropped
    assert splitter.feed(b'"}\n{"c":3}\n') == [b'{"c":3}']
    assert Oversized(size=11, head=b'{"jsonrpc": "2.0", "id": "r-1"').request_id() == "r-1"
    assert Oversized(size=11, head=b"garbage").request_id() is None


def test_the_stdio_reader_gives_the_same_lines_whatever_the_chunks() -> None:
    stream = b'{"id":1}\n\n{"id":2}\n' + b"x" * 30 + b'\n{"id":3}\n'
    for size in (1, 5, 9, 10, 11, len(stream)):
        splitter = LineSplitter(limit=20)
        got: list[bytes | Oversized] = []
        for start in range(0, len(stream), size):
            got += splitter.feed(stream[start:start + size])
        assert [line if isinstance(line, bytes) else line.size for line in got] == \
            [b'{"id":1}', b"", b'{"id":2}', 30, b'{"id":3}'], size


def test_the_stdio_writer_sends_a_turns_first_line_at_once_and_the_rest_together() -> None:
    async def scenario() -> tuple[bytes, bytes, bytes]:
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        writer = await LineWriter.open(write_end)
        try:
            writer.write(b"first\n")
            at_once = os.read(read_end, 100)  # what the host can read before this turn of the loop ends
            writer.write(b"second\n")
            writer.write(b"third\n")
            try:
                before_end = os.read(read_end, 100)
            except BlockingIOError:
                before_end = b""
            await writer.flush()
            return at_once, before_end, os.read(read_end, 100)
        finally:
            writer.close()
            os.close(read_end)
            os.close(write_end)

    assert asyncio.run(scenario()) == (b"first\n", b"", b"second\nthird\n")


def test_a_peers_calls_are_cancelled_once_and_forgotten_when_answered() -> None:
    calls = PeerCalls()
    window = Peer(b"\x00w1", "w1", "a window", "renderer", 0.0)
    replies: list[Any] = []
    cancelled: list[str] = []
    reply_a, started_a = calls.track(window, "a", replies.append)
    started_a(lambda: cancelled.append("a"))
    reply_b, started_b = calls.track(window, "b", replies.append)
    started_b(lambda: cancelled.append("b"))
    assert calls.cancel(window.routing_id, "a") and cancelled == ["a"]
    reply_a(messages.ChannelReply(result={}))
    reply_a(messages.ChannelReply(result={}))  # every reply passes on; the tracking ended with the first
    assert calls.cancel(window.routing_id, "a") is False  # answered: nothing to cancel
    assert calls.cancel(b"\x00other", "b") is False  # another peer's channel of that name: not its call
    reply_b(messages.ChannelReply(result={}))
    assert calls.cancel(window.routing_id, "b") is False and cancelled == ["a"] and len(replies) == 3


def test_elicitation_route_is_checked_in_the_config() -> None:
    config = parse_config({"mcpServers": {"a": {"command": "x", "elicitationRoute": "first"}, "b": {"command": "y"}}},
                          "mcp.json")
    assert (config.servers["a"].elicitation_route, config.servers["b"].elicitation_route) == ("first", "windows")
    with pytest.raises(ConfigError, match=r"mcp.json: mcpServers.a: \"elicitationRoute\" must be"):
        parse_config({"mcpServers": {"a": {"command": "x", "elicitationRoute": "both"}}}, "mcp.json")


def test_mcp_http_listen_values_and_allowed_hosts() -> None:
    assert check_listen("8765") == "127.0.0.1:8765"
    assert check_listen("0.0.0.0:80") == "0.0.0.0:80"
    with pytest.raises(ConfigError, match=r"expected \[HOST:\]PORT"):
        check_listen("localhost:http")
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:8080") == ("::1", 8080)
    assert security_settings(served_names("127.0.0.1")).allowed_hosts == ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    assert "https://studio.lan:*" in security_settings(served_names("studio.lan")).allowed_origins
    assert served_names("fe80::1")[-1] == "fe80::1" and "[fe80::1]:*" in security_settings(["fe80::1"]).allowed_hosts
    everywhere = served_names("0.0.0.0")  # this machine's names and addresses, as LAN hosts name it
    assert socket.gethostname() in everywhere and set(route_addresses()) <= set(everywhere)


def test_a_lan_address_needs_tls_or_insecure_http(tmp_path: Path) -> None:
    assert check_exposure("127.0.0.1:80", None, None, False) is None
    assert check_exposure("0.0.0.0:80", None, None, True) is None
    with pytest.raises(ConfigError, match="--tls-cert FILE --tls-key FILE.*--insecure-http"):
        check_exposure("0.0.0.0:80", None, None, False)
    with pytest.raises(ConfigError, match="go together"):
        check_exposure("0.0.0.0:80", tmp_path / "cert.pem", None, False)
    (tmp_path / "cert.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match="cannot load them"):
        check_exposure("0.0.0.0:80", tmp_path / "cert.pem", tmp_path / "cert.pem", False)


def test_the_http_token_is_new_each_time_and_the_old_kept_one_goes(tmp_path: Path) -> None:
    tokens = {new_token() for _ in range(3)}
    assert len(tokens) == 3 and all(len(token) >= 32 for token in tokens)
    kept = tmp_path / "mcp-http-token"  # where earlier versions kept one token for ever
    kept.write_text("old\n")
    forget_old_token_file(kept)
    forget_old_token_file(kept)  # gone already: nothing to say
    assert not kept.exists()


def test_the_window_names_hosts_and_their_calls() -> None:
    invoke = messages.ElicitationInvoke(request=messages.ElicitationRequest(server="demo", params={}),
                                        response_channel="c", created_at=0, expires_at=None, origin="h1",
                                        via="Claude Desktop")
    assert via_text(invoke) == "via Claude Desktop"
    # another main's request on a shared store: the card says whose machine holds it
    assert via_text(msgspec.structs.replace(invoke, machine="laptop-a")) == "via Claude Desktop on laptop-a"
    assert via_text(msgspec.structs.replace(invoke, via=None, machine="laptop-a")) == "on laptop-a"
    peers = [messages.PeerInfo(window="w", name="desk", role="renderer"),
             messages.PeerInfo(window="h1", name="Claude Desktop", role="host", calls=2),
             messages.PeerInfo(window="h2", name="Cursor", role="host", calls=0)]
    assert hosts_text(peers) == "Hosts: Claude Desktop (2 calls), Cursor"
    assert hosts_text(peers[:1]) == ""


@pytest.mark.slow
def test_the_cli_knows_serve_without_importing_mcp() -> None:
    """`elicitron status` and friends must stay fast: `serve`'s arguments come without `mcp`."""
    code = ("import sys, cli_process.cli as cli; parser = cli._parser(); "
            "parser.parse_args(['serve', '--server', 'demo']); "
            "sys.exit(1 if any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules) else 0)")
    done = subprocess.run([sys.executable, "-c", code], check=False, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0


class _Session:
    def __init__(self, budget: SessionBudget, host: str, now: float, busy: bool = False) -> None:
        self.host, self.last_used, self._busy, self.ended = host, now, busy, False
        budget.add(self)

    def busy(self) -> bool:
        return self._busy

    def end(self) -> None:
        self.ended = True


def test_http_sessions_are_capped_per_host_and_in_all_and_an_idle_one_gives_way() -> None:
    now = [0.0]
    budget = SessionBudget(max_total=3, max_per_host=2, clock=lambda: now[0])
    first, streaming = _Session(budget, "leaky", 0.0), _Session(budget, "leaky", 0.0, busy=True)
    refusal = budget.refusal("leaky") or ""
    assert "'leaky' already has 2 MCP sessions" in refusal and "DELETE" in refusal and budget.refused == 1
    assert budget.refusal("other") is None
    other = _Session(budget, "other", 0.0)
    assert "has its 3 MCP sessions open and none idle" in (budget.refusal("third") or "")
    now[0] = EVICT_IDLE_S  # over the total cap, any host's idle session gives way (never one with a stream)
    assert "already has 2" in (budget.refusal("leaky") or "")  # over its own cap, only one idle for a minute
    assert budget.refusal("third") is None and first.ended and not streaming.ended and not other.ended
    _Session(budget, "third", now[0])
    now[0] = OWN_IDLE_S
    again = _Session(budget, "leaky", 0.0)
    assert budget.refusal("leaky") is None and again.ended
    assert budget.refused == 3


def test_the_http_childs_log_says_a_repeated_complaint_once_and_cuts_a_long_one() -> None:
    import logging

    def record(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("mcp.server.transport_security", logging.WARNING, __file__, 1, msg, args, None)

    repeats = RepeatFilter(interval_s=3600)
    long_host = record("Invalid Host header: " + "x" * 20_000)  # an f-string of the SDK's, a peer's header in it
    assert repeats.filter(long_host) and len(long_host.getMessage()) < MAX_CHARS + 100
    assert not repeats.filter(record("Invalid Host header: another.example"))  # the same kind
    assert repeats.filter(record("refused %s", "a")) and not repeats.filter(record("refused %s", "b"))
