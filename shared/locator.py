"""The locator: where a peer started without the desktop's environment finds the running main.

The default connection path lies in the user runtime dir, which platformdirs takes from
XDG_RUNTIME_DIR. MCP hosts start stdio servers with only HOME, LOGNAME, PATH, SHELL, TERM and USER,
so `elicitron serve` started by one computes another default path than the desktop shell that
started main. main on its default path (or on the path the locator names) therefore also writes a
small file at a path that depends on HOME alone, `~/.local/state/elicitron/locator/main.json`
(`{"connection": <its connection file>, "pid": <its pid>}`), 0600 in a 0700 directory, written
atomically and never through a symlink; it removes the file on a clean exit if the file still
names it. Resolution with no --connection and no
ELICITRON_CONNECTION tries the default path first and, when no main runs there, the connection
file the locator names if that main runs.

A locator is believed only if it is a regular file of this user's, 0600, in a directory of this
user's that nobody else may write, names an absolute path to a connection file of this user's, and
that file's main (the same pid) runs here.
"""

import logging
import os
import stat
import sys
from pathlib import Path

import msgspec

from shared.connection_file import (
    ConnectionInfo,
    default_connection_path,
    ensure_private_dir,
    main_is_gone,
    read_connection_file,
)
from shared.errors import ConnectionFileError

logger = logging.getLogger(__name__)

MAX_LOCATOR_BYTES = 64 * 1024
# Elsewhere (macOS, Windows) the runtime dir does not depend on the environment a host strips.
NEEDED = sys.platform not in ("darwin", "win32")


class Locator(msgspec.Struct):
    connection: str
    pid: int


def locator_path() -> Path:
    """Depends on HOME only (not on XDG_STATE_HOME, which a desktop may set and a host strips)."""
    return Path.home() / ".local" / "state" / "elicitron" / "locator" / "main.json"


def main_started(connection: Path) -> None:
    """main is up on `connection`: write the locator if that is the default path (or the path the
    locator already names: a main started again where the last one was found)."""
    if not NEEDED:
        return
    found = read_locator()
    if connection.absolute() == default_connection_path().absolute() or (
            found is not None and Path(found.connection) == connection.absolute()):
        write_locator(connection)


def write_locator(connection: Path) -> None:
    """Say where this main is. A failure is logged, not raised: main runs on, found by everything
    started with the desktop's environment."""
    if not NEEDED:
        return
    path = locator_path()
    locator = Locator(connection=str(connection.absolute()), pid=os.getpid())
    try:
        ensure_private_dir(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, msgspec.json.encode(locator))
        finally:
            os.close(fd)
        os.replace(tmp, path)  # replaces a planted symlink itself, never writes through it
    except (OSError, ConnectionFileError) as exc:
        logger.warning("cannot write the locator %s (%s): `elicitron serve` started by a host without "
                       "XDG_RUNTIME_DIR will not find this main", path, exc)


def main_stopped(connection: Path) -> None:
    """On a clean exit: remove the locator if it still names this main."""
    if not NEEDED:
        return
    found = read_locator()
    if found is not None and found.pid == os.getpid() and Path(found.connection) == connection.absolute():
        locator_path().unlink(missing_ok=True)


def read_locator() -> Locator | None:
    """The locator, if it is there and trustworthy; None otherwise (a doubtful one is logged)."""
    path = locator_path()
    uid = os.getuid()
    try:
        link = os.lstat(path.parent)
        directory = os.stat(path.parent)
    except OSError:
        return None
    if stat.S_ISLNK(link.st_mode) and link.st_uid != uid:
        return _doubt(path, f"its directory is a symlink owned by uid {link.st_uid}")
    if not stat.S_ISDIR(directory.st_mode) or directory.st_uid != uid or directory.st_mode & 0o022:
        return _doubt(path, "its directory is not a directory of yours that only you may write")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _doubt(path, exc.strerror or str(exc))  # a symlink: ELOOP
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
            return _doubt(path, "it is not a 0600 file of yours")
        raw = os.read(fd, MAX_LOCATOR_BYTES)
    except OSError as exc:
        return _doubt(path, exc.strerror or str(exc))
    finally:
        os.close(fd)
    try:
        locator = msgspec.json.decode(raw, type=Locator)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return _doubt(path, f"it is malformed: {exc}")
    if not Path(locator.connection).is_absolute():
        return _doubt(path, "it names a relative path")
    return locator


def located_connection() -> Path | None:
    """The connection file the locator names, if its main (the locator's pid) runs; else None."""
    locator = read_locator()
    if locator is None:
        return None
    target = Path(locator.connection)
    try:
        if os.stat(target).st_uid != os.getuid():
            return None
        info = read_connection_file(target)
    except (OSError, ConnectionFileError):
        return None
    return target if info.pid == locator.pid and not main_is_gone(info) else None


def main_runs_at(path: Path) -> bool | None:
    """True: a running main's connection file; False: none there, or its main is gone; None: a
    file that cannot be read as one (the caller reports it)."""
    try:
        info: ConnectionInfo = read_connection_file(path)
    except ConnectionFileError:
        return False if not path.exists() else None
    return not main_is_gone(info)


def default_or_located(default: Path) -> Path:
    """`default` unless no main runs there and the locator names a running one elsewhere."""
    if not NEEDED or main_runs_at(default) is not False:
        return default
    located = located_connection()
    if located is not None and located != default:
        logger.debug("no main on %s; the locator names %s", default, located)
        return located
    return default


def _doubt(path: Path, why: str) -> Locator | None:
    """None, once the log says why the locator is not believed."""
    logger.warning("ignoring the locator %s: %s", path, why)
    return None
