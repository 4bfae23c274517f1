"""HttpUpstream (main_process/relay/upstream_http.py): a relayed session's own streamable-HTTP connection.

In-process (asyncio, no main) against real servers over HTTP: the demo server and the conformance
server, in both eras, messages as raw bytes; an httpx Auth that only records lets the tests see
every HTTP exchange (method, MCP headers, status). Last, a process test through main: a host on
`elicitron serve --server NAME` for a `url` server.
"""

import asyncio
import json
import re
import select
import socket
import subprocess
from collections.abc import Callable, Coroutine, Generator, Iterator
from typing import Any

import httpx2
import pytest
from gateway_kit import Host, HostLoop, serve_params, text_of
from kit.env import child_env
from kit.main import RunningMain
from kit.paths import PYTHON, ROOT, TESTS
from kit.procs import end_process

from main_process.config import HttpServerConfig
from main_process.relay.upstream import UpstreamError
from main_process.relay.upstream_http import HttpUpstream, _where

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TIMEOUT_S = 30.0
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}, "sampling": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "raw-host", "version": "1"}}
Json = dict[str, Any]


# ---- what the tests observe ----------------------------------------------------------------


class Events:
    """UpstreamEvents that keep what arrives: messages in a queue, the close in a future."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Json] = asyncio.Queue()
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.closes = 0

    def on_message(self, raw: bytes) -> None:
        assert not self.closed.done(), f"a message after on_closed: {raw!r}"
        self.messages.put_nowait(json.loads(raw))

    def on_server_full(self, full: bool) -> None:
        self.full = full

    def on_closed(self, why: str) -> None:
        self.closes += 1
        if not self.closed.done():
            self.closed.set_result(why)

    async def next(self) -> Json:
        """The next message; fails at once if the session closes first."""
        if not self.messages.empty():
            return self.messages.get_nowait()
        getter = asyncio.ensure_future(self.messages.get())
        waits: list[asyncio.Future[Any]] = [getter, self.closed]
        await asyncio.wait(waits, timeout=TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            return getter.result()
        getter.cancel()
        raise AssertionError(f"the session closed: {self.closed.result()}" if self.closed.done()
                             else f"no message within {TIMEOUT_S} s")

    async def answer(self, request_id: Any) -> Json:
        """The next message, which must be the answer to `request_id` (notifications on the way
        are skipped: logging, progress)."""
        while True:
            message = await self.next()
            if "method" not in message:
                assert message.get("id") == request_id, message
                return message

    async def why(self) -> str:
        return await asyncio.wait_for(asyncio.shield(self.closed), TIMEOUT_S)


class Recorder(httpx2.Auth):
    """Authenticates nothing; keeps each exchange: (method, its MCP headers, the status)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str], int]] = []
        self.changed = asyncio.Event()

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        response = yield request
        headers = {k.lower(): v for k, v in request.headers.items()
                   if k.lower().startswith(("mcp-", "last-event-id"))}
        self.seen.append((request.method, headers, response.status_code))
        self.changed.set()

    def posts(self) -> list[dict[str, str]]:
        return [headers for method, headers, _ in self.seen if method == "POST"]

    async def wait_for(self, seen: Callable[[tuple[str, dict[str, str], int]], bool]) -> tuple[str, dict[str, str], int]:
        async def found() -> tuple[str, dict[str, str], int]:
            while True:
                for item in self.seen:
                    if seen(item):
                        return item
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(found(), TIMEOUT_S)


def run(make: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(make(), 90))


def send(upstream: HttpUpstream, message: Json) -> None:
    upstream.send(json.dumps(message).encode())


def request(request_id: int, method: str, params: Json | None = None) -> Json:
    message: Json = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def modern(request_id: int, method: str, params: Json | None = None) -> Json:
    return request(request_id, method, {**(params or {}), "_meta": ENVELOPE})


