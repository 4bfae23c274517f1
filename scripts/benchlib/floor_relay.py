"""The floor under main's end-to-end figure: a relay that does only what any ZeroMQ relay between
a peer and an MCP server must do, and none of main's own work.

`python floor_relay.py ENDPOINT` binds a ROUTER there, starts the demo server over stdio with an
`mcp.Client` configured as main configures its own (mode="auto", cache=None), prints `ready`, and
then, per call, crosses the process boundary exactly as main does: the peer's msgMcpCallTool in,
the invoke out, the answer in, a dismiss out, the result out (five messages). It reads its socket
as main does (a sync ROUTER drained from the loop on its FD) and dumps the SDK's objects as main
does, on the same event loop. What it leaves out is everything main adds: hellos and peers, rate limits, body checks,
schema checks, the audit log, rules, timeouts, expiry, several windows, the welcome list.

So "via main" against "floor" is the cost of Elicitron's own work; "floor" against "in-process" is
the cost of the process boundary itself, which no broker code can remove.
"""

import asyncio
import contextvars
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import uuid6
import zmq
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import ElicitResult, Implementation

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from kit import contract  # the kit lives in tests/
from kit.paths import DEMO_SERVER, PYTHON

from shared.event_loop import loop_factory

CALL_TOPIC = b"msgMcpCallTool"
INVOKE_TOPIC = contract.INVOKE.encode("ascii")
DISMISS_TOPIC = contract.DISMISS.encode("ascii")
STOP_TOPIC = b"bench-stop"
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode


class FloorRelay:
    """One ROUTER, one server, any number of calls in flight from any peer."""

    def __init__(self, sock: zmq.Socket[bytes]) -> None:
        self.sock = sock
        self.client: Client | None = None  # set once made: the client needs on_elicit first
        self.waiting: dict[bytes, tuple[bytes, asyncio.Future[dict[str, Any]]]] = {}
        self.calls: set[asyncio.Task[None]] = set()
        self.stopped = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.last_caller = b""  # legacy-era requests arrive outside the call's task: one peer only

    def drain(self) -> None:
        # ZMQ_FD is edge-triggered: read until EVENTS says there is nothing left.
        sock = self.sock
        while sock.get(zmq.EVENTS) & zmq.POLLIN:
            peer, topic, body = sock.recv_multipart(zmq.NOBLOCK)
            if topic == CALL_TOPIC:
                self.last_caller = peer
                task = asyncio.create_task(self.call(peer, _decode(body)))
                self.calls.add(task)
                task.add_done_callback(self.calls.discard)
            elif topic in self.waiting:
                asker, answered = self.waiting.pop(topic)
                self.sock.send_multipart([asker, DISMISS_TOPIC, _encode(
                    {"responseChannel": topic.decode("ascii"), "reason": "answered"})])
                answered.set_result(_decode(body))
            elif topic == STOP_TOPIC:
                self.stopped.set()

    def send(self, frames: list[bytes]) -> None:
        self.sock.send_multipart(frames)
        if self.sock.get(zmq.EVENTS) & zmq.POLLIN:  # a send can consume the FD's edge
            self.loop.call_soon(self.drain)

    async def call(self, peer: bytes, request: dict[str, Any]) -> None:
        token = _asker.set(peer)
        assert self.client is not None
        try:
            result = await self.client.call_tool(request["tool"], request["arguments"])
        finally:
            _asker.reset(token)
        self.send([peer, request["responseChannel"].encode("ascii"),
                   _encode({"result": result.model_dump(mode="json", by_alias=True, exclude_none=True)})])

    async def on_elicit(self, context: Any, params: Any) -> ElicitResult:
        channel = str(uuid6.uuid7())
        answered: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        asker = _asker.get(self.last_caller)
        self.waiting[channel.encode("ascii")] = (asker, answered)
        wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.send([asker, INVOKE_TOPIC, _encode({"request": {"server": "demo", "params": wire},
                                                 "responseChannel": channel})])
        answer = await answered
        return ElicitResult(action=answer["action"], content=answer.get("content"))


# The peer whose call is running: the SDK calls on_elicit inside that call's task.
_asker: contextvars.ContextVar[bytes] = contextvars.ContextVar("asker")


async def serve(endpoint: str) -> None:
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    sock.bind(endpoint)
    relay = FloorRelay(sock)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:  # the server's stderr
        client = Client(stdio_client(StdioServerParameters(command=PYTHON, args=[str(DEMO_SERVER)]), errlog=errlog),
                        elicitation_callback=relay.on_elicit, mode="auto", cache=None,
                        client_info=Implementation(name="elicitron-floor", version="0.1.0"))
        relay.client = client
        async with client:
            await client.list_tools()
            relay.loop.add_reader(sock.get(zmq.FD), relay.drain)
            print("ready", flush=True)
            relay.drain()
            await relay.stopped.wait()
            relay.loop.remove_reader(sock.get(zmq.FD))
    sock.close()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]), loop_factory=loop_factory())  # main's own loop, so only main's work differs
