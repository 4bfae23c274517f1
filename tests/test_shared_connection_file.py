"""shared.connection_file: how peers find main, and why they can trust what they find."""

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared import PROTOCOL_VERSION
from shared.connection_file import (
    ENV_VAR,
    IPC_PATH_LIMIT,
    ConnectionInfo,
    default_connection_path,
    ensure_private_dir,
    ipc_endpoint_beside,
    read_connection_file,
    remove_connection_file,
    resolve_connection_path,
    write_connection_file,
)
from shared.errors import ConnectionFileError, ElicitronError

IPC_INFO = ConnectionInfo(protocol=1, endpoint="ipc:///run/elicitron/main.sock", token="ab" * 16, pid=4242)
TCP_INFO = ConnectionInfo(
    protocol=1,
    endpoint="tcp://127.0.0.1:5555",
    token="cd" * 16,
    pid=4243,
    server_key="rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7",
)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def short_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short private temp dir that tempfile.gettempdir() also returns, so fallbacks land in it."""
    base = Path(tempfile.mkdtemp(prefix="elt-", dir="/tmp" if os.path.isdir("/tmp") else None))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


# ---- write / read ---------------------------------------------------------------------------


@pytest.mark.parametrize("info", [IPC_INFO, TCP_INFO], ids=["ipc", "tcp"])
def test_write_then_read_round_trips(tmp_path: Path, info: ConnectionInfo) -> None:
    path = tmp_path / "run" / "connection.json"
    write_connection_file(path, info)
    assert read_connection_file(path) == info


def test_the_file_holds_the_contract_json(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    write_connection_file(path, TCP_INFO)
    assert json.loads(path.read_text()) == {
        "protocol": 1,
        "endpoint": "tcp://127.0.0.1:5555",
        "token": "cd" * 16,
        "pid": 4243,
        "serverKey": TCP_INFO.server_key,
    }
    write_connection_file(path, IPC_INFO)
    assert "serverKey" not in json.loads(path.read_text())


def test_a_file_written_by_another_client_is_readable(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    path.write_text(
        json.dumps({"protocol": 1, "endpoint": "tcp://h:1", "token": "t", "pid": 7, "serverKey": "k"})
    )
    path.chmod(0o600)
    assert read_connection_file(path) == ConnectionInfo(
        protocol=1, endpoint="tcp://h:1", token="t", pid=7, server_key="k"
    )


def test_file_is_0600_and_dir_is_0700(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "connection.json"
    write_connection_file(path, IPC_INFO)
    assert mode_of(path) == 0o600
    assert mode_of(path.parent) == 0o700


def test_file_is_0600_even_with_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = tmp_path / "run" / "connection.json"
        write_connection_file(path, IPC_INFO)
    finally:
        os.umask(old)
    assert mode_of(path) == 0o600
    assert mode_of(path.parent) == 0o700


def test_overwriting_a_loose_file_leaves_a_0600_file_and_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "run" / "connection.json"
    path.parent.mkdir(mode=0o700)
    path.write_text("{}")
    path.chmod(0o644)
    write_connection_file(path, IPC_INFO)
    assert mode_of(path) == 0o600
    assert read_connection_file(path) == IPC_INFO
    assert sorted(p.name for p in path.parent.iterdir()) == ["connection.json"]


def test_a_looser_dir_is_tightened(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    directory.chmod(0o755)
    write_connection_file(directory / "connection.json", IPC_INFO)
    assert mode_of(directory) == 0o700
    assert "tightened" in caplog.text


def test_ensure_private_dir_leaves_a_stricter_dir_alone(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    directory.chmod(0o500)
    try:
        ensure_private_dir(directory)
        assert mode_of(directory) == 0o500
    finally:
        directory.chmod(0o700)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o666])
def test_a_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "connection.json"
    write_connection_file(path, IPC_INFO)
    path.chmod(mode)
    with pytest.raises(ConnectionFileError) as info:
        read_connection_file(path)
    assert str(path) in str(info.value)
    assert "0600" in str(info.value)


def test_a_read_only_owner_file_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    write_connection_file(path, IPC_INFO)
    path.chmod(0o400)
    assert read_connection_file(path) == IPC_INFO


def test_a_missing_file_means_no_main_is_running(tmp_path: Path) -> None:
    path = tmp_path / "nothing-here.json"
    with pytest.raises(ConnectionFileError) as info:
        read_connection_file(path)
    assert "no main is running" in str(info.value)
    assert str(path) in str(info.value)


def test_a_missing_directory_also_means_no_main_is_running(tmp_path: Path) -> None:
    with pytest.raises(ConnectionFileError, match="no main is running"):
        read_connection_file(tmp_path / "gone" / "connection.json")


def test_a_directory_in_place_of_the_file_is_a_connection_file_error(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    path.mkdir()
    with pytest.raises(ConnectionFileError):
        read_connection_file(path)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "not json",
        "[]",
        '{"protocol": 1}',
        '{"protocol": "1", "endpoint": "ipc://x", "token": "t", "pid": 1}',
        '{"protocol": 1, "endpoint": "ipc://x", "token": 5, "pid": 1}',
    ],
)
def test_malformed_content_is_a_connection_file_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "connection.json"
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(ConnectionFileError) as info:
        read_connection_file(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("protocol", [0, 2, 99])
def test_another_protocol_version_is_refused(tmp_path: Path, protocol: int) -> None:
    path = tmp_path / "connection.json"
    write_connection_file(path, ConnectionInfo(protocol=protocol, endpoint="ipc://x", token="t", pid=1))
    with pytest.raises(ConnectionFileError) as info:
        read_connection_file(path)
    assert f"protocol {protocol}" in str(info.value)
    assert str(PROTOCOL_VERSION) in str(info.value)


def test_connection_file_error_is_an_elicitron_error() -> None:
    assert issubclass(ConnectionFileError, ElicitronError)


# ---- remove ---------------------------------------------------------------------------------


def test_remove_deletes_our_own_file(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    write_connection_file(path, IPC_INFO)
    remove_connection_file(path, IPC_INFO.token)
    assert not path.exists()


def test_remove_leaves_a_file_with_another_token_alone(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    write_connection_file(path, TCP_INFO)  # a newer main replaced ours
    remove_connection_file(path, IPC_INFO.token)
    assert read_connection_file(path) == TCP_INFO


def test_remove_of_a_missing_file_is_quiet(tmp_path: Path) -> None:
    remove_connection_file(tmp_path / "connection.json", "anything")


def test_remove_leaves_an_untrusted_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "connection.json"
    path.write_text("garbage")
    remove_connection_file(path, "anything")
    assert path.read_text() == "garbage"


# ---- where the file is ----------------------------------------------------------------------


def test_explicit_path_beats_env_and_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env.json"))
    assert resolve_connection_path(tmp_path / "explicit.json") == tmp_path / "explicit.json"
    assert resolve_connection_path(str(tmp_path / "explicit.json")) == tmp_path / "explicit.json"


def test_env_beats_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env.json"))
    assert resolve_connection_path() == tmp_path / "env.json"
    assert resolve_connection_path(None) == tmp_path / "env.json"


def test_default_when_nothing_is_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no locator (tests/test_stripped_env.py) names a main
    got = resolve_connection_path()
    assert got == default_connection_path()
    assert got.name == "connection.json"
    assert "elicitron" in str(got.parent)


def test_an_empty_env_var_means_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_connection_path() == default_connection_path()


def test_the_env_var_is_named_as_documented() -> None:
    assert ENV_VAR == "ELICITRON_CONNECTION"


def test_ipc_endpoint_sits_beside_the_connection_file(short_tmp: Path) -> None:
    path = short_tmp / "run" / "connection.json"
    assert ipc_endpoint_beside(path) == f"ipc://{short_tmp / 'run' / 'main.sock'}"


def test_ipc_endpoint_falls_back_to_a_short_private_path(short_tmp: Path, tmp_path: Path) -> None:
    long_dir = tmp_path / ("d" * 100) / ("e" * 100)
    path = long_dir / "connection.json"
    endpoint = ipc_endpoint_beside(path)
    assert endpoint.startswith("ipc://")
    socket_path = Path(endpoint.removeprefix("ipc://"))
    assert len(str(socket_path)) <= IPC_PATH_LIMIT == 107
    assert socket_path.name == "main.sock"
    assert socket_path.parent.parent == short_tmp
    assert mode_of(socket_path.parent) == 0o700
    # Stable for one connection path, distinct for another.
    assert ipc_endpoint_beside(path) == endpoint
    assert ipc_endpoint_beside(long_dir / "other.json") != endpoint


def test_a_path_right_at_the_limit_stays_beside(short_tmp: Path) -> None:
    pad = IPC_PATH_LIMIT - len(str(short_tmp / "main.sock")) - 1
    directory = short_tmp / ("x" * pad)
    assert len(str(directory / "main.sock")) == IPC_PATH_LIMIT
    assert ipc_endpoint_beside(directory / "connection.json") == f"ipc://{directory / 'main.sock'}"
    longer = short_tmp / ("x" * (pad + 1))
    assert ipc_endpoint_beside(longer / "connection.json") != f"ipc://{longer / 'main.sock'}"
