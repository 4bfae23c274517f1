"""What `elicitron status` says of main's store: main writes it (`<connection file>.store`, 0600,
in the connection file's private directory) when it claims the store and again whenever the store
becomes reachable or not; the CLI reads it beside main's connection file.

A file rather than a field of main's status reply, for now: the status reply is built by the
broker, which this change leaves alone. Only the redacted URL is written (url.py).
"""

import contextlib
import os
from pathlib import Path

import msgspec

from main_process.private_files import write_private


class StoreStatus(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """main's store as `status` lists it."""

    pid: int  # the main that wrote it (a file left by a main that was killed names another pid)
    kind: str  # "SQLite" | "PostgreSQL"
    location: str  # the SQLite file, or the redacted URL
    reachable: bool | None = None  # None: not tried yet
    problem: str | None = None  # why not, the last time it failed
    machine: str | None = None  # the name this main writes on audit rows (a shared store)


def status_path(connection: Path) -> Path:
    return connection.with_name(connection.name + ".store")


def publish(connection: Path, status: StoreStatus) -> None:
    """Replace the file in one step (a reader never sees half of it). Raises OSError."""
    path = status_path(connection)
    partial = path.with_name(path.name + ".partial")
    write_private(partial, msgspec.json.encode(status).decode())
    os.replace(partial, path)


def read(connection: Path) -> StoreStatus | None:
    """What main wrote, or None (an older main, none yet, or unreadable)."""
    try:
        return msgspec.json.decode(status_path(connection).read_bytes(), type=StoreStatus)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def withdraw(connection: Path) -> None:
    """main stops: the file goes with its connection file."""
    with contextlib.suppress(FileNotFoundError):
        status_path(connection).unlink()
