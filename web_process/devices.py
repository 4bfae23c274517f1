"""Pairing codes and device credentials, kept in the web window's private directory.

The directory (`--web-dir`, else `$ELICITRON_WEB_DIR`, else `<user state dir>/elicitron/web`) is
0700 and every file in it 0600:

    web.json           the running web window: its URL and pid (written once it listens)
    pairing/<sha256>   one pairing code `elicitron pair --web` made: {name, person, expiresAt}; the
                       file is named by the code's hash, so the directory never holds a usable code
    devices.json       paired devices: {id, name, tokenSha256, pairedAt}; never a credential itself
    seen/<id>          when a device was last seen (shared/web_devices.py reads both for listings)
    devices.lock       held while devices.json is read and rewritten (pairing here, revoking in
                       `elicitron devices revoke`): neither can undo the other

A pairing is one file: `pair --web` creates it (O_EXCL) and prints `<url>/pair#<code>` (the code in
the fragment: it never reaches a log or a Referer). Opening the link shows a page whose button
POSTs the code; the web process unlinks the file, and only the request whose unlink succeeded is
paired, so a code works once, even with two tabs racing. A code older than CODE_LIFETIME_S fails.
A code made without a name names its device when it is redeemed, after the person who made it and
the browser that redeemed it (`ana's Chrome on Android`, user_agent.py): "browser" said neither.
The device gets a fresh random credential as a cookie; only its SHA-256 is stored. Removing a
device from devices.json revokes it at once (the file is read again on every check, and an open
page's stream within REVOKE_CHECK_S, and before each event it would get).
"""

import contextlib
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from shared.connection_file import ensure_private_dir, pid_alive, replace_private
from shared.errors import DeviceError, PairingError, WebWindowNotRunningError
from shared.web_devices import (
    DEVICES_FILE,
    RUNNING_FILE,
    SEEN_DIR,
    PairedDevice,
    default_web_dir,
    device_entries,
    devices_locked,
    read_announcement,
    write_device_entries,
)
from web_process.user_agent import device_name

CODE_LIFETIME_S = 300.0  # five minutes
CODE_BYTES = 24
TOKEN_BYTES = 32
MAX_NAME_CHARS = 80
SEEN_INTERVAL_S = 60.0  # a device's last-seen time is written at most this often

