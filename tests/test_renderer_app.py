"""The renderer's own entry point (`renderer_process.app.run`, what `python -m renderer_process` runs) as
a real process, via the kit's window probe, against a ROUTER standing in for main."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import zmq
from kit.paths import ROOT
from kit.window import start_window

from shared import channels, codec, messages
from shared.connection_file import ConnectionInfo, ensure_private_dir, write_connection_file

pytestmark = pytest.mark.slow  # every test here starts a process


def recv_topic(sock: zmq.Socket[bytes], topic: str, timeout_ms: int) -> tuple[bytes, messages.PeerBody]:
    """The next message on `topic`, skipping heartbeats; fails after `timeout_ms` without one."""
    while sock.poll(timeout_ms):
        identity, *frames = sock.recv_multipart()
        got, body = codec.decode_from_peer(frames)
        if got == topic:
            return identity, body
    raise AssertionError(f"no {topic!r} within {timeout_ms} ms")


def test_window_starts_without_main_attaches_when_it_appears_and_says_bye_on_exit(tmp_path: Path) -> None:
    connection = tmp_path / "run" / "connection.json"
    window = start_window(connection, "e2e")
    router: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    try:
        # No main yet: the window must open anyway, say so, and keep retrying.
        window.wait_state("disconnected - reconnecting", timeout_s=20)
        ensure_private_dir(connection.parent)
        endpoint = f"ipc://{connection.parent / 'main.sock'}"
        router.bind(endpoint)
        write_connection_file(
            connection, ConnectionInfo(protocol=1, endpoint=endpoint, token="ab" * 16, pid=os.getpid())
        )

        identity, hello = recv_topic(router, channels.HELLO, timeout_ms=10_000)
        assert isinstance(hello, messages.Hello)
        assert (hello.token, hello.name, hello.role) == ("ab" * 16, "e2e", "renderer")
        welcome = messages.Welcome(session=channels.new_uuid7(), window=hello.window, servers=[], pending=[])
        router.send_multipart([identity, *codec.encode(channels.WELCOME, welcome)])

        window.proc.send_signal(signal.SIGINT)  # same exit path as closing the window: app.quit()
        bye_identity, bye = recv_topic(router, channels.BYE, timeout_ms=5_000)
        assert bye_identity == identity and bye == messages.Bye()
        assert window.proc.wait(timeout=10) == 0
    finally:
        router.close(linger=0)
        window.end()


def test_the_renderer_never_imports_mcp() -> None:
    code = (
        "import sys, renderer_process.app\n"
        "sys.exit(1 if any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules) else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, f"renderer_process pulled in mcp\n{done.stderr}"
