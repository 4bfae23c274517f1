"""`python -m renderer_process` as a real process against a ROUTER standing in for main."""

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import zmq

from shared import channels, codec, messages
from shared.connection_file import ConnectionInfo, ensure_private_dir, write_connection_file

ROOT = Path(__file__).resolve().parent.parent


def recv_topic(sock: zmq.Socket[bytes], topic: str, timeout_ms: int) -> tuple[bytes, messages.PeerBody]:
    """The next message on `topic`, skipping heartbeats; fails after `timeout_ms` without one."""
    while sock.poll(timeout_ms):
        identity, *frames = sock.recv_multipart()
        got, body = codec.decode_from_peer(frames)
        if got == topic:
            return identity, body
    raise AssertionError(f"no {topic!r} within {timeout_ms} ms")


def read_stderr_until(proc: subprocess.Popen[bytes], text: str, timeout_s: float) -> str:
    """What the process wrote to stderr up to and including `text`; fails after `timeout_s`."""
    assert proc.stderr is not None
    seen = b""
    while text.encode() not in seen:
        ready, _, _ = select.select([proc.stderr], [], [], timeout_s)
        chunk = os.read(proc.stderr.fileno(), 65536) if ready else b""
        assert chunk, f"{text!r} never appeared on stderr; got:\n{seen.decode(errors='replace')}"
        seen += chunk
    return seen.decode(errors="replace")


def test_window_starts_without_main_attaches_when_it_appears_and_says_bye_on_exit(tmp_path: Path) -> None:
    connection = tmp_path / "run" / "connection.json"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "renderer_process", "--connection", str(connection), "--name", "e2e"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
    )
    router: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    try:
        # No main yet: the window must open anyway, say so, and keep retrying.
        read_stderr_until(proc, "disconnected - reconnecting", timeout_s=20)
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

        proc.send_signal(signal.SIGINT)  # same exit path as closing the window: app.quit()
        bye_identity, bye = recv_topic(router, channels.BYE, timeout_ms=5_000)
        assert bye_identity == identity and bye == messages.Bye()
        assert proc.wait(timeout=10) == 0
    finally:
        router.close(linger=0)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_the_renderer_never_imports_mcp() -> None:
    code = (
        "import sys, renderer_process.app\n"
        "sys.exit(1 if any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules) else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"renderer_process pulled in mcp\n{done.stderr}"