async def open_legacy(url: str, *, name: str = "demo",
                      recorder: Recorder | None = None) -> tuple[HttpUpstream, Events, Json]:
    """A handshake-era session: initialize (answered) and notifications/initialized (accepted), as
    raw bytes."""
    events = Events()
    recorder = recorder or Recorder()
    upstream = await HttpUpstream.start(HttpServerConfig(name=name, url=url), events, auth=recorder)
    send(upstream, request(1, "initialize", {
        "protocolVersion": LEGACY, "capabilities": {"elicitation": {"form": {}}, "sampling": {}},
        "clientInfo": {"name": "raw-host", "version": "1"}}))
    initialized = await events.answer(1)
    send(upstream, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    await recorder.wait_for(lambda seen: seen[0] == "POST" and seen[2] == 202)
    return upstream, events, initialized


def content_text(answer: Json) -> str:
    return "".join(item.get("text", "") for item in answer["result"]["content"])


# ---- servers -------------------------------------------------------------------------------


# The demo server's own `--http` says LISTENING once its socket is bound, a moment before uvicorn
# listens on it: a client as quick as these tests would be refused. This runs the same app on a
# socket that listens before it is announced.
DEMO_ON_A_LISTENING_SOCKET = """
import socket, sys
import anyio, uvicorn
from main_process.demo_server import app
listener = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print(f"LISTENING http://127.0.0.1:{listener.getsockname()[1]}/mcp", flush=True)
config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
anyio.run(uvicorn.Server(config).serve, [listener])
"""


def start_listening(name: str, argv: list[str], timeout_s: float = 30.0) -> tuple["subprocess.Popen[bytes]", str]:
    """A server that prints `LISTENING <url>` once it accepts connections; it and its URL."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("LISTENING "):
        stop(proc)
        raise AssertionError(f"the {name} did not start: {line!r}")
    return proc, line.split()[1]


def start_demo(port: int = 0) -> tuple["subprocess.Popen[bytes]", str]:
    """main_process/demo_server.py's app over streamable HTTP."""
    return start_listening("demo server", [PYTHON, "-c", DEMO_ON_A_LISTENING_SOCKET, str(port)])


def start_conformance(port: int = 0) -> tuple["subprocess.Popen[bytes]", str]:
    """tests/conformance_server.py over streamable HTTP, both eras."""
    return start_listening("conformance server", [PYTHON, str(TESTS / "conformance_server.py"), "--http", str(port)])


def stop(proc: "subprocess.Popen[bytes]") -> None:
    end_process(proc)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="module")
def demo_url() -> Iterator[str]:
    proc, url = start_demo()
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def conformance_url() -> Iterator[str]:
    proc, url = start_conformance()
    yield url
    stop(proc)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# ---- without a server ------------------------------------------------------------------------


def test_a_message_that_is_not_json_rpc_is_answered_or_dropped_and_the_session_lives_on() -> None:
    async def body() -> None:
        events = Events()
        # Nothing listens there: a refused message never reaches the transport.
        upstream = await HttpUpstream.start(HttpServerConfig(name="nowhere", url="http://127.0.0.1:9/mcp"), events)
        upstream.send(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1]}')
        answer = await events.next()
        assert answer["id"] == 7 and answer["error"]["code"] == -32600
        assert "not valid JSON-RPC" in answer["error"]["message"]
        upstream.send(b"not json at all")
        upstream.send(b'{"jsonrpc":"2.0","method":"notifications/x","params":5}')
        upstream.send(b"[]")
        upstream.send(b'[{"jsonrpc":"2.0","id":"a","method":"m","params":"p"},{"id":"b","method":"m"}]')
        assert [(await events.next())["id"] for _ in range(2)] == ["a", "b"]
        assert events.messages.empty() and not events.closed.done()
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)
        assert await events.why() == "the session was closed" and events.closes == 1

    run(body)


def test_urls_in_sentences_keep_no_credentials_or_query() -> None:
    assert _where("https://user:secret@example.com:8443/mcp?token=abc#x") == "https://example.com:8443/mcp"
    assert _where("http://[::1]:9000/mcp") == "http://[::1]:9000/mcp"


