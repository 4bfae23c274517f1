"""The web window's paired devices as they are on disk: read here, written by web_process/devices.py.

Several programs list them (`elicitron devices`, `elicitron status`, the Qt window), and none of
them should load the web window itself for that, so the format and its reader live here:

    <web dir>/devices.json     {"devices": [{id, name, tokenSha256, pairedAt}]}  (epoch seconds)
    <web dir>/seen/<id>        {"lastSeen": epoch seconds}: when the device last had a page open or
                               answered; its own file, so the web window never rewrites devices.json
                               for it (a rewrite racing a revocation could bring the device back)
    <web dir>/web.json         {"url", "pid"}: the running web window's address (what browsers open),
                               written once it listens, removed when it stops

The web dir is `--web-dir`, else `$ELICITRON_WEB_DIR`, else `<user state dir>/elicitron/web`. Only
a device's id (random, not its credential) and name are read here; the credential's hash stays put.
"""

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from shared.connection_file import ensure_private_dir, replace_private

DEVICES_FILE = "devices.json"
LOCK_FILE = "devices.lock"
SEEN_DIR = "seen"
RUNNING_FILE = "web.json"


def default_web_dir() -> Path:
    chosen = os.environ.get("ELICITRON_WEB_DIR")
    return Path(chosen) if chosen else platformdirs.user_state_path("elicitron") / "web"


def read_announcement(web_dir: Path | None = None) -> tuple[str, int] | None:
    """(url, pid) from web.json as the web window wrote it, or None (missing, unreadable, malformed);
    whether that pid still runs is the caller's question."""
    try:
        info = json.loads(((web_dir or default_web_dir()) / RUNNING_FILE).read_text(encoding="utf-8"))
        url, pid = info["url"], info["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (url, pid) if isinstance(url, str) and isinstance(pid, int) else None


@dataclass(frozen=True)
class PairedDevice:
    id: str
    name: str
    paired_at: float  # epoch seconds
    last_seen: float | None = None  # epoch seconds; None: never connected since pairing


def device_entries(web_dir: Path) -> list[dict[str, object]]:
    """devices.json's entries as stored (an unreadable or missing file: none)."""
    try:
        devices = json.loads((web_dir / DEVICES_FILE).read_text()).get("devices", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [entry for entry in devices if isinstance(entry, dict)] if isinstance(devices, list) else []


@contextlib.contextmanager
def devices_locked(web_dir: Path) -> Iterator[None]:
    """Held while devices.json is read and rewritten (pairing, revoking, and a main of a shared store
    mirroring the store's devices, main_process/device_mirror.py): none can undo another's change."""
    ensure_private_dir(web_dir)
    fd = os.open(web_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_device_entries(web_dir: Path, entries: list[dict[str, object]]) -> None:
    """devices.json replaced whole (0600; a reader sees the old file or the new); under devices_locked."""
    replace_private(web_dir / DEVICES_FILE, json.dumps({"devices": entries}, indent=1).encode())


def last_seen(web_dir: Path, device_id: str) -> float | None:
    if not device_id.isalnum():  # ids are hex: anything else never names a file of ours
        return None
    try:
        seen = json.loads((web_dir / SEEN_DIR / device_id).read_text()).get("lastSeen")
    except (OSError, ValueError, AttributeError):
        return None
    return float(seen) if isinstance(seen, int | float) else None


def read_paired_devices(web_dir: Path | None = None) -> list[PairedDevice]:
    """Every paired device, oldest pairing first, with when it was last seen."""
    directory = web_dir or default_web_dir()
    found = []
    for entry in device_entries(directory):
        device_id, paired_at = str(entry.get("id", "")), entry.get("pairedAt", 0)
        found.append(PairedDevice(id=device_id, name=str(entry.get("name", "")),
                                  paired_at=float(paired_at) if isinstance(paired_at, int | float) else 0.0,
                                  last_seen=last_seen(directory, device_id)))
    return sorted(found, key=lambda device: device.paired_at)
