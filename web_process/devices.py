"""Pairing codes and device credentials, kept in the web window's private directory.

The directory (`--web-dir`, else `$ELICITRON_WEB_DIR`, else `<user state dir>/elicitron/web`) is
0700 and every file in it 0600:

    web.json           the running web window: its URL and pid (written once it listens)
    pairing/<sha256>   one pairing code `elicitron pair --web` made: {name, expiresAt}; the file is
                       named by the code's hash, so the directory never holds a usable code
    devices.json       paired devices: {id, name, tokenSha256, pairedAt}; never a credential itself

A pairing is one file: `pair --web` creates it (O_EXCL) and prints `<url>/pair#<code>` (the code in
the fragment: it never reaches a log or a Referer). Opening the link shows a page whose button
POSTs the code; the web process unlinks the file, and only the request whose unlink succeeded is
paired, so a code works once, even with two tabs racing. A code older than CODE_LIFETIME_S fails.
The device gets a fresh random credential as a cookie; only its SHA-256 is stored. Removing a
device from devices.json revokes it at once (the file is read again on every check, and an open
page's stream before each event it would get).
"""

import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from shared.connection_file import ensure_private_dir, pid_alive, replace_private
from shared.errors import PairingError, WebWindowNotRunningError

CODE_LIFETIME_S = 300.0  # five minutes
CODE_BYTES = 24
TOKEN_BYTES = 32
MAX_NAME_CHARS = 80


def default_web_dir() -> Path:
    chosen = os.environ.get("ELICITRON_WEB_DIR")
    return Path(chosen) if chosen else platformdirs.user_state_path("elicitron") / "web"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Device:
    id: str
    name: str
    paired_at: float


class WebDir:
    def __init__(self, path: Path | None = None, *, clock: Callable[[], float] | None = None) -> None:
        self.path = path or default_web_dir()
        self._now = clock or time.time

    def _ensure(self) -> None:
        ensure_private_dir(self.path)
        ensure_private_dir(self.path / "pairing")

    # ---- the running web window -------------------------------------------------------------

    def announce(self, url: str) -> None:
        self._ensure()
        replace_private(self.path / "web.json", json.dumps({"url": url, "pid": os.getpid()}).encode())

    def withdraw(self) -> None:
        try:
            info = json.loads((self.path / "web.json").read_text())
            if info.get("pid") == os.getpid():
                (self.path / "web.json").unlink()
        except (OSError, ValueError):
            pass

    def running_url(self) -> str:
        """The URL of the web window that runs now; WebWindowNotRunningError when none does."""
        try:
            info = json.loads((self.path / "web.json").read_text())
            url, pid = str(info["url"]), int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            raise WebWindowNotRunningError(f"no web window is running (nothing in {self.path}); start one with "
                              "`elicitron web`") from None
        if not pid_alive(pid):
            raise WebWindowNotRunningError(f"no web window is running (pid {pid} of {self.path / 'web.json'} is gone); "
                              "start one with `elicitron web`")
        return url

    # ---- pairing ----------------------------------------------------------------------------

    def new_code(self, name: str) -> str:
        """A fresh one-time code for a device called `name`, valid CODE_LIFETIME_S."""
        name = " ".join(name.split())[:MAX_NAME_CHARS] or "browser"
        self._ensure()
        code = secrets.token_urlsafe(CODE_BYTES)
        body = json.dumps({"name": name, "expiresAt": self._now() + CODE_LIFETIME_S})
        fd = os.open(self.path / "pairing" / _digest(code), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(body)
        return code

    def redeem(self, code: str) -> tuple[Device, str]:
        """The new device and its credential for a valid code, which is used up; PairingError otherwise."""
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
        device = Device(id=secrets.token_hex(8), name=str(pairing.get("name") or "browser"), paired_at=self._now())
        devices = self._read_devices()
        devices.append({"id": device.id, "name": device.name, "tokenSha256": _digest(token),
                        "pairedAt": device.paired_at})
        replace_private(self.path / "devices.json", json.dumps({"devices": devices}, indent=1).encode())
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

    def _read_devices(self) -> list[dict[str, object]]:
        try:
            devices = json.loads((self.path / "devices.json").read_text()).get("devices", [])
        except (OSError, ValueError, AttributeError):
            return []
        return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []

    def device_for(self, token: str | None) -> Device | None:
        """The paired device whose credential `token` is, or None."""
        if not token or len(token) > 200:
            return None
        digest = _digest(token)
        for entry in self._read_devices():
            if secrets.compare_digest(str(entry.get("tokenSha256", "")), digest):
                return Device(id=str(entry.get("id")), name=str(entry.get("name")),
                              paired_at=float(entry.get("pairedAt", 0) or 0))  # type: ignore[arg-type]
        return None

    def device_for_id(self, device_id: str) -> Device | None:
        """The device still paired under `device_id` (None once it was removed from devices.json)."""
        return next((device for device in self.devices() if device.id == device_id), None)

    def devices(self) -> list[Device]:
        return [Device(id=str(e.get("id")), name=str(e.get("name")), paired_at=float(e.get("pairedAt", 0) or 0))  # type: ignore[arg-type]
                for e in self._read_devices()]
