"""Remote windows over tcp with CURVE: paired keys get in, anything else gets nothing through."""

import json
import socket
from collections.abc import Callable
from pathlib import Path

import zmq
from kit.demo import demo_stdio_entry
from kit.main import RunningMain
from kit.peer import WirePeer
from kit.window import start_window


def free_tcp_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pair(main: RunningMain, name: str) -> dict[str, str]:
    result = main.cli("pair", "--name", name)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def remote_peer(info: dict[str, str], name: str) -> WirePeer:
    return WirePeer(info["endpoint"], info["token"], name=name,
                    curve=(info["serverKey"], info["clientPublicKey"], info["clientSecretKey"]))


def test_a_local_ipc_window_and_a_remote_tcp_window_share_requests(
    main_factory: Callable[..., RunningMain], tmp_path: Path
) -> None:
    port = free_tcp_port()
    main = main_factory({"demo": demo_stdio_entry()}, "--listen", f"tcp://127.0.0.1:{port}")
    main.wait_server_ready("demo")
    info = pair(main, "laptop")
    assert info["endpoint"] == f"tcp://127.0.0.1:{port}" and info["serverKey"]
    local = main.peer(name="local")
    remote = remote_peer(info, "remote")
    main.peers.append(remote)
    assert remote.hello()["topic"] == "welcome"

    call = local.call_tool("demo", "book_table", {})
    invoke = local.expect_topic("msgElicitationTransferInvoke")
    assert remote.expect_topic("msgElicitationTransferInvoke") == invoke
    remote.answer(invoke, "accept", {"name": "From afar", "party_size": 2})
    assert local.expect_topic("msgElicitationTransferDismiss")["by"] == remote.window
    result = json.loads(local.expect_topic(call)["result"]["content"][0]["text"])
    assert result["content"]["name"] == "From afar"

    # The real renderer attaches over tcp with the paired file, too.
    remote_file = tmp_path / "remote.json"
    remote_file.write_text(json.dumps(info))
    remote_file.chmod(0o600)
    window = start_window(remote_file, "remote-window")
    try:
        main.wait_peer("remote-window", role="renderer")
        window.wait_state("connected")
    finally:
        window.end()


def test_clients_without_an_allowed_key_never_get_a_message_through(
    main_factory: Callable[..., RunningMain],
) -> None:
    port = free_tcp_port()
    main = main_factory({"demo": demo_stdio_entry()}, "--listen", f"tcp://127.0.0.1:{port}")
    info = pair(main, "good")
    endpoint = info["endpoint"]
    public, secret = (k.decode() for k in zmq.curve_keypair())
    unknown_key = WirePeer(endpoint, info["token"], name="unknown-key", curve=(info["serverKey"], public, secret))
    strangers = [unknown_key, WirePeer(endpoint, info["token"], name="no-curve")]
    for stranger in strangers:
        try:
            stranger.send_hello()
        except zmq.Again:
            pass  # the handshake never completed, so not even the hello could leave
        assert stranger.sock.poll(2000) == 0, f"{stranger.name} got an answer"
    # main refused the unknown key in the handshake and logged the key it refused; neither attached.
    assert unknown_key.handshake_refused(timeout_s=10)
    assert public in main.stderr.text()
    attached = [peer["name"] for peer in main.status()["peers"]]
    assert "unknown-key" not in attached and "no-curve" not in attached, attached
    for stranger in strangers:
        stranger.close(bye=False)
    good = remote_peer(info, "good")
    main.peers.append(good)
    assert good.hello()["topic"] == "welcome"


def test_pair_without_listen_says_how(demo_main: RunningMain) -> None:
    result = demo_main.cli("pair")
    assert result.returncode == 1 and "--listen tcp://HOST:PORT" in result.stderr
