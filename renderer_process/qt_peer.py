"""QtPeer: PeerCore (shared/peer.py) on the Qt event loop, as shared/peer_asyncio.py puts it on asyncio.

The Qt adapter (qtconsole's client.py style): a QSocketNotifier watches shared/peer_socket.py's
DEALER (`zmq.FD` is edge-triggered: it drains on every notice, send and tick), a QTimer ticks the
core, and the core's socket work is done here; every other effect goes to `on_effect`. The socket
queues nothing for no main (IMMEDIATE), so a hello fails until the connection is up: it goes again
every HELLO_RETRY_MS until it leaves. What cannot be sent is told to `unsent` on the loop's next
turn, once the caller has recorded what it sent.
"""

import time
from collections.abc import Callable
from pathlib import Path

import zmq
from PySide6.QtCore import QObject, QSocketNotifier, QTimer

from shared import channels
from shared.errors import ConnectionFileError
from shared.messages import Body, ChannelReply
from shared.peer import Effect, PeerCore, SocketWork
from shared.peer_requests import Answer, Request
from shared.peer_socket import BYE_LINGER_MS, MainSocket

HELLO_RETRY_MS = 20  # the connection to a local main is up within moments


class QtPeer(QObject):
    def __init__(self, connection_path: Path, core: PeerCore, on_effect: Callable[[Effect], None], *,
                 on_hello: Callable[[], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.core = core
        self._on_effect, self._on_hello = on_effect, on_hello
        # LINGER 0: a dead main never blocks close() or exit; IMMEDIATE: nothing queued for no main.
        self._socket = MainSocket(connection_path, core, self._apply, check_pid=False,
                                  options=((zmq.LINGER, 0), (zmq.IMMEDIATE, 1)), watch=self._watch,
                                  unwatch=self._unwatch, after_send=lambda: self._socket.drain())
        self._work = SocketWork(self._send_or_hello, self._socket.connect, self._socket.close)
        self._notifier: QSocketNotifier | None = None
        self._closed = False
        self._tick = QTimer(self)
        self._tick.setInterval(round(core.timing.tick * 1000))
        self._tick.timeout.connect(self._on_tick)
        self._hello_timer = QTimer(self)
        self._hello_timer.setInterval(HELLO_RETRY_MS)
        self._hello_timer.timeout.connect(self._try_hello)

    @property
    def problem(self) -> ConnectionFileError | None:
        """Why the last connect found no connection file it could use."""
        return self._socket.problem

    def start(self) -> None:
        """Attach; from here on the core keeps it attached until close()."""
        self._closed = False
        self._tick.start()
        self._apply(self.core.attach(time.monotonic()))

    def send(self, topic: str, body: Body, unsent: Callable[[], object]) -> bool:
        """Send `body` if attached; False (and `unsent()` soon) if it did not leave."""
        if self.core.attached and self._socket.send(topic, body):
            return True
        QTimer.singleShot(0, self, unsent)
        return False

    def request(self, request: Request, on_answer: Callable[[ChannelReply], object],
                unsent: Callable[[], object]) -> str:
        """Send a request answered on its channel (returned): to `on_answer`, or `unsent()` soon."""
        self.core.expect(request.channel, Answer(on_answer))  # first: the answer may come at once
        if not self.send(request.topic, request.body, unsent):
            self.core.forget(request.channel)
        return request.channel

    def close(self) -> None:
        """Say bye and let go of the socket; quiet afterwards."""
        # May run from inside one of our own slots (a window closed mid-tick), so
        # `_closed` stops whatever code resumes afterwards from reconnecting.
        self._closed = True
        self._tick.stop()
        self._hello_timer.stop()
        self._apply(self.core.close(), BYE_LINGER_MS)  # a bye even while main may be attaching us

    def _apply(self, effects: list[Effect], linger_ms: int = 0) -> None:
        for effect in effects:
            if not self._work.do(effect, linger_ms):
                self._on_effect(effect)

    def _watch(self, fd: int) -> None:
        self._notifier = QSocketNotifier(fd, QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._socket.drain)

    def _unwatch(self, fd: int) -> None:
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier.deleteLater()
            self._notifier = None
        self._hello_timer.stop()

    def _send_or_hello(self, topic: str, body: Body) -> None:
        if topic != channels.HELLO:
            self._socket.send(topic, body)
            return
        self._on_hello()
        self._hello_timer.start()
        self._try_hello()

    def _try_hello(self) -> None:
        if self.core.state != "hello-sent" or self._socket.send(channels.HELLO, self.core.hello()):
            self._hello_timer.stop()

    def _on_tick(self) -> None:
        self._socket.drain()
        if not self._closed:
            self._apply(self.core.tick(time.monotonic()))