def test_a_transport_that_cannot_open_raises_upstream_error_at_start() -> None:
    async def body() -> None:
        config = HttpServerConfig(name="bad", url="http://127.0.0.1:9/mcp", headers={"X-Name": "Zoë"})
        with pytest.raises(UpstreamError, match="could not open a session with server 'bad'"):
            await HttpUpstream.start(config, Events())

    run(body)


# ---- handshake era -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_legacy_session_round_trips_raw_messages_and_names_its_version_on_each_later_post(demo_url: str) -> None:
    async def body() -> None:
        recorder = Recorder()
        upstream, events, initialized = await open_legacy(demo_url, recorder=recorder)
        assert initialized["result"]["protocolVersion"] == LEGACY
        assert initialized["result"]["serverInfo"]["name"] == "elicitron-demo"
        send(upstream, request(2, "tools/list"))
        listing = await events.answer(2)
        assert {"echo", "book_table"} <= {tool["name"] for tool in listing["result"]["tools"]}
        send(upstream, request(3, "tools/call", {"name": "echo", "arguments": {"text": "grüße"}}))
        called = await events.answer(3)
        assert content_text(called) == "grüße" and called["result"]["isError"] is False

        initialize, *later = recorder.posts()
        assert "mcp-session-id" not in initialize and "mcp-protocol-version" not in initialize
        assert len(later) == 3 and all(headers["mcp-protocol-version"] == LEGACY and headers["mcp-session-id"]
                                       for headers in later)
        assert not any("mcp-method" in headers for headers in later)  # 2026-07-28 headers only there
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)

    run(body)


@pytest.mark.slow
def test_an_elicitation_from_the_server_arrives_and_the_raw_answer_completes_the_call(demo_url: str) -> None:
    async def body() -> None:
        upstream, events, _ = await open_legacy(demo_url)
        send(upstream, request(2, "tools/call", {"name": "book_table", "arguments": {"restaurant": "Noma"}}))
        asked = await events.next()
        assert asked["method"] == "elicitation/create" and "id" in asked
        assert asked["params"]["message"] == "Book a table at Noma?"
        send(upstream, {"jsonrpc": "2.0", "id": asked["id"],
                        "result": {"action": "accept", "content": {"name": "Grace", "party_size": 4}}})
        booked = await events.answer(2)
        assert json.loads(content_text(booked)) == {"action": "accept", "content": {"name": "Grace", "party_size": 4}}
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)

    run(body)


@pytest.mark.slow
def test_an_answer_that_is_not_json_rpc_reaches_the_server_as_an_error_so_its_call_ends(demo_url: str) -> None:
    async def body() -> None:
        upstream, events, _ = await open_legacy(demo_url)
        send(upstream, request(2, "tools/call", {"name": "book_table", "arguments": {}}))
        asked = await events.next()
        assert asked["method"] == "elicitation/create"
        send(upstream, {"jsonrpc": "2.0", "id": asked["id"], "result": 5})
        answer = await events.answer(2)
        assert "the client's response was not valid JSON-RPC" in json.dumps(answer), answer
        assert not events.closed.done()
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)

    run(body)


@pytest.mark.slow
def test_sampling_from_the_conformance_server_is_answered_by_the_host(conformance_url: str) -> None:
    async def body() -> None:
        upstream, events, _ = await open_legacy(conformance_url, name="conformance")
        send(upstream, request(2, "tools/call", {"name": "test_sampling", "arguments": {"prompt": "Say hi"}}))
        asked = await events.next()
        assert asked["method"] == "sampling/createMessage"
        assert asked["params"]["messages"][0]["content"]["text"] == "Say hi"
        send(upstream, {"jsonrpc": "2.0", "id": asked["id"], "result": {
            "role": "assistant", "content": {"type": "text", "text": "hi there"}, "model": "m", "stopReason": "endTurn"}})
        assert content_text(await events.answer(2)) == "LLM response: hi there"
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)

    run(body)


