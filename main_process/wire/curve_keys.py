"""CURVE keys for remote (tcp) windows: main's keypair and the allow-list of client keys.

Layout under `<user config dir>/elicitron/curve/` (0700): `server.key` (main's public and secret
key, z85, one per line, 0600) and `clients/<name>.pub` (one allowed client public key each).
The ZAP handler re-reads the allow-list on every handshake, so `elicitron pair` takes effect
without restarting main.
"""

import logging
from pathlib import Path

import platformdirs
import zmq
from zmq.utils import z85

from main_process.log_limiter import RateLimitedLog
from main_process.private_files import safe_filename, write_private
from shared.connection_file import ensure_private_dir
from shared.errors import ConnectionFileError

logger = logging.getLogger(__name__)


def default_keys_dir() -> Path:
    return Path(platformdirs.user_config_dir("elicitron")) / "curve"


class CurveKeys:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_keys_dir()
        self.clients_dir = self.directory / "clients"

    def server_keypair(self) -> tuple[bytes, bytes]:
        """(public, secret), made on first use."""
        ensure_private_dir(self.directory)
        path = self.directory / "server.key"
        if path.exists():
            lines = path.read_text(encoding="ascii").split()
            if len(lines) != 2:
                raise ConnectionFileError(f"{path} is malformed: expected a public and a secret key")
            return lines[0].encode(), lines[1].encode()
        public, secret = zmq.curve_keypair()
        write_private(path, f"{public.decode()}\n{secret.decode()}\n")
        logger.info("made main's CURVE keypair in %s", path)
        return public, secret

    def allow_new_client(self, name: str) -> tuple[bytes, bytes]:
        """Make a keypair for a remote window and allow its public key; returns (public, secret)."""
        ensure_private_dir(self.directory)
        ensure_private_dir(self.clients_dir)
        public, secret = zmq.curve_keypair()
        write_private(self.clients_dir / f"{safe_filename(name)}.pub", public.decode() + "\n")
        return public, secret

    def is_allowed(self, public_key: bytes) -> bool:
        try:
            files = list(self.clients_dir.glob("*.pub"))
        except OSError:
            return False
        for path in files:
            try:
                if path.read_text(encoding="ascii").strip().encode() == public_key:
                    return True
            except (OSError, UnicodeDecodeError):
                continue
        return False


class AllowListProvider:
    """ZAP credentials provider: a CURVE client gets in only with an allowed public key."""

    def __init__(self, keys: CurveKeys) -> None:
        self._keys = keys
        # Anyone who can reach the port can try keys: one line per interval, the rest counted.
        self._complaints = RateLimitedLog(logger)

    def callback(self, domain: str, key: bytes) -> bool:
        z85_key = z85.encode(key) if len(key) == 32 else key
        allowed = self._keys.is_allowed(z85_key)
        if not allowed:
            self._complaints.warning(("curve", "not allowed"), "refused a CURVE client whose key is not allowed: %s",
                                     z85_key.decode(errors="replace"))
        return allowed

