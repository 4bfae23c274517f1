"""BlockingPeer: PeerCore (shared/peer.py) in a blocking wait loop, the CLI controller's adapter.

No event loop: whoever waits on main pumps (poll the DEALER, drain, tick), so heartbeats go out and
main's silence is judged while a command waits, which is all a command does. Socket work is done
at once; every other effect queues for the wait loop, which raises MainUnreachableError when main
is gone, refuses a request, or says nothing wanted in time. shared/peer_socket.py runs the socket.
"""

import time
from collections.abc import Callable
from pathlib import Path

import zmq

from shared.errors import MainUnreachableError
from shared.messages import Body, ChannelReply, Welcome
from shared.peer import AttachFailed, Effect, Lost, PeerCore, Refused, SocketWork, Welcomed
from shared.peer_requests import TOPICS, Answer, Request
from shared.peer_socket import BYE_LINGER_MS, MainSocket, unreachable_text


class BlockingPeer:
    def __init__(self, connection_path: Path, core: PeerCore) -> None:
        self.connection_path = connection_path
        self.core = core
        self._socket = MainSocket(connection_path, core, self._apply, options=((zmq.LINGER, BYE_LINGER_MS),))
        self._work = SocketWork(self._socket.send, self._socket.connect, self._socket.close)
        self._events: list[Effect] = []  # what the core said that is not socket work, for the wait loop

    def attach(self, timeout_s: float) -> Welcome:
        """main's welcome; raises MainUnreachableError saying why there is none."""
        self._apply(self.core.attach(time.monotonic()))
        effect = self.wait_for(lambda e: isinstance(e, Welcomed), timeout_s)
        assert isinstance(effect, Welcomed)
        return effect.welcome

    def send(self, topic: str, body: Body) -> None:
        self._socket.send(topic, body)

    def request(self, request: Request, timeout_s: float) -> ChannelReply:
        """main's answer to `request`, waited for (MainUnreachableError as `wait_for` says)."""
        answers: list[ChannelReply] = []
        self.core.expect(request.channel, Answer(answers.append))
        try:
            self.send(request.topic, request.body)
            self.wait_for(lambda _: bool(answers), timeout_s)
        finally:
            self.core.forget(request.channel)
        return answers[0]

    def close(self) -> None:
        """Bye (it still leaves within the linger) and no socket."""
        self._apply(self.core.close(), BYE_LINGER_MS)

    def wait_for(self, wanted: Callable[[Effect | None], bool], timeout_s: float) -> Effect | None:
        """Pump the socket and the core until `wanted` holds of an effect (or of None, checked after
        every burst of frames); heartbeats go out meanwhile. Raises MainUnreachableError when main
        is gone (unless that is wanted), refuses the request, or says nothing wanted within
        `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            events, self._events = self._events, []
            for effect in [*events, None]:
                if wanted(effect):  # a loss may be what the caller waits for (main's bye, on stop)
                    return effect
                self._raise_for(effect)
            if (now := time.monotonic()) >= deadline:
                raise MainUnreachableError(unreachable_text(f"no answer from main within {timeout_s:.0f} s",
                                                            self.connection_path))
            if (sock := self._socket.sock) is None:
                raise MainUnreachableError("not attached to main")
            self._socket.drain()  # main's heartbeats waiting unread are no silence
            self._apply(self.core.tick(time.monotonic()))  # a loss it finds closes the socket
            wait_ms = int(min(self.core.timing.tick, deadline - now) * 1000) + 1
            if self._socket.sock is sock and sock.poll(wait_ms):
                self._socket.drain()

    def _apply(self, effects: list[Effect], linger_ms: int = 0) -> None:
        """Socket work done at once; the rest is for the wait loop."""
        self._events += [effect for effect in effects if not self._work.do(effect, linger_ms)]

    def _raise_for(self, effect: Effect | None) -> None:
        match effect:
            case AttachFailed(why) | Lost(why):
                raise MainUnreachableError(unreachable_text(why, self.connection_path))
            case Refused(notice) if notice.topic in TOPICS:
                raise MainUnreachableError(f"main refused the request: {notice.code}: {notice.message}")