@pytest.mark.slow
def test_a_closed_call_stream_is_resumed_because_the_version_header_asks_for_priming(conformance_url: str) -> None:
    async def body() -> None:
        recorder = Recorder()
        upstream, events, _ = await open_legacy(conformance_url, name="conformance", recorder=recorder)
        send(upstream, request(2, "tools/call", {"name": "test_reconnection", "arguments": {}}))
        answer = await events.answer(2)
        assert "properly reconnected" in content_text(answer)
        assert any(method == "GET" and "last-event-id" in headers for method, headers, _ in recorder.seen)
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)

    run(body)


# ---- 2026-07-28 ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_2026_request_gets_its_answer_with_the_headers_the_server_checks(demo_url: str) -> None:
    async def body() -> None:
        recorder = Recorder()
        events = Events()
        upstream = await HttpUpstream.start(HttpServerConfig(name="demo", url=demo_url), events, auth=recorder)
        send(upstream, modern(1, "tools/call", {"name": "echo", "arguments": {"text": "modern"}}))
        answer = await events.answer(1)
        assert content_text(answer) == "modern" and answer["result"]["resultType"] == "complete"
        assert recorder.posts() == [{"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}]
        # Its elicitation is an input round: the retry carries the answer (no server request).
        send(upstream, modern(2, "tools/call", {"name": "book_table", "arguments": {"restaurant": "Noma"}}))
        round_ = await events.answer(2)
        assert round_["result"]["resultType"] == "input_required"
        answer_key = next(iter(round_["result"]["inputRequests"]))
        send(upstream, modern(3, "tools/call", {
            "name": "book_table", "arguments": {"restaurant": "Noma"},
            "inputResponses": {answer_key: {"action": "decline"}}}))
        assert json.loads(content_text(await events.answer(3)))["action"] == "decline"
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)

    run(body)


@pytest.mark.slow
def test_2026_names_prompts_resources_and_x_mcp_header_arguments_in_headers(conformance_url: str) -> None:
    async def body() -> None:
        recorder = Recorder()
        events = Events()
        config = HttpServerConfig(name="conformance", url=conformance_url)
        upstream = await HttpUpstream.start(config, events, auth=recorder)
        send(upstream, modern(1, "prompts/get", {"name": "test_simple_prompt"}))
        assert "error" not in await events.answer(1)
        send(upstream, modern(2, "resources/read", {"uri": "test://static-text"}))
        read = await events.answer(2)
        assert read["result"]["contents"][0]["uri"] == "test://static-text"
        # A tool never listed: no Mcp-Param-Region (as the SDK's client), which the server refuses.
        send(upstream, modern(3, "tools/call", {"name": "test_x_mcp_header", "arguments": {"region": "eu west"}}))
        refused = await events.answer(3)
        assert refused["error"]["code"] == -32020, refused
        send(upstream, modern(4, "tools/list"))
        assert any(tool["name"] == "test_x_mcp_header" for tool in (await events.answer(4))["result"]["tools"])
        send(upstream, modern(5, "tools/call", {"name": "test_x_mcp_header", "arguments": {"region": "eu west"}}))
        assert content_text(await events.answer(5)) == "region=eu west"
        send(upstream, modern(6, "tools/call", {"name": "test_x_mcp_header", "arguments": {"region": "Zürich"}}))
        assert content_text(await events.answer(6)) == "region=Zürich"

        posts = recorder.posts()
        assert posts[0]["mcp-name"] == "test_simple_prompt" and posts[0]["mcp-method"] == "prompts/get"
        assert posts[1]["mcp-name"] == "test://static-text" and posts[1]["mcp-method"] == "resources/read"
        assert "mcp-param-region" not in posts[2]
        assert posts[4]["mcp-param-region"] == "eu west"
        assert posts[5]["mcp-param-region"] == "=?base64?WsO8cmljaA==?="  # not ASCII: wrapped
        assert all(headers["mcp-protocol-version"] == MODERN for headers in posts)
        assert not any("mcp-session-id" in headers for headers in posts)  # stateless: no session
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)

    run(body)