Device = PairedDevice  # what the web window knows of a device: id, name, when paired


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class WebDir:
    def __init__(self, path: Path | None = None, *, clock: Callable[[], float] | None = None) -> None:
        self.path = path or default_web_dir()
        self._now = clock or time.time
        self._paired_ids: tuple[tuple[int, int, int], frozenset[str]] | None = None  # devices.json's stat, ids
        self._seen_written: dict[str, float] = {}

    def _ensure(self) -> None:
        ensure_private_dir(self.path)
        ensure_private_dir(self.path / "pairing")

    # ---- the running web window -------------------------------------------------------------

    def announce(self, url: str) -> None:
        self._ensure()
        replace_private(self.path / RUNNING_FILE, json.dumps({"url": url, "pid": os.getpid()}).encode())

    def withdraw(self) -> None:
        try:
            info = json.loads((self.path / RUNNING_FILE).read_text())
            if info.get("pid") == os.getpid():
                (self.path / RUNNING_FILE).unlink()
        except (OSError, ValueError):
            pass

    def running_url(self) -> str:
        """The URL of the web window that runs now; WebWindowNotRunningError when none does."""
        announced = read_announcement(self.path)
        if announced is None:
            raise WebWindowNotRunningError(f"no web window is running (nothing in {self.path}); start one with "
                                           "`elicitron web`")
        url, pid = announced
        if not pid_alive(pid):
            raise WebWindowNotRunningError(f"no web window is running (pid {pid} of {self.path / RUNNING_FILE} is "
                                           "gone); start one with `elicitron web`")
        return url

    # ---- pairing ----------------------------------------------------------------------------

    def new_code(self, name: str | None = None, *, person: str = "") -> str:
        """A fresh one-time code for a device called `name`, valid CODE_LIFETIME_S; without a name,
        the device is named when the code is redeemed, after `person` and its browser."""
        self._ensure()
        code = secrets.token_urlsafe(CODE_BYTES)
        body = json.dumps({"name": _one_line(name or ""), "person": _one_line(person),
                           "expiresAt": self._now() + CODE_LIFETIME_S})
        fd = os.open(self.path / "pairing" / _digest(code), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(body)
        return code

    def redeem(self, code: str, user_agent: str = "") -> tuple[Device, str]:
        """The new device and its credential for a valid code, which is used up; PairingError otherwise.
        `user_agent` (the redeeming browser's) names a device its code did not name."""
        if not code or len(code) > 200:
            raise PairingError("unknown pairing code")
        self._ensure()
        self._drop_expired()
        slot = self.path / "pairing" / _digest(code)
        try:
            pairing = json.loads(slot.read_text())
            slot.unlink()  # the claim: of two requests with one code, one unlink fails
        except (OSError, ValueError):
            raise PairingError("unknown or used pairing code") from None
        if float(pairing.get("expiresAt", 0)) < self._now():
            raise PairingError("the pairing code has expired")
        token = secrets.token_urlsafe(TOKEN_BYTES)
        name = _one_line(str(pairing.get("name") or "")) or _one_line(
            device_name(_one_line(str(pairing.get("person") or "")), user_agent))
        device = Device(id=secrets.token_hex(8), name=name, paired_at=self._now())
        with self._devices_locked():
            devices = device_entries(self.path)
            devices.append({"id": device.id, "name": device.name, "tokenSha256": _digest(token),
                            "pairedAt": device.paired_at})
            self._write_devices(devices)
        return device, token

    def _drop_expired(self) -> None:
        now = self._now()
        for slot in (self.path / "pairing").iterdir():
            try:
                if float(json.loads(slot.read_text()).get("expiresAt", 0)) < now:
                    slot.unlink()
            except (OSError, ValueError):
                continue

    # ---- devices ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _devices_locked(self) -> Iterator[None]:
        self._ensure()
        with devices_locked(self.path):
            yield

    def _write_devices(self, devices: list[dict[str, object]]) -> None:
        write_device_entries(self.path, devices)

    def device_for(self, token: str | None) -> Device | None:
        """The paired device whose credential `token` is, or None."""
        if not token or len(token) > 200:
            return None
        digest = _digest(token)
        for entry in device_entries(self.path):
            if secrets.compare_digest(str(entry.get("tokenSha256", "")), digest):
                return _device(entry)
        return None

    def device_for_id(self, device_id: str) -> Device | None:
        """The device still paired under `device_id` (None once it was removed from devices.json)."""
        return next((device for device in self.devices() if device.id == device_id), None)

    def still_paired(self, device_id: str) -> bool:
        """Whether `device_id` is in devices.json; cheap enough to ask every second per page (the
        file is read again only when its stat changed: every write is a new file, renamed)."""
        try:
            info = os.stat(self.path / DEVICES_FILE)
            key = (info.st_ino, info.st_mtime_ns, info.st_size)
        except OSError:
            return False
        if self._paired_ids is None or self._paired_ids[0] != key:
            self._paired_ids = (key, frozenset(str(entry.get("id")) for entry in device_entries(self.path)))
        return device_id in self._paired_ids[1]

    def devices(self) -> list[Device]:
        return [_device(entry) for entry in device_entries(self.path)]

    def seen(self, device: Device) -> None:
        """`device` has a page open or answered now: its last-seen time, at most every SEEN_INTERVAL_S."""
        now = self._now()
        if now - self._seen_written.get(device.id, float("-inf")) < SEEN_INTERVAL_S or not device.id.isalnum():
            return
        self._seen_written[device.id] = now
        try:
            ensure_private_dir(self.path / SEEN_DIR)
            replace_private(self.path / SEEN_DIR / device.id, json.dumps({"lastSeen": now}).encode())
        except OSError:
            pass  # a listing without the newest time is all that is lost

    def revoke(self, name_or_id: str) -> list[Device]:
        """Unpair the device with this id, else the one device with this name; its open pages get
        nothing more. DeviceError when none matches, or when the name is several devices'."""
        with self._devices_locked():
            entries = device_entries(self.path)
            chosen = [entry for entry in entries if str(entry.get("id")) == name_or_id] or [
                entry for entry in entries if str(entry.get("name")) == name_or_id]
            if not chosen:
                known = ", ".join(sorted({str(entry.get("name")) for entry in entries})) or "none"
                raise DeviceError(f"no paired web device is called {name_or_id!r} (paired: {known}); "
                                  "`elicitron devices` lists them")
            if len(chosen) > 1:
                ids = ", ".join(str(entry.get("id")) for entry in chosen)
                raise DeviceError(f"{len(chosen)} paired web devices are called {name_or_id!r}: revoke one by "
                                  f"its id ({ids}), as `elicitron devices` lists them")
            self._write_devices([entry for entry in entries if entry not in chosen])
        for entry in chosen:
            with contextlib.suppress(OSError):
                (self.path / SEEN_DIR / str(entry.get("id"))).unlink()
        return [_device(entry) for entry in chosen]


def _one_line(name: str) -> str:
    """A name as one line of at most MAX_NAME_CHARS."""
    return " ".join(name.split())[:MAX_NAME_CHARS]


def _device(entry: dict[str, object]) -> Device:
    paired_at = entry.get("pairedAt", 0)
    return Device(id=str(entry.get("id")), name=str(entry.get("name")),
                  paired_at=float(paired_at) if isinstance(paired_at, int | float) else 0.0)
