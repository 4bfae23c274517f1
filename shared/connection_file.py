"""The connection file: how peers find main (endpoint, token, pid, CURVE key)."""

import hashlib
import logging
import os
import shlex
import stat
import tempfile
import warnings
from pathlib import Path

import msgspec
import platformdirs

from shared import PROTOCOL_VERSION
from shared.errors import ConnectionFileError

logger = logging.getLogger(__name__)

ENV_VAR = "ELICITRON_CONNECTION"
IPC_PATH_LIMIT = 107  # sockaddr_un.sun_path, less the terminating NUL


class ConnectionInfo(msgspec.Struct, rename="camel", omit_defaults=True):
    """Contract fields plus optional extensions: a local file names main's tcp listener
    (`remoteEndpoint`, `remoteServerKey`) and its MCP HTTP gateway (`mcpHttpUrl`, `mcpHttpToken`);
    a paired remote file carries the client's CURVE keypair."""

    protocol: int
    endpoint: str
    token: str
    pid: int
    server_key: str | None = None
    client_public_key: str | None = None
    client_secret_key: str | None = None
    remote_endpoint: str | None = None
    remote_server_key: str | None = None
    mcp_http_url: str | None = None  # `main --mcp-http`: where MCP hosts reach the gateway (`/mcp`)
    mcp_http_token: str | None = None  # ... and the bearer token they must send
    host_pipes: str | None = None  # a Unix socket: a local `serve --server` hands main its stdio (PROTOCOL.md §14, host pipes)

    @property
    def is_remote(self) -> bool:
        """Main is reached over tcp: a paired file, main (and its pid) on another machine."""
        return self.endpoint.startswith("tcp://")


def default_connection_path() -> Path:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to a private /tmp dir,
        # which is exactly what we want on headless boxes.
        warnings.simplefilter("ignore")
        runtime_dir = platformdirs.user_runtime_dir("elicitron")
    return Path(runtime_dir) / "connection.json"


def resolve_connection_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--connection beats ELICITRON_CONNECTION beats the platform default; when no main runs on the
    default path, the running main the locator names (shared/locator.py: a host may start us
    without the desktop's XDG_RUNTIME_DIR)."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        return Path(from_env)
    from shared.locator import default_or_located  # it imports this module

    return default_or_located(default_connection_path())


def ensure_private_dir(directory: Path) -> None:
    """Create `directory` 0700, tightening it if it is looser; refuse one owned by someone else
    (or a symlink someone else planted), since its files would be theirs to read or swap."""
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        link = os.lstat(directory)
        info = os.stat(directory)
    except OSError as exc:
        raise ConnectionFileError(f"cannot create the private directory {directory}: {exc.strerror or exc}") from exc
    uid = os.getuid()
    if stat.S_ISLNK(link.st_mode) and link.st_uid != uid:
        raise ConnectionFileError(f"{directory} is a symlink owned by uid {link.st_uid}, not by you; refusing it")
    if not stat.S_ISDIR(info.st_mode):
        raise ConnectionFileError(f"{directory} is not a directory")
    if info.st_uid != uid:
        raise ConnectionFileError(f"{directory} is owned by uid {info.st_uid}, not by you (uid {uid}); "
                                  "refusing to keep private files there")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        try:
            directory.chmod(0o700)
        except OSError as exc:
            raise ConnectionFileError(f"{directory} is mode {mode:o} and cannot be made 0700: {exc}") from exc
        logger.warning("tightened %s from mode %o to 0700", directory, mode)


def ipc_endpoint_beside(connection_path: Path, name: str = "main.sock") -> str:
    """The ipc:// endpoint for main's socket (or another of main's, `name`); falls back to a short
    private dir when too long."""
    socket_path = connection_path.parent / name
    if len(str(socket_path)) > IPC_PATH_LIMIT:
        digest = hashlib.sha256(str(connection_path).encode()).hexdigest()[:16]
        short_dir = Path(tempfile.gettempdir()) / f"elicitron-{digest}"
        ensure_private_dir(short_dir)
        socket_path = short_dir / name
    return f"ipc://{socket_path}"


def write_connection_file(path: Path, info: ConnectionInfo) -> None:
    """Write atomically, 0600 from the first byte, in a 0700 directory."""
    ensure_private_dir(path.parent)
    replace_private(path, msgspec.json.encode(info))


def replace_private(path: Path, data: bytes) -> None:
    """`path` holds `data`, whole or not at all (a temp file renamed over it), 0600 from the first
    byte; its directory must exist."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_connection_file(path: Path) -> ConnectionInfo:
    try:
        raw = path.read_bytes()
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        raise ConnectionFileError(f"no main is running (no connection file at {path})") from None
    except OSError as exc:
        raise ConnectionFileError(f"cannot read connection file {path}: {exc}") from exc
    if mode & 0o077:
        raise ConnectionFileError(f"connection file {path} is mode {mode:o}, open to other users; it must be "
                                  f"0600: chmod 600 {shlex.quote(str(path))}")
    try:
        info = msgspec.json.decode(raw, type=ConnectionInfo)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ConnectionFileError(f"connection file {path} is malformed: {exc}") from exc
    if info.protocol != PROTOCOL_VERSION:
        raise ConnectionFileError(f"connection file {path} speaks protocol {info.protocol}, not {PROTOCOL_VERSION}")
    return info


def names_remote_main(path: Path) -> bool:
    """The file at `path` names a main over tcp (False when there is no file it can read)."""
    try:
        return read_connection_file(path).is_remote
    except ConnectionFileError:
        return False


def remove_connection_file(path: Path, token: str) -> None:
    """Remove the file only if it is still ours (a newer main may have replaced it)."""
    try:
        current = read_connection_file(path)
    except ConnectionFileError:
        return
    if current.token == token:
        path.unlink(missing_ok=True)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs; one that exited but was not reaped yet (a zombie) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc here: kill(0) said it runs


def main_is_gone(info: ConnectionInfo) -> bool:
    """A local connection file whose main no longer runs (it was killed): stale. A tcp file names a
    main on another machine, whose pid says nothing here."""
    return info.endpoint.startswith("ipc://") and not pid_alive(info.pid)
