"""The asyncio adapter (MainLink, AskerClient) against a real ROUTER standing in for main, over ipc
and over tcp with CURVE from a paired file: main's bye, a new main with a new token, the reattach."""

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

from gateway_process.link import MainLink
from shared import channels, codec, messages
from shared.connection_file import ConnectionInfo, ensure_private_dir, write_connection_file

TIMEOUT_S = 5.0


class AsyncMain:
    """A ROUTER and the connection file naming it (a paired file for tcp)."""

    def __init__(self, connection_path: Path, token: str, transport: str, pid: int | None = None) -> None:
        ensure_private_dir(connection_path.parent)
        self.sock = zmq.asyncio.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        keys: dict[str, str] = {}
        if transport == "tcp":
            public, secret = zmq.curve_keypair()
            client_public, client_secret = zmq.curve_keypair()
            self.sock.setsockopt(zmq.CURVE_SERVER, 1)
            self.sock.setsockopt(zmq.CURVE_SECRETKEY, secret)
            keys = {"server_key": public.decode(), "client_public_key": client_public.decode(),
                    "client_secret_key": client_secret.decode()}
            self.sock.bind("tcp://127.0.0.1:*")
        else:
            self.sock.bind(f"ipc://{connection_path.parent / (token[:4] + '.sock')}")
        endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        write_connection_file(connection_path, ConnectionInfo(protocol=1, endpoint=endpoint, token=token,
                                                              pid=pid or os.getpid(), **keys))

    async def expect(self, topic: str) -> tuple[bytes, Any]:
        """The next message on `topic` (heartbeats and others skipped)."""
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                identity, *frames = await self.sock.recv_multipart()
                got, body = codec.decode_from_peer(frames)
                if got == topic:
                    return identity, body

    async def send(self, identity: bytes, topic: str, body: messages.Body) -> None:
        await self.sock.send_multipart([identity, *codec.encode(topic, body)])

    async def welcome(self, identity: bytes, hello: messages.Hello, session: str) -> None:
        await self.send(identity, channels.WELCOME, messages.Welcome(session=session, window=hello.window,
                                                                     servers=[], pending=[]))

    def close(self) -> None:
        self.sock.close(linger=0)


@pytest.fixture(params=["ipc", "tcp"])
def connection(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    yield tmp_path / "run" / "connection.json", str(request.param)


class Events:
    """LinkEvents: the session of each welcome, and each detach."""

    def __init__(self) -> None:
        self.attached: asyncio.Queue[str] = asyncio.Queue()
        self.detached: asyncio.Queue[str] = asyncio.Queue()

    def on_pushed(self, body: messages.MainBody) -> None:
        if isinstance(body, messages.Welcome):
            self.attached.put_nowait(body.session)

    def on_detached(self, why: str) -> None:
        self.detached.put_nowait(why)


def test_a_link_hears_mains_bye_at_once_and_attaches_to_the_next_main(connection: tuple[Path, str]) -> None:
    path, transport = connection

    async def run() -> None:
        first = AsyncMain(path, "a1" * 16, transport)
        events = Events()
        link = MainLink(path, "probe host", events)
        attaching = asyncio.ensure_future(link.attach())
        identity, hello = await first.expect(channels.HELLO)
        assert (hello.token, hello.role) == ("a1" * 16, "host")
        await first.welcome(identity, hello, "s1")
        await asyncio.wait_for(attaching, TIMEOUT_S)
        assert await events.attached.get() == "s1"

        await first.send(identity, channels.BYE, messages.Bye())
        assert await asyncio.wait_for(events.detached.get(), TIMEOUT_S) == "main is stopping"
        first.close()
        second = AsyncMain(path, "b2" * 16, transport)
        try:
            identity, again = await second.expect(channels.HELLO)
            assert (again.token, again.window) == ("b2" * 16, hello.window)
            await second.welcome(identity, again, "s2")
            assert await asyncio.wait_for(events.attached.get(), TIMEOUT_S) == "s2"  # the next main
            link.close()
            await second.expect(channels.BYE)
        finally:
            second.close()

    asyncio.run(run())


def test_an_asker_asks_its_open_question_again_of_the_next_main(connection: tuple[Path, str]) -> None:
    from asker_process.client import AskerClient

    path, transport = connection

    async def run() -> None:
        first = AsyncMain(path, "c3" * 16, transport)
        client = AskerClient(messages.AskerInfo(name="probe", pid=os.getpid()), path)
        params = {"mode": "form", "message": "Go?", "requestedSchema": {"type": "object", "properties": {}}}
        asking = asyncio.ensure_future(client.ask(params, 60))
        identity, hello = await first.expect(channels.HELLO)
        await first.welcome(identity, hello, "s1")
        _, asked = await first.expect(channels.ASK)
        await first.send(identity, channels.BYE, messages.Bye())
        first.close()
        second = AsyncMain(path, "d4" * 16, transport)
        try:
            identity, hello = await second.expect(channels.HELLO)
            await second.welcome(identity, hello, "s2")
            _, again = await second.expect(channels.ASK)
            assert again.params == asked.params and again.response_channel != asked.response_channel
            assert 50 < again.timeout_seconds < 60  # the time it has left
            answer = messages.QuestionAnswer(action="accept", outcome="accept", content={})
            await second.send(identity, again.response_channel, messages.ChannelReply(answer=answer))
            assert await asyncio.wait_for(asking, TIMEOUT_S) == answer
            await second.expect(channels.BYE)  # no question open: the asker detaches
        finally:
            second.close()

    asyncio.run(run())


@pytest.mark.slow
def test_a_link_told_its_main_was_killed_detaches_once_the_process_has_ended(tmp_path: Path) -> None:
    """A killed main's sockets close a moment before its pid is gone: serve, handed its pipes back
    by the socket closing, waits for the process to end, so the host's next request goes to a new
    main instead of into the void. The connection file names a stand-in process for main's pid."""
    path = tmp_path / "run" / "connection.json"
    stand_in = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)

    async def run() -> None:
        main = AsyncMain(path, "e5" * 16, "ipc", pid=stand_in.pid)
        events = Events()
        link = MainLink(path, "probe host", events)
        try:
            attaching = asyncio.ensure_future(link.attach())
            identity, hello = await main.expect(channels.HELLO)
            await main.welcome(identity, hello, "s1")
            await asyncio.wait_for(attaching, TIMEOUT_S)
            link.check_main()
            assert link.attached and events.detached.empty()  # the process runs: nothing to say yet
            ending = asyncio.ensure_future(link.main_ended(TIMEOUT_S * 4))
            await asyncio.sleep(0)  # (one turn of the loop: it watches the process now)
            assert not ending.done()
            assert stand_in.stdin is not None
            stand_in.stdin.close()  # the stand-in ends (unreaped: a zombie is gone all the same)
            await asyncio.wait_for(ending, TIMEOUT_S * 2)
            assert not link.attached
            assert events.detached.get_nowait() == f"main (pid {stand_in.pid}) has exited"
        finally:
            link.close()
            main.close()

    try:
        asyncio.run(run())
    finally:
        stand_in.kill()
        stand_in.wait()