# ---- the end -------------------------------------------------------------------------------


@pytest.mark.slow
def test_close_ends_the_servers_session_with_delete_and_says_so_once(conformance_url: str) -> None:
    async def body() -> None:
        recorder = Recorder()
        upstream, events, _ = await open_legacy(conformance_url, name="conformance", recorder=recorder)
        send(upstream, request(2, "ping"))
        await events.answer(2)
        session = recorder.posts()[-1]["mcp-session-id"]
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)
        assert await events.why() == "the session was closed"
        _, headers, status = await recorder.wait_for(lambda seen: seen[0] == "DELETE")
        assert headers["mcp-session-id"] == session and status == 200
        upstream.send(json.dumps(request(3, "ping")).encode())  # after close: nothing, no second close
        assert events.closes == 1 and events.messages.empty()
        async with httpx2.AsyncClient() as client:  # the server forgot it
            gone = await client.post(conformance_url, json=request(9, "ping"), headers={
                "mcp-session-id": session, "mcp-protocol-version": LEGACY,
                "accept": "application/json, text/event-stream"})
        assert gone.status_code == 404

    run(body)


@pytest.mark.slow
@pytest.mark.parametrize(("then", "sentence"), [
    (request(2, "tools/list"), r"could not connect to http://127\.0\.0\.1:\d+/mcp \(.+\)"),
    ({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
     r"a message could not be posted to http://127\.0\.0\.1:\d+/mcp \(the server may be gone; .+\)"),
], ids=["request", "notification"])
def test_a_server_that_goes_away_closes_the_session_with_a_sentence(then: Json, sentence: str) -> None:
    proc, url = start_demo()

    async def body() -> None:
        upstream, events, _ = await open_legacy(url)
        stop(proc)
        send(upstream, then)
        why = await events.why()
        assert re.fullmatch(sentence, why), why
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)
        assert events.closes == 1

    try:
        run(body)
    finally:
        stop(proc)


@pytest.mark.slow
def test_a_server_that_restarted_has_forgotten_the_session_http_404() -> None:
    port = free_port()
    first, url = start_conformance(port)
    again: list[subprocess.Popen[bytes]] = []

    async def body() -> None:
        upstream, events, _ = await open_legacy(url, name="conformance")
        stop(first)
        again.append(start_conformance(port)[0])  # listening once it says so
        send(upstream, request(2, "tools/list"))
        assert await events.why() == "the server no longer knows this session (HTTP 404)"
        await asyncio.wait_for(upstream.close(), TIMEOUT_S)
        assert events.closes == 1

    try:
        run(body)
    finally:
        stop(first)
        for proc in again:
            stop(proc)


# ---- through main: `elicitron serve --server NAME` for a url server ------------------------------


@pytest.fixture(scope="module")
def hosts() -> Iterator[HostLoop]:
    loop = HostLoop()
    yield loop
    loop.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_host_relayed_to_a_url_server_lists_and_calls_like_direct(
    mode: str, main_factory: Callable[..., RunningMain], http_demo_server: str, hosts: HostLoop
) -> None:
    main = main_factory({"demo": {"url": http_demo_server}})
    main.wait_server_ready("demo")
    host = Host(hosts, serve_params(main.connection, "--server", "demo"), f"relay-{mode}", mode=mode).open()
    try:
        names = host.tool_names()
        assert {"echo", "book_table"} <= set(names) and not any("__" in name for name in names)
        assert text_of(host.call("echo", {"text": f"through main ({mode})"})) == f"through main ({mode})"
    finally:
        host.close()
    assert f"with demo ({_where(http_demo_server)})" in main.stderr.text()
